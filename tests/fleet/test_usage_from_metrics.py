"""Usage per day from the clients' own cumulative counters (where no proxy counts)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from clientmetrics.pipeline.core.schemas import POINTS_ARROW
from clientmetrics.pipeline.core.usage import USAGE_ARROW, usage_from_points

P = "org.apache.kafka."
DAY1 = datetime(2026, 11, 21, 8, tzinfo=UTC)
DAY0 = datetime(2026, 11, 20, 23, tzinfo=UTC)


def _point(metric: str, series: str, value: float | None, at: datetime, start: datetime,
           topic: str | None = None, instance: str = "a") -> dict[str, Any]:  # fmt: skip
    return {
        "principal": "User:app", "client_id": f"app-{instance}", "client_instance_id": instance,
        "metric_name": metric, "series": series, "cumulative_value": value,
        "attributes": [("topic", topic)] if topic else [], "start_time": start,
        "event_time": at,
    }  # fmt: skip


def test_usage_is_each_counters_growth_per_day() -> None:
    later = DAY1.replace(hour=9)
    next_day = datetime(2026, 11, 22, 1, tzinfo=UTC)
    points = [
        # Started on day 1 at 0: 40 records that day, 15 more the next.
        _point(f"{P}producer.record.send.total", "s", 10, DAY1, DAY1),
        _point(f"{P}producer.record.send.total", "s", 40, later, DAY1),
        _point(f"{P}producer.record.send.total", "s", 55, next_day, DAY1),
        # Per topic: one started that day (300), one the day before (grew by 20).
        _point(f"{P}producer.topic.byte.total", "t1", 100, DAY1, DAY1, topic="t1"),
        _point(f"{P}producer.topic.byte.total", "t1", 300, later, DAY1, topic="t1"),
        _point(f"{P}producer.topic.byte.total", "t2", 50, DAY1, DAY0, topic="t2"),
        _point(f"{P}producer.topic.byte.total", "t2", 70, later, DAY0, topic="t2"),
        # The client's consumed records count; the per-topic copy does not (twice).
        _point(f"{P}consumer.fetch.manager.records.consumed.total", "c", 25, later, DAY1,
               instance="b"),
        _point(f"{P}consumer.fetch.manager.records.consumed.total", "ct", 25, later, DAY1,
               topic="t1", instance="b"),
        # Neither a value nor a usage metric: nothing.
        _point(f"{P}consumer.fetch.manager.bytes.consumed.total", "n", None, later, DAY1,
               instance="b"),
        _point(f"{P}producer.request.total", "r", 9, later, DAY1),
    ]  # fmt: skip
    usage = usage_from_points(pa.Table.from_pylist(points, schema=POINTS_ARROW))
    assert usage.schema == USAGE_ARROW
    got = [
        (r["day"], r["client_instance_id"], r["produced_records"], r["produced_bytes"],
         r["consumed_records"], r["consumed_bytes"], r["source"])
        for r in usage.to_pylist()
    ]  # fmt: skip
    assert got == [
        ("2026-11-21", "a", 40, 320, None, None, "pushed_metrics"),
        ("2026-11-21", "b", None, None, 25, None, "pushed_metrics"),
        ("2026-11-22", "a", 15, None, None, None, "pushed_metrics"),
    ]


def test_no_points_no_usage() -> None:
    assert usage_from_points(POINTS_ARROW.empty_table()).num_rows == 0
