"""Usage per client from pushed metrics: records and bytes produced and consumed per day.

Where no proxy counts the traffic, the clients' own cumulative counters say what
they produced and consumed. From the points table (cumulative values), per client
instance, UTC day and series, usage is the counter's growth over the day: its
largest value less its largest on the series' previous day; on its first day, less
0 when the counter started that day (a client's counters start at 0 with the
client), else less its smallest. The counters (the Java client's names; a client
that does not send them has no usage here), all prefixed ``org.apache.kafka.``:

- ``produced_records``: ``producer.record.send.total``, the client's series;
- ``produced_bytes``: ``producer.topic.byte.total``, summed over its per-topic
  series (compressed batch bytes);
- ``consumed_records``, ``consumed_bytes``:
  ``consumer.fetch.manager.records.consumed.total`` and ``.bytes.consumed.total``,
  the client's series (the per-topic copies, with a ``topic``, would count twice).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["USAGE_ARROW", "USAGE_METRICS", "usage_from_points"]

_PREFIX = "org.apache.kafka."
#: metric name -> (usage column, whether per-topic series are the ones summed).
USAGE_METRICS = {
    f"{_PREFIX}producer.record.send.total": ("produced_records", False),
    f"{_PREFIX}producer.topic.byte.total": ("produced_bytes", True),
    f"{_PREFIX}consumer.fetch.manager.records.consumed.total": ("consumed_records", False),
    f"{_PREFIX}consumer.fetch.manager.bytes.consumed.total": ("consumed_bytes", False),
}
_COLUMNS = ("produced_records", "produced_bytes", "consumed_records", "consumed_bytes")
_KEY = ("day", "principal", "client_id", "client_instance_id")

USAGE_ARROW = pa.schema(
    [
        ("day", pa.string()),
        ("principal", pa.string()),
        ("client_id", pa.string()),
        ("client_instance_id", pa.string()),
        *((name, pa.int64()) for name in _COLUMNS),
        #: ``pushed_metrics`` (the clients' counters) or ``proxy`` (counted on the wire).
        ("source", pa.string()),
    ]
)
_READ = (
    "principal",
    "client_id",
    "client_instance_id",
    "metric_name",
    "attributes",
    "series",
    "start_time",
    "event_time",
    "cumulative_value",
)


def usage_from_points(points: pa.Table) -> pa.Table:
    """Usage per day, principal, client id and instance (``USAGE_ARROW``) from points."""
    wanted = pc.is_in(points.column("metric_name"), pa.array(list(USAGE_METRICS)))
    rows = points.filter(pc.fill_null(wanted, False)).select(list(_READ)).to_pylist()
    # (series, column) -> day -> [key, min, max, started that day]
    days: dict[tuple[Any, ...], dict[str, list[Any]]] = defaultdict(dict)
    for row in rows:
        column, per_topic = USAGE_METRICS[row["metric_name"]]
        has_topic = any(k == "topic" for k, _ in row["attributes"] or [])
        value, at = row["cumulative_value"], row["event_time"]
        if has_topic != per_topic or value is None or at is None:
            continue
        day = at.strftime("%Y-%m-%d")
        key = (day, row["principal"], row["client_id"], row["client_instance_id"])
        started = row["start_time"] is not None and row["start_time"].strftime("%Y-%m-%d") == day
        span = days[(row["client_instance_id"], row["series"], column)].setdefault(
            day, [key, value, value, started]
        )
        span[1], span[2], span[3] = min(span[1], value), max(span[2], value), span[3] or started
    totals: dict[tuple[Any, ...], dict[str, float]] = defaultdict(dict)
    for (_instance, _series, column), spans in days.items():
        previous: float | None = None
        for day in sorted(spans):
            key, low, high, started = spans[day]
            base = previous if previous is not None else (0.0 if started else low)
            totals[key][column] = totals[key].get(column, 0.0) + max(high - base, 0.0)
            previous = high
    out = [
        dict(zip(_KEY, key, strict=True))
        | {name: round(used[name]) if name in used else None for name in _COLUMNS}
        | {"source": "pushed_metrics"}
        for key, used in sorted(totals.items())
    ]
    return pa.Table.from_pylist(out, schema=USAGE_ARROW)
