"""The whole fleet through the proxy in front of Kafka 4.4, with real clients.

Kafka runs with no telemetry plugin: every push is answered by the proxy, and every
connection is recorded by it. Pushing: the Java client, librdkafka (confluent-kafka)
and franz-go. Not pushing: kafka-python without the reporter (cannot) and a Java
client with ``enable.metrics.push=false`` (could, does not). Each must appear once
in the fleet with its software, version, principal and coverage, in the core's
table and on the dashboard's page.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import astuple
from pathlib import Path
from typing import Any

import kafka as kafka_python
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import KafkaError
from peers.kafka import KafkaBroker
from peers.sarama_go import sarama_go

from clientmetrics.dashboard.inventory import with_landed_clients
from clientmetrics.pipeline.core.decode import decode_pushes
from clientmetrics.pipeline.core.fleet import fleet_table
from clientmetrics.pipeline.core.rates import fresh_rates
from clientmetrics.pipeline.core.schemas import CLIENTS_ARROW, SERIES_STATE_ARROW
from clientmetrics.pipeline.core.usage import (
    usage_agreement,
    usage_from_connections,
    usage_from_points,
)
from clientmetrics.telemetry.connections import (
    CONNECTION_ARROW,
    RECORD_KIND_HEADER,
    landed_connections,
    record_from_json,
)
from tests.fleet.fleet_page import amount, rows_in_browser
from tests.kadmin import admin, set_subscription
from tests.kafka import kafka_broker, proxy_gateway
from tests.landed import landed_table
from tests.peers.clients import franz, java, names, rows_by_client, running
from tests.procs import GatewayProcess, wait_for
from tests.topic_reader import read_topic

pytestmark = [pytest.mark.kafka, pytest.mark.integration]

JAVA = ("apache-kafka-java", "4.4.0")
CONNECTIONS_TOPIC = "fl-connections"
PUSHING = ("fl-java-producer", "fl-java-consumer", "fl-rdkafka", "fl-franz-producer")


@pytest.fixture(scope="module")
def kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaBroker]:
    yield from kafka_broker(request, tmp_path_factory, plugins=())


@pytest.fixture(scope="module")
def proxy(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    yield from proxy_gateway(
        kafka,
        tmp_path_factory.mktemp("fleet") / "data",
        "[gateway]\nconnection_records_interval_ms = 500\n"
        # The topic exporter on the upstream cluster: connection records there too.
        f'[exporters.topic]\nconnections_topic = "{CONNECTIONS_TOPIC}"\n',
    )


def _connections(data_dir: Path) -> Any:
    files = sorted(landed_connections(data_dir).glob("date=*/hour=*/*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files]) if files else None


def _fleet(data_dir: Path) -> dict[str, list[dict[str, Any]]]:
    connections = _connections(data_dir)
    if connections is None:
        return {}
    landed = landed_table(data_dir)
    clients = with_landed_clients(None, landed) if landed.num_rows else None
    out: dict[str, list[dict[str, Any]]] = {}
    pushing = CLIENTS_ARROW.empty_table() if clients is None else clients
    for row in fleet_table(connections, pushing).to_pylist():
        out.setdefault(row["client_id"], []).append(row)
    return out


def test_every_client_appears_once_with_its_coverage(proxy: GatewayProcess, tmp_path: Path) -> None:
    set_subscription(proxy.bootstrap, "everything", {"metrics": "*", "interval.ms": "1000"})
    rdkafka = Producer({"bootstrap.servers": proxy.bootstrap, "client.id": "fl-rdkafka"})
    common = ("--messages", "40", "--rate", "40", "--close")
    with ExitStack() as stack:
        jv = stack.enter_context(
            java(proxy.bootstrap, tmp_path, "--client-id", "fl-java", "--group", "fl",
                 "--topic", "fl-java", *common)
        )  # fmt: skip
        off = stack.enter_context(
            java(proxy.bootstrap, tmp_path, "--client-id", "fl-off", "--role", "producer",
                 "--topic", "fl-off", "--property", "enable.metrics.push=false",
                 "--instance-timeout", "1", *common)
        )  # fmt: skip
        fg = stack.enter_context(
            franz(proxy.bootstrap, tmp_path, "-client-id", "fl-franz", "-topic", "fl-franz",
                  "-messages", "40", "-rate", "40", "-close")
        )  # fmt: skip
        sarama = stack.enter_context(
            running(lambda: sarama_go(proxy.bootstrap, "-client-id", "fl-sarama",
                                      "-topic", "fl-sarama", "-messages", "10"))
        )  # fmt: skip
        kp = KafkaProducer(bootstrap_servers=proxy.bootstrap, client_id="fl-kpy", acks="all")
        for i in range(10):
            kp.send("fl-kpy", f"v{i}".encode())
        kp.flush(60)
        kp.close()

        def all_seen() -> bool:
            rdkafka.produce("fl-rdkafka", b"x")
            rdkafka.poll(0.05)
            pushed = rows_by_client(proxy.data_dir)
            fleet = _fleet(proxy.data_dir)
            return all(names(pushed.get(c, [])) for c in PUSHING) and {
                *PUSHING,
                "fl-off-producer",
                "fl-kpy",
                "fl-sarama",
            } <= set(fleet)

        wait_for(all_seen, 240, what="every client's connections and pushes")
        rdkafka.flush(30)
        assert sarama.wait_event("done", 60)["sent"] == 10
        assert off.stop(timeout=180) == 0, off.log_tail()
        assert jv.stop(timeout=180) == 0, jv.log_tail()
        fg.stop()
    fleet = _fleet(proxy.data_dir)

    def one(client_id: str) -> dict[str, Any]:
        rows = fleet[client_id]
        assert len(rows) == 1, rows
        assert rows[0]["principal"] == "User:ANONYMOUS"
        return rows[0]

    for client_id in ("fl-java-producer", "fl-java-consumer"):
        row = one(client_id)
        assert (row["client_software_name"], row["client_software_version"]) == JAVA
        assert (row["coverage"], row["reason"]) == ("pushes", "")
        assert len(row["instances"]) == 1
        assert row["pushes"] > 0
    franz_row = one("fl-franz-producer")
    assert (franz_row["client_software_name"], franz_row["coverage"]) == ("kgo", "pushes")
    rd = one("fl-rdkafka")
    assert rd["client_software_name"] == "confluent-kafka-python"
    assert rd["coverage"] == "pushes"
    off_row = one("fl-off-producer")
    assert (off_row["client_software_name"], off_row["client_software_version"]) == JAVA
    assert (off_row["coverage"], off_row["reason"]) == ("does_not", "telemetry_off")
    assert off_row["pushes"] == 0
    kpy = one("fl-kpy")
    assert (kpy["client_software_name"], kpy["client_software_version"]) == (
        "kafka-python",
        kafka_python.__version__,
    )
    assert kpy["coverage"] == "cannot"
    go = one("fl-sarama")
    assert (go["client_software_name"], go["client_software_version"]) == ("sarama", "v1.61.1")
    assert (go["coverage"], go["pushes"]) == ("cannot", 0)
    assert kpy["connections"] >= 1
    # Usage counted by the proxy off the Produce requests' batch headers: exactly the
    # records each producer had acknowledged (42: 40 and the two its close sends).
    expected = {"fl-kpy": 10, "fl-sarama": 10, "fl-java-producer": 42, "fl-off-producer": 42}

    def counted() -> bool:  # the last connections' counts land with the next interval
        produced = _produced_records(proxy.data_dir)
        return all(produced.get(c) == n for c, n in expected.items())

    wait_for(counted, 60, what=f"produced records {expected}")
    produced = _produced_records(proxy.data_dir)
    assert produced["fl-kpy"] == 10
    assert produced["fl-sarama"] == 10
    assert produced["fl-java-producer"] == jv.wait_event("delivered", 5)["acked"] == 42
    assert produced["fl-off-producer"] == off.wait_event("delivered", 5)["acked"] == 42
    assert produced.get("fl-java-consumer", 0) == 0
    # The dashboard's page shows the same, in a real browser: one row per client.
    shown = [(coverage, client) for coverage, client, *_ in rows_in_browser(proxy.data_dir)]
    for client_id, coverage in [
        *((c, "pushes") for c in PUSHING),
        ("fl-off-producer", "does_not"),
        ("fl-kpy", "cannot"),
        ("fl-sarama", "cannot"),
    ]:
        assert shown.count((coverage, client_id)) == 1, (client_id, shown)
    assert all(c != "fl-kpy" or cov == "cannot" for cov, c in shown)
    assert proxy.metric("connection_records_dropped_total") == 0


def _produced_records(data_dir: Path) -> dict[str, int]:
    out: dict[str, int] = {}
    for row in _connections(data_dir).to_pylist():
        out[row["client_id"]] = out.get(row["client_id"], 0) + row["produced_records"]
    return out


def _varint_bytes(n: int) -> int:
    """Bytes of a Kafka varint (zigzag, as record lengths are written)."""
    value, size = (n << 1) ^ (n >> 63), 1
    while value >= 0x80:
        value, size = value >> 7, size + 1
    return size


def batch_bytes(key: bytes | None, value: bytes) -> int:
    """A one-record batch of this key and value, uncompressed, no headers: 61 bytes of
    batch header, the record's length, attributes, timestamp and offset deltas (0: the
    batch's first record), key and value with their lengths, and the header count."""
    key_len = -1 if key is None else len(key)
    body = 3 + _varint_bytes(key_len) + max(key_len, 0) + _varint_bytes(len(value))
    body += len(value) + 1
    return 61 + _varint_bytes(body) + body


