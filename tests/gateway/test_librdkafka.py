"""Real librdkafka clients (confluent-kafka 2.16) against a standalone gateway process."""

from __future__ import annotations

import socket
import struct
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from tests.kadmin import describe_subscription, set_subscription
from tests.landed import landed_rows, landed_table, names_of
from tests.procs import MIN_DEADLINE_S, GatewayProcess, wait_for
from tests.rdkafka_goodbye import Goodbye

pytestmark = pytest.mark.integration

FAST = """
[exporters.landing]
roll_seconds = 0.3
"""
PRODUCER_METRIC = "org.apache.kafka.producer.node.request.latency.avg"


def fast_config(order: list[str] | None = None) -> str:
    text = FAST
    if order is not None:
        text += (
            "\n[telemetry]\naccepted_compression_types = ["
            + ", ".join(f'"{c}"' for c in order)
            + "]\n"
        )
    return text


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path / "data", fast_config()).start()
    yield gw
    assert gw.stop() == 0, gw.log_lines[-10:]
    assert gw.tracebacks() == []


def producer(bootstrap: str, client_id: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "log_level": 3,
        }
    )


def poll_for(
    client: Producer | Consumer, data_dir: Path, predicate: object, timeout: float, what: str
) -> None:
    def check() -> bool:
        client.poll(0.1)
        return bool(predicate(landed_rows(data_dir)))  # type: ignore[operator]

    wait_for(check, timeout, interval=0.2, what=what)


def test_producer_and_consumer_pushes_land_with_labels(gateway: GatewayProcess) -> None:
    set_subscription(
        gateway.bootstrap, "kafka", {"metrics": "org.apache.kafka.", "interval.ms": "1000"}
    )
    prod = producer(gateway.bootstrap, "prod-1")
    cons = Consumer(
        {
            "bootstrap.servers": gateway.bootstrap,
            "client.id": "cons-1",
            "group.id": "group-a",
            "client.rack": "rack-7",
            "log_level": 3,
        }
    )
    cons.subscribe(["no-such-topic"])
    try:

        def both(rows: list[dict[str, object]]) -> bool:
            cons.poll(0.05)
            return PRODUCER_METRIC in names_of(rows, "prod-1") and any(
                n.startswith("org.apache.kafka.consumer.") for n in names_of(rows, "cons-1")
            )

        poll_for(prod, gateway.data_dir, both, 60, "producer and consumer metrics to land")
    finally:
        cons.close()
        prod.flush(1)
    rows = landed_rows(gateway.data_dir)
    prod_rows = [r for r in rows if r["client_id"] == "prod-1"]
    assert {r["client_software_name"] for r in prod_rows} == {"confluent-kafka-python"}
    assert all(r["client_source_address"] == "127.0.0.1" for r in prod_rows)
    assert all(r["principal"] == "User:ANONYMOUS" for r in prod_rows)
    assert all(r["push_interval_ms"] == 1000 for r in prod_rows)
    assert len({r["client_instance_id"] for r in prod_rows}) == 1
    table = landed_table(gateway.data_dir)
    assert str(table.schema.field("received_at").type) == "timestamp[us, tz=UTC]"


def test_terminating_push_lands_on_close(gateway: GatewayProcess) -> None:
    set_subscription(
        gateway.bootstrap, "kafka", {"metrics": "org.apache.kafka.", "interval.ms": "1000"}
    )
    goodbye = Goodbye("closing")
    prod = Producer(
        goodbye.config({"bootstrap.servers": gateway.bootstrap, "client.id": "closing"})
    )
    poll_for(prod, gateway.data_dir, lambda rows: names_of(rows, "closing"), 30, "a first push")
    goodbye.close_after_push(prod)  # librdkafka's terminating push, sent as the handle goes
    wait_for(
        lambda: any(
            r["terminating"] for r in landed_rows(gateway.data_dir) if r["client_id"] == "closing"
        ),
        15,
        what="the terminating push",
    )


