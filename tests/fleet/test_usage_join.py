"""Usage counted by the proxy per day and instance, and its agreement with pushed metrics."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from clientmetrics.pipeline.core.fleet import FLEET_ARROW
from clientmetrics.pipeline.core.usage import (
    USAGE_ARROW,
    fleet_usage,
    usage_agreement,
    usage_from_connections,
    usage_table,
)
from clientmetrics.telemetry.connections import ClientKey, ConnectionTable, records_to_arrow

JAVA = "7d1f0c2a-0b6e-4c39-9a4e-1f5f3c7e2b10"
DAY1 = int(datetime(2026, 11, 21, 23, 59, tzinfo=UTC).timestamp() * 1000)
DAY2 = DAY1 + 120_000  # 00:01 the next day


def key(client_id: str, instance: str = "", address: str = "10.0.0.7") -> ClientKey:
    return ClientKey("User:app", client_id, "apache-kafka-java", "4.4.0", "L", "PLAINTEXT",
                     address, instance, bool(instance))  # fmt: skip


def records() -> list[object]:
    table = ConnectionTable(max_keys=10, node_id=1, now_ms=DAY1 - 60_000)
    # The Java producer asks for its subscription on one connection, produces on another.
    table.observe(key("java", JAVA), DAY1 - 1)
    table.observe(key("java"), DAY1 - 1, usage=(40, 4_000, 40, 0, 0, 0))
    table.observe(key("sarama"), DAY1 - 1, usage=(10, 700, 1, 0, 0, 0))
    # Two instances of one client id from one address: an unnamed connection is "".
    table.observe(key("twins", "a"), DAY1 - 1, usage=(1, 100, 1, 0, 0, 0))
    table.observe(key("twins", "b"), DAY1 - 1, usage=(2, 200, 1, 0, 0, 0))
    table.observe(key("twins"), DAY1 - 1, usage=(0, 0, 0, 5, 500, 2))
    table.observe(key("idle"), DAY1 - 1)  # used nothing: no row
    out: list[object] = list(table.drain(DAY1))
    table.observe(key("java"), DAY2 - 1, usage=(2, 150, 2, 3, 330, 3))
    return out + table.drain(DAY2)


def test_the_proxys_counts_per_day_and_instance() -> None:
    usage = usage_from_connections(records_to_arrow(records()))  # type: ignore[arg-type]
    assert usage.schema == USAGE_ARROW
    rows = [
        (r["day"], r["client_id"], r["client_instance_id"], r["produced_records"],
         r["produced_bytes"], r["consumed_records"], r["consumed_bytes"], r["source"])
        for r in usage.to_pylist()
    ]  # fmt: skip
    assert rows == [
        ("2026-11-21", "java", JAVA, 40, 4_000, 0, 0, "proxy"),
        ("2026-11-21", "sarama", "", 10, 700, 0, 0, "proxy"),
        ("2026-11-21", "twins", "", 0, 0, 5, 500, "proxy"),
        ("2026-11-21", "twins", "a", 1, 100, 0, 0, "proxy"),
        ("2026-11-21", "twins", "b", 2, 200, 0, 0, "proxy"),
        ("2026-11-22", "java", JAVA, 2, 150, 3, 330, "proxy"),
    ]


def test_agreement_sets_the_sources_side_by_side() -> None:
    proxy = usage_from_connections(records_to_arrow(records()))  # type: ignore[arg-type]
    pushed = [
        {"day": "2026-11-21", "principal": "User:app", "client_id": "java",
         "client_instance_id": JAVA, "produced_records": 40, "produced_bytes": 4_100,
         "consumed_records": None, "consumed_bytes": None, "source": "pushed_metrics"},
        {"day": "2026-11-22", "principal": "User:app", "client_id": "java",
         "client_instance_id": JAVA, "produced_records": None, "produced_bytes": None,
         "consumed_records": 3, "consumed_bytes": 147, "source": "pushed_metrics"},
        {"day": "2026-11-21", "principal": "User:app", "client_id": "other",
         "client_instance_id": "x", "produced_records": 1, "produced_bytes": 1,
         "consumed_records": None, "consumed_bytes": None, "source": "pushed_metrics"},
    ]  # fmt: skip
    both = usage_table(None, None)
    assert both.num_rows == 0
    usage = pa.concat_tables([proxy, pa.Table.from_pylist(pushed, schema=USAGE_ARROW)])
    agreement = usage_agreement(usage).to_pylist()
    assert [(r["measure"], r["proxy"], r["pushed_metrics"]) for r in agreement] == [
        ("produced_records", 40, 40),
        ("produced_bytes", 4_000, 4_100),
        ("consumed_records", 3, 3),
        # The consumer counts its records' sizes: 330 less 3 batch headers of 61 bytes.
        ("consumed_bytes", 147, 147),
    ]
    assert [r["difference_pct"] for r in agreement] == [0.0, pytest.approx(2.5), 0.0, 0.0]


def _fleet_row(
    client_id: str, instances: list[str], address: str = "10.0.0.7"
) -> dict[str, object]:
    return {"principal": "User:app", "client_id": client_id, "client_source_address": address,
            "instances": instances}  # fmt: skip


def test_each_fleet_row_gets_its_usage_of_the_day_proxy_first() -> None:
    proxy = usage_from_connections(records_to_arrow(records()))  # type: ignore[arg-type]
    pushed = [
        {"day": "2026-11-21", "principal": "User:app", "client_id": "java",
         "client_instance_id": JAVA, "produced_records": 39, "produced_bytes": None,
         "consumed_records": None, "consumed_bytes": None, "source": "pushed_metrics"},
        {"day": "2026-11-21", "principal": "User:app", "client_id": "lib",
         "client_instance_id": "p", "produced_records": 7, "produced_bytes": None,
         "consumed_records": None, "consumed_bytes": None, "source": "pushed_metrics"},
    ]  # fmt: skip
    usage = pa.concat_tables([proxy, pa.Table.from_pylist(pushed, schema=USAGE_ARROW)])
    fleet = pa.Table.from_pylist(
        [
            _fleet_row("java", [JAVA]),
            _fleet_row("sarama", []),
            # Two rows of one client id: "twins"' unnamed connection belongs to neither.
            _fleet_row("twins", ["a"]),
            _fleet_row("twins", ["b"], address="10.0.0.8"),
            _fleet_row("lib", ["p"]),
            _fleet_row("idle", []),
        ],
        schema=FLEET_ARROW,
    )
    shown, unclaimed = fleet_usage(fleet, usage, "2026-11-21")
    counted = {"consumed_records": 0, "consumed_bytes": 0}
    assert shown == [
        # The proxy's (exact) where it counted; the pushed metrics' are not added to it.
        ("proxy", {"produced_records": 40, "produced_bytes": 4_000, **counted}),
        ("proxy", {"produced_records": 10, "produced_bytes": 700, **counted}),
        ("proxy", {"produced_records": 1, "produced_bytes": 100, **counted}),
        ("proxy", {"produced_records": 2, "produced_bytes": 200, **counted}),
        ("pushed_metrics", {"produced_records": 7}),
        None,
    ]
    zero = {"produced_records": 0, "produced_bytes": 0}
    assert unclaimed == {
        "User:app": {"proxy": {**zero, "consumed_records": 5, "consumed_bytes": 500}}
    }
    # The next day: only java used anything.
    shown, unclaimed = fleet_usage(fleet, usage, "2026-11-22")
    assert shown[0] == ("proxy", {"produced_records": 2, "produced_bytes": 150,
                                  "consumed_records": 3, "consumed_bytes": 330})  # fmt: skip
    assert shown[1:] == [None] * 5
    assert unclaimed == {}