def _usage(data_dir: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    connections = _connections(data_dir)
    if connections is not None:
        for row in usage_from_connections(connections).to_pylist():
            out.setdefault(row["client_id"], []).append(row)
    return out


def _pushed_usage(data_dir: Path) -> Any:
    landed = landed_table(data_dir)
    points = fresh_rates(decode_pushes(landed), SERIES_STATE_ARROW.empty_table())
    return usage_from_points(points)


def test_usage_per_instance_is_exactly_the_traffic(proxy: GatewayProcess, tmp_path: Path) -> None:
    """Every producer sends one record per batch (it waits for each acknowledgement, or
    the Java client's batch.size=0), uncompressed: each batch's size is known by hand."""
    set_subscription(proxy.bootstrap, "everything", {"metrics": "*", "interval.ms": "1000"})
    sizes = [10 + 97 * i for i in range(25)]  # 10 B to 2.3 kB values
    rd_values = [bytes([65 + i % 26]) * n for i, n in enumerate(sizes)]
    kp_pairs = [(f"kp-{i:03d}".encode(), bytes(n)) for i, n in enumerate(sizes[:12])]
    java_pairs = [(f"key-{i}".encode(), f"value-{i}".encode()) for i in range(120)]
    java_pairs += [(b"hold", b"hold"), (b"last", b"last")]  # what the peer sends as it closes
    expected = {
        "us-rdkafka": (len(rd_values), sum(batch_bytes(None, v) for v in rd_values)),
        "us-kpy": (len(kp_pairs), sum(batch_bytes(k, v) for k, v in kp_pairs)),
        "us-java-producer": (len(java_pairs), sum(batch_bytes(k, v) for k, v in java_pairs)),
    }
    rdkafka = Producer({"bootstrap.servers": proxy.bootstrap, "client.id": "us-rdkafka"})
    for value in rd_values:
        rdkafka.produce("us-rd", value)
        assert rdkafka.flush(60) == 0  # acknowledged before the next: one record a batch
    kp = KafkaProducer(bootstrap_servers=proxy.bootstrap, client_id="us-kpy", acks="all")
    for key, value in kp_pairs:
        kp.send("us-kpy", value, key=key).get(60)
    kp.close()
    java_common = ("--client-id", "us-java", "--topic", "us-java", "--close")
    with java(proxy.bootstrap, tmp_path, *java_common, "--role", "producer", "--messages", "120",
              "--rate", "60", "--property", "batch.size=0") as producer:  # fmt: skip

        def sent_all() -> bool:  # it sends its last two records as it stops
            rows = _usage(proxy.data_dir).get("us-java-producer", [])
            return sum(r["produced_records"] for r in rows) >= 120

        wait_for(sent_all, 240, what="the Java producer's 120 records counted")
        assert producer.stop(timeout=180) == 0, producer.log_tail()
        assert producer.wait_event("delivered", 60)["acked"] == 122
    # The consumers read it all back: the same batches, each once.
    both = sum(expected[c][0] for c in ("us-rdkafka", "us-kpy"))
    consumer = Consumer(
        {"bootstrap.servers": proxy.bootstrap, "client.id": "us-rd-consumer",
         "group.id": "us-rd", "auto.offset.reset": "earliest"}
    )  # fmt: skip
    consumer.subscribe(["us-rd", "us-kpy"])
    got = 0
    deadline = time.monotonic() + 240
    while got < both and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        got += message is not None and message.error() is None
    expected["us-rd-consumer"] = (both, expected["us-rdkafka"][1] + expected["us-kpy"][1])
    expected["us-java-consumer"] = expected["us-java-producer"]
    with java(proxy.bootstrap, tmp_path, *java_common, "--role", "consumer",
              "--group", "us-java") as reader:  # fmt: skip

        def read_all() -> bool:
            rows = _usage(proxy.data_dir).get("us-java-consumer", [])
            return sum(r["consumed_records"] for r in rows) >= 122

        wait_for(read_all, 240, what="the Java consumer's 122 records counted")
        assert reader.stop(timeout=180) == 0, reader.log_tail()
    consumer.close()
    assert got == both

    def totals() -> dict[str, tuple[int, int]]:
        out = {}
        for client_id, rows in _usage(proxy.data_dir).items():
            side = "consumed" if client_id.endswith("consumer") else "produced"
            out[client_id] = (
                sum(r[f"{side}_records"] for r in rows),
                sum(r[f"{side}_bytes"] for r in rows),
            )
        return out

    wait_for(lambda: expected.items() <= totals().items(), 60, what=f"usage {expected}")
    usage = _usage(proxy.data_dir)
    for client_id in expected:
        instances = {r["client_instance_id"] for r in usage[client_id]}
        assert len(instances) == 1, (client_id, usage[client_id])
        pushing = client_id != "us-kpy"  # kafka-python without the reporter tells none
        assert bool(instances.pop()) == pushing, client_id
    # The Java client's own counters, pushed through the proxy, tell the same.
    proxy_rows = usage_from_connections(_connections(proxy.data_dir))
    proxy_rows = proxy_rows.filter(pc.starts_with(proxy_rows.column("client_id"), "us-java"))

    def agreement() -> list[dict[str, Any]]:
        both_sources = pa.concat_tables([proxy_rows, _pushed_usage(proxy.data_dir)])
        return usage_agreement(both_sources).to_pylist()

    wait_for(lambda: len(agreement()) == 4, 120, what="the Java client's pushed usage")
    rows = agreement()
    print("usage agreement, proxy vs pushed metrics:", rows)
    assert {(r["client_id"], r["measure"]) for r in rows} == {
        ("us-java-producer", "produced_records"),
        ("us-java-producer", "produced_bytes"),
        ("us-java-consumer", "consumed_records"),
        ("us-java-consumer", "consumed_bytes"),
    }
    assert all(abs(r["difference_pct"]) <= 5.0 for r in rows), rows
    # The fleet page shows today's usage of each client: the same figures, from the proxy.
    shown = {client: (p, c, source) for _, client, p, c, source in rows_in_browser(proxy.data_dir)}
    for client_id, counted in expected.items():
        produced, consumed, source = shown[client_id]
        side = consumed if client_id.endswith("consumer") else produced
        other = produced if client_id.endswith("consumer") else consumed
        assert (amount(side), amount(other), source) == (counted, (0, 0), "proxy (exact)")


def test_connection_records_on_the_topic_are_the_landed_ones(
    proxy: GatewayProcess, kafka: KafkaBroker
) -> None:
    """One format, two places: every landed record is on the topic, and back."""
    kp = KafkaProducer(bootstrap_servers=proxy.bootstrap, client_id="tp-kpy")
    kp.send("tp-kpy", b"x").get(60)
    kp.close()

    def landed() -> set[tuple[Any, ...]]:
        table = _connections(proxy.data_dir)
        return {tuple(row.values()) for row in table.to_pylist()} if table is not None else set()

    def on_topic() -> set[tuple[Any, ...]]:
        out = set()
        for message in read_topic(kafka.bootstrap, CONNECTIONS_TOPIC):
            record = record_from_json(message.value())
            assert record is not None, message.value()
            assert message.headers() == [RECORD_KIND_HEADER]
            assert message.key() == (record.client_instance_id or record.client_id).encode()
            assert message.timestamp()[1] == record.interval_end_ms
            out.add(astuple(record))
        return out

    client_id, produced = (
        CONNECTION_ARROW.names.index(n) for n in ("client_id", "produced_records")
    )

    def kpy_landed() -> bool:
        return any(row[client_id] == "tp-kpy" for row in landed())

    wait_for(kpy_landed, 60, what="tp-kpy's connection record landed")
    before = landed()
    wait_for(lambda: before <= on_topic(), 60, what="every landed record on the topic")
    seen = on_topic()
    wait_for(lambda: seen <= landed(), 60, what="every record on the topic landed")
    assert any(row[client_id] == "tp-kpy" and row[produced] == 1 for row in seen)
    assert proxy.metric("connection_records_produce_failures_total") == 0
    assert proxy.metric("connection_records_produced_total") >= len(seen)


def test_records_read_by_a_share_consumer_are_counted_as_consumed(
    proxy: GatewayProcess, tmp_path: Path
) -> None:
    """KIP-932: a Java share consumer reads through the proxy (ShareFetch); its consumed
    records and bytes are the batches librdkafka produced, one record each, exactly."""
    values = [bytes([97 + i % 26]) * (5 + 61 * i) for i in range(15)]  # 5 B to 859 B
    rdkafka = Producer({"bootstrap.servers": proxy.bootstrap, "client.id": "sh-rdkafka"})
    for value in values:
        rdkafka.produce("sh-topic", value)
        assert rdkafka.flush(60) == 0  # acknowledged before the next: one record a batch
    expected = (len(values), sum(batch_bytes(None, v) for v in values))
    with java(proxy.bootstrap, tmp_path, "--client-id", "sh-java", "--role", "share",
              "--group", "sh-group", "--topic", "sh-topic", "--close") as reader:  # fmt: skip

        def read_all() -> bool:
            assert not reader.events("error"), reader.events("error")
            rows = _usage(proxy.data_dir).get("sh-java-share-consumer", [])
            return sum(r["consumed_records"] for r in rows) >= len(values)

        wait_for(read_all, 240, what=f"the share consumer's {len(values)} records counted")
        assert reader.stop(timeout=180) == 0, reader.log_tail()
        assert reader.wait_event("done", 10)["consumed"] == len(values)
    rows = _usage(proxy.data_dir)["sh-java-share-consumer"]
    consumed = (sum(r["consumed_records"] for r in rows), sum(r["consumed_bytes"] for r in rows))
    print("share consumer's usage:", consumed, "expected", expected)
    assert consumed == expected
    assert sum(r["consumed_batches"] for r in rows) == len(values)
    assert sum(r["produced_records"] for r in rows) == 0
    assert all(r["client_instance_id"] for r in rows)  # it pushes: its instance is known
    shown = {client: (p, c, source) for _, client, p, c, source in rows_in_browser(proxy.data_dir)}
    produced, consumed_shown, source = shown["sh-java-share-consumer"]
    assert (amount(consumed_shown), amount(produced), source) == (expected, (0, 0), "proxy (exact)")


def test_a_batch_the_broker_refused_is_not_produced(
    proxy: GatewayProcess, kafka: KafkaBroker
) -> None:
    """Produced is what the broker acknowledged (a batch refused and sent again, as a
    NOT_LEADER_OR_FOLLOWER is, counts once). Kafka refuses a batch too large for its
    topic's ``max.message.bytes`` (MESSAGE_TOO_LARGE) and one older than its
    ``message.timestamp.before.max.ms`` (INVALID_TIMESTAMP): neither counts. The one
    batch Kafka took counts once. With acks=0 each batch counts as sent."""
    with admin(kafka.bootstrap) as client:
        client.create_topics([
            NewTopic("ack-small", 1, 1, topic_configs={"max.message.bytes": "512"}),
            NewTopic("ack-old", 1, 1, topic_configs={"message.timestamp.before.max.ms": "60000"}),
            NewTopic("ack-ok", 1, 1),
        ])  # fmt: skip
    # Not idempotent: an idempotent kafka-python producer is done after a refused batch.
    kp = KafkaProducer(
        bootstrap_servers=proxy.bootstrap, client_id="ack-kpy", acks="all",
        enable_idempotence=False,
    )  # fmt: skip
    day_ago = int(time.time() * 1000) - 86_400_000
    try:
        for topic, value, at in (("ack-small", b"b" * 2048, None), ("ack-old", b"r", day_ago)):
            with pytest.raises(KafkaError) as refused:
                kp.send(topic, value, timestamp_ms=at).get(timeout=60)
            print(topic, "refused:", type(refused.value).__name__)
        kp.send("ack-ok", b"c" * 10).get(timeout=60)
    finally:
        kp.close()
    # acks=0: nothing answers, so what was sent is what is counted (3 batches of one).
    unanswered = KafkaProducer(bootstrap_servers=proxy.bootstrap, client_id="ack0-kpy", acks=0)
    try:
        for value in (b"x", b"yy", b"zzz"):
            unanswered.send("ack-ok", value).get(timeout=60)
            unanswered.flush(60)
    finally:
        unanswered.close()
    expected = {
        "ack-kpy": (1, batch_bytes(None, b"c" * 10), 1),
        "ack0-kpy": (3, sum(batch_bytes(None, v) for v in (b"x", b"yy", b"zzz")), 3),
    }

    def counted() -> bool:
        # Answers are counted as they come, so the refused batches' (earlier, on the
        # same connection to the one broker) would be in by the time the last one is.
        usage = _usage(proxy.data_dir)
        return all(
            tuple(
                sum(r[f"produced_{m}"] for r in usage.get(client, []))
                for m in ("records", "bytes", "batches")
            )
            == totals
            for client, totals in expected.items()
        )

    wait_for(counted, 60, what=f"usage (records, bytes, batches) = {expected}")