@pytest.mark.parametrize(("codec", "code"), [("zstd", 4), ("lz4", 3), ("gzip", 1), ("snappy", 2)])
def test_every_codec_librdkafka_can_choose(tmp_path: Path, codec: str, code: int) -> None:
    gw = GatewayProcess(tmp_path / "data", fast_config([codec])).start()
    try:
        set_subscription(
            gw.bootstrap, "kafka", {"metrics": "org.apache.kafka.", "interval.ms": "1000"}
        )
        prod = producer(gw.bootstrap, f"codec-{codec}")
        poll_for(
            prod,
            gw.data_dir,
            lambda rows: any(r["compression_type"] == code and r["payload"] for r in rows),
            30,
            f"a {codec} push",
        )
        rows = [r for r in landed_rows(gw.data_dir) if r["payload"]]
        assert PRODUCER_METRIC in names_of(rows, f"codec-{codec}")
        prod.flush(1)
    finally:
        assert gw.stop() == 0


def test_subscription_change_reaches_pushing_clients(gateway: GatewayProcess) -> None:
    set_subscription(
        gateway.bootstrap,
        "sub",
        {"metrics": "org.apache.kafka.producer.node.", "interval.ms": "1000"},
    )
    prod = producer(gateway.bootstrap, "changing")
    poll_for(
        prod, gateway.data_dir, lambda rows: names_of(rows, "changing"), 30, "first metric set"
    )
    first = names_of(landed_rows(gateway.data_dir), "changing")
    assert first
    assert all(n.startswith("org.apache.kafka.producer.node.") for n in first)
    changed_at = time.time()
    set_subscription(gateway.bootstrap, "sub", {"metrics": "org.apache.kafka.producer.record."})

    def new_set(rows: list[dict[str, object]]) -> bool:
        late = [
            r
            for r in rows
            if r["client_id"] == "changing" and r["received_at"].timestamp() > changed_at
        ]  # type: ignore[attr-defined]
        return any(
            n.startswith("org.apache.kafka.producer.record.") for n in names_of(late, "changing")
        )

    poll_for(prod, gateway.data_dir, new_set, 30, "the new metric set")
    body = (
        urllib.request.urlopen(
            f"http://127.0.0.1:{gateway.metrics_port}/metrics", timeout=MIN_DEADLINE_S
        )
        .read()
        .decode()
    )
    unknown = [
        line
        for line in body.splitlines()
        if line.startswith("kafka_server_client_metrics_unknown_subscription_request")
    ]
    assert unknown, body
    assert float(unknown[0].split()[-1]) >= 1, body
    prod.flush(1)


def test_subscriptions_survive_restart_and_no_partial_files(tmp_path: Path) -> None:
    gw = GatewayProcess(tmp_path / "data", fast_config()).start()
    set_subscription(gw.bootstrap, "keep", {"metrics": "org.apache.kafka.", "interval.ms": "1000"})
    prod = producer(gw.bootstrap, "restart")
    poll_for(prod, gw.data_dir, lambda rows: names_of(rows, "restart"), 30, "a push")
    prod.flush(1)
    del prod
    assert gw.stop() == 0
    before = landed_table(gw.data_dir).num_rows
    gw.start()
    try:
        described = str(describe_subscription(gw.bootstrap, "keep"))
        assert "org.apache.kafka." in described
        assert "1000" in described
        assert landed_table(gw.data_dir).num_rows == before
        staging = gw.data_dir / "landing" / ".staging"
        assert not staging.exists() or not any(staging.iterdir())
    finally:
        assert gw.stop() == 0


def test_malformed_frames_close_only_their_connection(gateway: GatewayProcess) -> None:
    healthy = socket.create_connection(("127.0.0.1", gateway.port), timeout=MIN_DEADLINE_S)
    garbage = socket.create_connection(("127.0.0.1", gateway.port), timeout=MIN_DEADLINE_S)
    huge = socket.create_connection(("127.0.0.1", gateway.port), timeout=MIN_DEADLINE_S)
    garbage.sendall(struct.pack(">i", 6) + b"\xff\xff\x00\x01\x02\x03")
    huge.sendall(struct.pack(">i", 2**31 - 1))
    for sock in (garbage, huge):
        sock.settimeout(MIN_DEADLINE_S)
        assert sock.recv(1024) == b""  # closed by the gateway, without an answer
    # ApiVersions v0 on the healthy connection still gets answered.
    request = struct.pack(">hhih", 18, 0, 42, 4) + b"test"
    healthy.sendall(struct.pack(">i", len(request)) + request)
    size = struct.unpack(">i", healthy.recv(4))[0]
    payload = b""
    while len(payload) < size:
        payload += healthy.recv(size - len(payload))
    correlation, error = struct.unpack(">ih", payload[:6])
    assert (correlation, error) == (42, 0)
    for sock in (healthy, garbage, huge):
        sock.close()
