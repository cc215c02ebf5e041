"""Proxy mode over TLS on both sides: librdkafka over SSL, the gateway, stunnel4, Tansu.

Tansu 0.6's own TLS does not serve here, so Debian's stunnel4 terminates TLS in
front of it (with a certificate from a CA other than the clients' one, and
requiring a client certificate from that CA), and Tansu advertises stunnel's
address. Clients reach the gateway's SSL listener; the gateway's links and its
topic store reach the cluster through stunnel with the gateway's certificate.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from peers.free_ports import free_port_block

from tests.gateway.test_tls import api_versions_over_tls
from tests.kadmin import set_subscription
from tests.landed import landed_rows, metric_names
from tests.procs import (
    StunnelProcess,
    TansuProcess,
    free_port,
    stunnel_binary,
    wait_for,
)
from tests.proxy.conftest import TANSU_NODE, ProxyGateway
from tests.tlsfiles import TestCA

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        stunnel_binary() is None, reason="needs Debian's stunnel4 (apt-get install -y stunnel4)"
    ),
]

MESSAGES = 200


@pytest.fixture
def tls_cluster(tmp_path: Path) -> Iterator[tuple[TestCA, int]]:
    """Tansu behind stunnel (mTLS); the cluster's CA and its TLS port."""
    cluster_ca = TestCA(tmp_path / "cluster-pki")
    broker_cert = cluster_ca.issue("broker")
    tls_port = free_port()
    tansu = TansuProcess(log_path=tmp_path / "tansu.log", advertised=f"127.0.0.1:{tls_port}")
    tansu.start()
    stunnel = StunnelProcess(
        tansu.port,
        broker_cert.certificate,
        broker_cert.private_key,
        tmp_path / "stunnel.conf",
        port=tls_port,
        client_ca=cluster_ca.ca,
    )
    try:
        stunnel.start()
        yield cluster_ca, tls_port
    finally:
        stunnel.stop()
        tansu.stop()


def test_tls_clients_through_the_gateway_to_a_tls_cluster(
    tmp_path: Path, tls_cluster: tuple[TestCA, int]
) -> None:
    cluster_ca, cluster_port = tls_cluster
    # the cluster refuses a client without a certificate from its CA
    gateway_identity = cluster_ca.issue("gateway-client", common_name="gateway")
    assert api_versions_over_tls(cluster_port, cluster_ca.client_context()) is None
    assert api_versions_over_tls(cluster_port, cluster_ca.client_context(gateway_identity))
    client_ca = TestCA(tmp_path / "client-pki")
    server = client_ca.issue("gateway")
    config = f"""
[exporters.landing]
roll_seconds = 0.3

[tls]
certificate = "{server.certificate}"
private_key = "{server.private_key}"

[upstream]
security_protocol = "SSL"
ca = "{cluster_ca.ca}"
certificate = "{gateway_identity.certificate}"
private_key = "{gateway_identity.private_key}"
"""
    base = free_port_block(TANSU_NODE + 1)
    gw = ProxyGateway(
        tmp_path / "gw",
        config,
        extra_args=(
            "--upstream",
            f"127.0.0.1:{cluster_port}",
            "--broker-port-base",
            str(base),
        ),
        listen_protocol="SSL",
    )
    gw.broker_port_base = base
    gw.start()
    ssl_client = {"security.protocol": "ssl", "ssl.ca.location": str(client_ca.ca), "log_level": 3}
    try:
        # the alter goes to the topic store, which reaches the cluster over TLS too
        set_subscription(
            gw.bootstrap,
            "all",
            {"metrics": "org.apache.kafka.", "interval.ms": "1000"},
            security_protocol="SSL",
            ssl_cafile=str(client_ca.ca),
        )
        topic = f"tls-{uuid.uuid4().hex[:8]}"
        producer = Producer(
            {"bootstrap.servers": gw.bootstrap, "client.id": "tls-prod", **ssl_client}
        )
        sent = {}
        for i in range(MESSAGES):
            key, value = f"key-{i}".encode(), f"value-{i}".encode() * 5
            producer.produce(topic, key=key, value=value)
            sent[key] = value
        assert producer.flush(30) == 0
        consumer = Consumer(
            {
                "bootstrap.servers": gw.bootstrap,
                "client.id": "tls-cons",
                "group.id": "tls-group",
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                **ssl_client,
            }
        )
        consumer.subscribe([topic])
        received: dict[bytes, bytes] = {}
        try:

            def all_received() -> bool:
                message = consumer.poll(0.2)
                if message is not None and not message.error():
                    received[message.key()] = message.value()
                return len(received) == MESSAGES

            wait_for(all_received, 60, interval=0, what="every message through TLS both ways")
            assert received == sent

            def pushed() -> bool:
                producer.poll(0.1)
                consumer.poll(0.1)
                names: set[str] = set()
                for row in landed_rows(gw.data_dir):
                    if row["client_id"] == "tls-prod":
                        names |= metric_names(bytes(row["payload"]))  # type: ignore[arg-type]
                return "org.apache.kafka.producer.node.request.latency.avg" in names

            wait_for(pushed, 60, interval=0, what="producer telemetry through the TLS proxy")
        finally:
            consumer.close()
        rows = [r for r in landed_rows(gw.data_dir) if r["client_id"] == "tls-prod"]
        assert {r["node_id"] for r in rows} == {TANSU_NODE}
        assert {r["push_interval_ms"] for r in rows} == {1000}
        assert gw.events("upstream_unavailable_at_start") == []  # the TLS probe worked
    finally:
        assert gw.stop() == 0
    assert gw.tracebacks() == []
