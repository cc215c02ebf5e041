"""Proxy mode terminating SASL/PLAIN itself, with a real librdkafka producer.

``[proxy] sasl = "terminate"``: the gateway checks PLAIN passwords against its own
users (the derivation on its verification threads, not the event loop) in front of
a Tansu broker without SASL. Records must reach the broker through the gateway,
telemetry must land under the principal the gateway proved, and a wrong password
must be refused with PLAIN's message and land nothing.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from peers.free_ports import free_port_block

from tests.kadmin import set_subscription
from tests.landed import landed_rows
from tests.plain_flood import add_user
from tests.procs import TansuProcess, wait_for
from tests.proxy.conftest import FAST_LANDING, TANSU_NODE, ProxyGateway

pytestmark = pytest.mark.integration

PASSWORD = "alice-secret"
CONFIG = FAST_LANDING + '[sasl]\nmechanisms = ["PLAIN"]\n[proxy]\nsasl = "terminate"\n'


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyGateway]:
    root = tmp_path_factory.mktemp("terminate")
    broker = TansuProcess(log_path=root / "tansu.log").start()
    add_user(root / "gw", "alice", PASSWORD)
    base = free_port_block(TANSU_NODE + 1)
    gw = ProxyGateway(
        root / "gw",
        CONFIG,
        extra_args=(
            *("--upstream", broker.bootstrap, "--broker-port-base", str(base)),
            *("--store", "sqlite"),
        ),
        listen_protocol="SASL_PLAINTEXT",
    )
    gw.broker_port_base = base
    try:
        gw.start()
        # kafka-python's admin client, logged in with PLAIN through the gateway.
        set_subscription(
            gw.bootstrap,
            "all",
            {"metrics": "org.apache.kafka.", "interval.ms": "500"},
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username="alice",
            sasl_plain_password=PASSWORD,
        )
        yield gw
    finally:
        code = gw.stop()
        broker.stop()
    assert code == 0
    assert gw.tracebacks() == []


def produce(gw: ProxyGateway, client_id: str, password: str, seconds: float) -> list[str]:
    """Produce a few records, then poll for ``seconds``; librdkafka's errors."""
    errors: list[str] = []
    conf: dict[str, Any] = {
        "bootstrap.servers": gw.bootstrap,
        "client.id": client_id,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": password,
        "log_level": 0,
        "error_cb": lambda err: errors.append(err.str()),
    }
    producer = Producer(conf)
    delivered: list[bool] = []
    topic = f"terminate-{uuid.uuid4().hex[:8]}"
    for i in range(20):
        producer.produce(
            topic, value=b"v%d" % i, on_delivery=lambda err, _: delivered.append(err is None)
        )
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        producer.poll(0.1)
    producer.flush(2)
    if password == PASSWORD:
        assert delivered == [True] * 20, errors
    else:
        assert True not in delivered
    return errors


def test_plain_terminated_by_the_proxy(stack: ProxyGateway) -> None:
    gw = stack
    assert produce(gw, "term-ok", PASSWORD, 4) == []
    wait_for(
        lambda: any(r["client_id"] == "term-ok" for r in landed_rows(gw.data_dir)),
        15,
        what="a push from the PLAIN producer",
    )
    rows = [r for r in landed_rows(gw.data_dir) if r["client_id"] == "term-ok"]
    assert {r["principal"] for r in rows} == {"User:alice"}
    errors = produce(gw, "term-wrong", "wrong", 3)
    assert any("Invalid username or password" in e for e in errors), errors
    assert not [r for r in landed_rows(gw.data_dir) if r["client_id"] == "term-wrong"]
