"""find_clients over hand-made landing rows: the query, the state, the group, the matches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from clientmetrics.investigate.find import Query, find_clients
from clientmetrics.telemetry.model import Subscription
from clientmetrics.telemetry.otlp import build_metrics_data, gauge
from clientmetrics.telemetry.push_arrow import LANDING_ARROW

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)
A = "00000000-0000-0000-0000-00000000000a"
B = "00000000-0000-0000-0000-00000000000b"
C = "00000000-0000-0000-0000-00000000000c"


def row(instance: str, ago_s: float, **labels: Any) -> dict[str, Any]:
    when_ns = int((NOW - timedelta(seconds=ago_s)).timestamp() * 1e9)
    metrics = [gauge("org.apache.kafka.consumer.poll.idle.ratio.avg", 0.5, time_unix_nano=when_ns)]
    data = build_metrics_data(metrics, resource_attributes=labels.pop("resource", None))
    base: dict[str, Any] = {
        "received_at": NOW - timedelta(seconds=ago_s),
        "client_instance_id": instance,
        "subscription_id": 7,
        "terminating": False,
        "client_id": "app",
        "client_software_name": "apache-kafka-java",
        "client_software_version": "4.4.0",
        "client_source_address": "10.0.0.1",
        "client_source_port": 40000,
        "principal": "User:alice",
        "node_id": 1,
        "listener": "PLAINTEXT",
        "security_protocol": "PLAINTEXT",
        "compression_type": 0,
        "push_interval_ms": 10_000,
        "payload": data.SerializeToString(),
    }
    return base | labels


def table(*rows: dict[str, Any]) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=LANDING_ARROW)


def test_state_pushing_silent_gone() -> None:
    rows = table(
        row(A, 5),  # 5 s ago, interval 10 s: pushing
        row(B, 31),  # 31 s ago > 3 x 10 s: silent
        row(C, 60, client_source_address="10.0.0.2"),
        row(C, 50, terminating=True),  # said goodbye: gone, whatever the time
    )
    hits = {h.client_instance_id: h for h in find_clients(rows, Query(), now_ms=NOW_MS)}
    assert {i: h.state for i, h in hits.items()} == {A: "pushing", B: "silent", C: "gone"}
    assert hits[C].source_addresses == ("10.0.0.1", "10.0.0.2")
    assert hits[A].metric_types == ("consumer",)
    assert [h.client_instance_id for h in find_clients(rows, Query(), now_ms=NOW_MS)] == [A, B, C]


def test_query_fields_all_must_match() -> None:
    rows = table(
        row(A, 1, resource={"group.id": "orders"}),
        row(B, 1, client_id="app-2", principal="User:bob"),
        row(C, 1, client_software_name="confluent-kafka-python", resource={"group_id": "x"}),
    )

    def ids(query: Query) -> list[str]:
        return sorted(h.client_instance_id for h in find_clients(rows, query, now_ms=NOW_MS))

    assert ids(Query(client_id="app")) == [A, C]
    assert ids(Query(client_id_pattern="app-[0-9]")) == [B]
    assert ids(Query(client_id_pattern="app")) == [A, C]  # matched whole, not searched
    assert ids(Query(principal="User:bob")) == [B]
    assert ids(Query(software_name="confluent-kafka-python")) == [C]
    assert ids(Query(group="orders")) == [A]
    assert ids(Query(group="x", client_id="app")) == [C]
    assert ids(Query(source_address="10.0.0.9")) == []


def test_the_subscriptions_each_client_matches() -> None:
    rows = table(row(A, 1), row(B, 1, client_id="other"))
    subs = [
        Subscription("all", ("org.apache.kafka.",), 60_000, ()),
        Subscription("apps", ("org.apache.kafka.",), 60_000, (("client_id", "app"),)),
        Subscription("there", ("x.",), 60_000, (("client_source_address", "10\\.0\\.0\\.1"),)),
        Subscription("java", ("x.",), 60_000, (("client_software_name", "librdkafka"),)),
    ]
    hits = {h.client_instance_id: h for h in find_clients(rows, Query(), now_ms=NOW_MS,
                                                          subscriptions=subs)}  # fmt: skip
    assert hits[A].subscriptions == ("all", "apps", "there")
    assert hits[B].subscriptions == ("all", "there")


def test_metric_names_of_the_latest_push_only() -> None:
    """Without a subscription id (the broker plugin's records) what tells a client back on
    its old subscription is what its latest push carries: 3 names watched, then 2."""
    names = ["org.apache.kafka.consumer." + n for n in ("a", "b", "c")]

    def push(ago_s: float, count: int) -> dict[str, Any]:
        when_ns = int((NOW - timedelta(seconds=ago_s)).timestamp() * 1e9)
        data = build_metrics_data([gauge(n, 1.0, time_unix_nano=when_ns) for n in names[:count]])
        return row(A, ago_s, subscription_id=None, payload=data.SerializeToString())

    assert [
        h.last_push_metrics
        for h in find_clients(table(push(20, 3), push(10, 2)), Query(), now_ms=NOW_MS)
    ] == [2]
    assert [
        h.last_push_metrics
        for h in find_clients(table(push(20, 2), push(10, 3)), Query(), now_ms=NOW_MS)
    ] == [3]
