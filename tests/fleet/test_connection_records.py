"""Connection records: one per client key and interval, bounded whatever the churn."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from clientmetrics.errors import ConfigurationError
from clientmetrics.gateway.connection_topic import connection_topic
from clientmetrics.telemetry.connections import (
    CONNECTION_ARROW,
    ClientKey,
    ConnectionRecord,
    ConnectionTable,
    record_from_json,
    record_json,
    record_key,
    records_to_arrow,
)

ALICE = ClientKey(
    "User:alice", "orders", "apache-kafka-java", "4.4.0", "PLAIN", "PLAINTEXT", "10.0.0.7"
)
BOB = ClientKey("User:bob", "", "sarama", "1.61.1", "PLAIN", "PLAINTEXT", "10.0.0.8")


def test_connections_of_one_key_aggregate_into_one_record() -> None:
    table = ConnectionTable(max_keys=10, node_id=3, now_ms=1_000)
    assert table.observe(ALICE, 1_500, since_ms=1_200)
    assert table.observe(ALICE, 1_900, since_ms=1_100)
    assert table.observe(BOB, 1_700)
    records = table.drain(2_000)
    assert records == [
        ConnectionRecord(3, 1_000, 2_000, "User:alice", "orders", "apache-kafka-java", "4.4.0",
                         "PLAIN", "PLAINTEXT", "10.0.0.7", "", False, 1_100, 1_900, 2),
        ConnectionRecord(3, 1_000, 2_000, "User:bob", "", "sarama", "1.61.1",
                         "PLAIN", "PLAINTEXT", "10.0.0.8", "", False, 1_700, 1_700, 1),
    ]  # fmt: skip
    # The next interval starts empty, at the drain.
    assert table.drain(3_000) == []
    table.observe(BOB, 3_500, since_ms=500)  # open since before the interval: its start
    (record,) = table.drain(4_000)
    assert (record.interval_start_ms, record.first_seen_ms, record.last_seen_ms) == (
        3_000,
        3_000,
        3_500,
    )


def test_a_storm_of_new_keys_is_bounded_and_counted() -> None:
    table = ConnectionTable(max_keys=100, node_id=0, now_ms=0)
    kept = sum(
        table.observe(
            ClientKey("User:x", f"id-{i}", "sarama", "1.61.1", "L", "PLAINTEXT", "10.0.0.1"), i
        )
        for i in range(10_000)
    )
    # Known keys still count once the table is full.
    assert table.observe(
        ClientKey("User:x", "id-0", "sarama", "1.61.1", "L", "PLAINTEXT", "10.0.0.1"), 10_001
    )
    assert (kept, table.dropped, table.observed, len(table)) == (100, 9_900, 10_001, 100)
    records = table.drain(20_000)
    assert len(records) == 100
    assert sum(r.connections for r in records) == 101
    assert table.dropped == 9_900  # a running count: it survives the drain


def test_the_table_refuses_a_bound_below_one() -> None:
    with pytest.raises(ValueError, match="max_keys must be at least 1"):
        ConnectionTable(max_keys=0, node_id=0, now_ms=0)


def test_records_become_the_landed_columns() -> None:
    key = ClientKey("User:a", "c", "librdkafka", "2.16.0", "L", "SSL", "::1",
                    "5f8b7c1e-2a4d-4e6f-9b0a-1c2d3e4f5a6b", True)  # fmt: skip
    table = ConnectionTable(max_keys=4, node_id=7, now_ms=0)
    table.observe(key, 5, usage=(3, 300, 2, 1, 70, 1))
    table.observe(key, 6, usage=(1, 90, 1, 2, 200, 2))
    arrow = records_to_arrow(table.drain(10))
    assert arrow.schema == CONNECTION_ARROW
    assert arrow.to_pylist() == [
        {"node_id": 7, "interval_start_ms": 0, "interval_end_ms": 10, "principal": "User:a",
         "client_id": "c", "client_software_name": "librdkafka",
         "client_software_version": "2.16.0",
         "listener": "L", "security_protocol": "SSL", "client_source_address": "::1",
         "client_instance_id": "5f8b7c1e-2a4d-4e6f-9b0a-1c2d3e4f5a6b", "telemetry_requested": True,
         "first_seen_ms": 5, "last_seen_ms": 6, "connections": 2,
         "produced_records": 4, "produced_bytes": 390, "produced_batches": 3,
         "consumed_records": 3, "consumed_bytes": 270, "consumed_batches": 3},
    ]  # fmt: skip
    assert records_to_arrow([]).num_rows == 0
    assert CONNECTION_ARROW.field("connections").type == pa.int64()


def test_a_record_on_a_topic_reads_back_and_anything_else_is_refused() -> None:
    table = ConnectionTable(max_keys=4, node_id=7, now_ms=0)
    table.observe(ALICE, 5, usage=(3, 300, 2, 1, 70, 1))
    (record,) = table.drain(10)
    value = record_json(record)
    assert record_from_json(value) == record
    assert record_key(record) == b"orders"  # no instance id: its client.id
    document = json.loads(value)
    assert list(document) == CONNECTION_ARROW.names  # the landed columns, in order
    bad = [
        b"\xff", b"not json", b"[]", b"{}", json.dumps({**document, "extra": 1}).encode(),
        json.dumps({**document, "connections": -1}).encode(),
        json.dumps({**document, "connections": 2**63}).encode(),
        json.dumps({**document, "connections": True}).encode(),
        json.dumps({**document, "node_id": 2**31}).encode(),
        json.dumps({**document, "principal": 5}).encode(),
        json.dumps({**document, "telemetry_requested": 1}).encode(),
        b"[" * 100_000,
    ]  # fmt: skip
    assert [record_from_json(v) for v in bad] == [None] * len(bad)


def test_a_bad_connections_topic_is_one_clear_error() -> None:
    assert connection_topic(None) is None
    with pytest.raises(ConfigurationError, match="connections_topic must be a topic name"):
        connection_topic({"bootstrap_servers": "127.0.0.1:9", "connections_topic": ""})
    topic = connection_topic({"bootstrap_servers": "127.0.0.1:9"})
    assert topic is not None
    assert topic.topic == "clientmetrics_connections"
