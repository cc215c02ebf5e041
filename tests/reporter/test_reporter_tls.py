"""The reporter (kafka-python's own ssl_* settings) and the simulator on an SSL listener."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaProducer

from clientmetrics.reporter import enable_telemetry
from tests.kadmin import set_subscription
from tests.landed import landed_rows
from tests.procs import BIN, GatewayProcess, wait_for
from tests.tlsfiles import TestCA

pytestmark = pytest.mark.integration


@pytest.fixture
def tls_gateway(tmp_path: Path) -> Iterator[tuple[GatewayProcess, str, TestCA]]:
    ca = TestCA(tmp_path / "pki")
    ca.issue("server")
    config = f"""
[exporters.landing]
roll_seconds = 0.3

[tls]
certificate = "{ca.root / "server.crt"}"
private_key = "{ca.root / "server.key"}"
ca = "{ca.ca}"
client_auth = "requested"
principal_mapping_rules = "RULE:^CN=([^,]+),OU=Test,O=Acme$/$1/L"
"""
    gw = GatewayProcess(
        tmp_path / "data", config, extra_args=("--listen", "SSL://127.0.0.1:0")
    ).start()
    listeners = gw.events("gateway_started")[0]["listeners"]
    assert isinstance(listeners, dict)
    yield gw, str(listeners["SSL"]).replace("0.0.0.0", "127.0.0.1"), ca
    assert gw.stop() == 0


def test_kafka_python_reporter_over_ssl_lands_its_principal(
    tls_gateway: tuple[GatewayProcess, str, TestCA],
) -> None:
    gw, bootstrap, ca = tls_gateway
    set_subscription(gw.bootstrap, "all", {"metrics": "org.apache.kafka.", "interval.ms": "500"})
    client = ca.issue("reporter", common_name="Reporter")
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        client_id="tls-reporter",
        security_protocol="SSL",
        ssl_cafile=str(ca.ca),
        ssl_certfile=str(client.certificate),
        ssl_keyfile=str(client.private_key),
    )
    enable_telemetry(producer)
    try:

        def rows() -> list[dict[str, object]]:
            return [r for r in landed_rows(gw.data_dir) if r["client_id"] == "tls-reporter"]

        wait_for(lambda: any(r["payload"] for r in rows()), 30, what="a push over TLS")
    finally:
        producer.close()
    assert {r["principal"] for r in rows()} == {"User:reporter"}


def test_simulate_over_ssl(tls_gateway: tuple[GatewayProcess, str, TestCA]) -> None:
    _gw, bootstrap, ca = tls_gateway
    result = subprocess.run(
        [
            str(BIN / "clientmetrics"), "simulate", "--bootstrap-server", bootstrap,
            "--clients", "20", "--interval-ms", "500", "--duration", "2", "--json",
            "--security-protocol", "SSL", "--ssl-ca", str(ca.ca),
        ],
        capture_output=True, timeout=60, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    # Every client did its handshake and said goodbye, and pushes came in between: events,
    # not a count per second (that is the benchmarks'; a busy machine makes fewer).
    assert (report["errors"], report["handshakes"], report["terminating_pushes"]) == ({}, 20, 20)
    assert report["pushes"] > report["terminating_pushes"]
