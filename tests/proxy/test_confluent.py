"""librdkafka (confluent-kafka 2.16) producer and consumer group through the proxy, on Tansu."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from tests.kadmin import set_subscription
from tests.landed import landed_rows, names_of
from tests.procs import MIN_DEADLINE_S, wait_for
from tests.proxy.conftest import TANSU_NODE, ProxyGateway

pytestmark = pytest.mark.integration

MESSAGES = 500


def test_metadata_names_only_gateway_ports(proxy: ProxyGateway) -> None:
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap, "log_level": 3})
    metadata = admin.list_topics(timeout=MIN_DEADLINE_S)
    assert {b.id: (b.host, b.port) for b in metadata.brokers.values()} == {
        TANSU_NODE: ("127.0.0.1", proxy.broker_port)
    }
    assert metadata.cluster_id == "tansu_cluster"  # the upstream's, not the gateway's


def test_produce_consume_keys_headers_and_telemetry(proxy: ProxyGateway) -> None:
    set_subscription(
        proxy.bootstrap, "all", {"metrics": "org.apache.kafka.", "interval.ms": "1000"}
    )
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    producer = Producer(
        {"bootstrap.servers": proxy.bootstrap, "client.id": "px-prod", "log_level": 3}
    )
    sent = {}
    for i in range(MESSAGES):
        key, value = f"key-{i}".encode(), f"value-{i}".encode() * 3
        headers = [("trace", f"t{i}".encode()), ("empty", b"")]
        producer.produce(topic, key=key, value=value, headers=headers)
        sent[key] = (value, headers)
    assert producer.flush(20) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": proxy.bootstrap,
            "client.id": "px-cons",
            "group.id": "px-group",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "log_level": 3,
        }
    )
    consumer.subscribe([topic])
    received: dict[bytes, tuple[bytes, list[tuple[str, bytes]]]] = {}
    try:

        def all_received() -> bool:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                received[message.key()] = (message.value(), message.headers() or [])
            return len(received) == MESSAGES

        wait_for(all_received, 60, interval=0, what="every message through the proxy")
        assert received == sent

        def both_pushed() -> bool:
            consumer.poll(0.1)
            producer.poll(0.1)
            rows = landed_rows(proxy.data_dir)
            return "org.apache.kafka.producer.node.request.latency.avg" in names_of(
                rows, "px-prod"
            ) and any(n.startswith("org.apache.kafka.consumer.") for n in names_of(rows, "px-cons"))

        wait_for(both_pushed, 60, interval=0, what="producer and consumer telemetry to land")
    finally:
        consumer.close()
    rows = [r for r in landed_rows(proxy.data_dir) if r["client_id"] in ("px-prod", "px-cons")]
    assert {r["client_software_name"] for r in rows} == {"confluent-kafka-python"}
    assert {r["client_source_address"] for r in rows} == {"127.0.0.1"}
    assert {r["principal"] for r in rows} == {"User:ANONYMOUS"}
    # librdkafka pushes only to a broker learned from Metadata: the gateway's broker port.
    assert {r["node_id"] for r in rows} == {TANSU_NODE}
    assert {r["push_interval_ms"] for r in rows} == {1000}
    assert {r["client_id"] for r in rows} == {"px-prod", "px-cons"}
