"""Signed subscription records on Apache Kafka 4.4: a forged record changes nothing.

Two standalone gateways share a topic store on a real Kafka 4.4 broker and a
key file. An alter through one reaches the other (its records verify there);
records written straight to the topic by anyone else, the issue's attack
included, are refused, counted and named in the audit trail by both.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from peers.kafka import KafkaBroker
from tests.hostile_store import produce
from tests.kadmin import describe_subscription, set_subscription
from tests.kafka import kafka_broker
from tests.procs import GatewayProcess, wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.integration]

TOPIC = "__client_metrics_subscriptions"


@pytest.fixture(scope="module")
def kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaBroker]:
    yield from kafka_broker(request, tmp_path_factory)


def signed_gateway(data_dir: Path, bootstrap: str, key_file: Path) -> GatewayProcess:
    toml = f"""
[gateway]
subscriptions_bootstrap_servers = "{bootstrap}"
subscriptions_fetch_wait_ms = 500
subscriptions_key_file = "{key_file}"
"""
    return GatewayProcess(data_dir, toml).start(timeout=60)


def test_a_forged_record_changes_no_gateway_and_is_counted(
    kafka: KafkaBroker, tmp_path: Path
) -> None:
    key_file = tmp_path / "subscriptions.key"
    key_file.write_text(os.urandom(32).hex() + "\n")
    key_file.chmod(0o600)
    first = signed_gateway(tmp_path / "a", kafka.bootstrap, key_file)
    second = signed_gateway(tmp_path / "b", kafka.bootstrap, key_file)
    try:
        set_subscription(first.bootstrap, "fleet", {"metrics": "org.apache.kafka.producer."})
        wait_for(
            lambda: "kafka.producer." in str(describe_subscription(second.bootstrap, "fleet")),
            20,
            what="the signed alter to reach the other gateway",
        )
        attack = b'{"configs": {"metrics": "*", "interval.ms": "100"}}'
        produce(
            kafka.bootstrap,
            TOPIC,
            [
                (b"fleet", attack, ()),
                (b"everyone", attack, [("clientmetrics.signature", b"f" * 64)]),
            ],
        )
        for gw in (first, second):
            wait_for(
                lambda gw=gw: (
                    gw.metric('subscription_records_refused_total{reason="unsigned"}') == 1
                ),
                20,
                what="the forged record to be refused",
            )
            assert gw.metric('subscription_records_refused_total{reason="bad_signature"}') == 1
            # Applied, the attack would have replaced the metrics by "*".
            assert "kafka.producer." in str(describe_subscription(gw.bootstrap, "fleet"))
            refused = {
                (e["subscription"], e["error"])
                for e in gw.events("subscription_change_refused")
                if e.get("api") == "store record"
            }
            assert refused == {("fleet", "unsigned"), ("everyone", "bad_signature")}
    finally:
        codes = [first.stop(), second.stop()]
    assert codes == [0, 0]
