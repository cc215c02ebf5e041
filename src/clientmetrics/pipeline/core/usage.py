"""Usage per client: records and bytes produced and consumed per day, from two sources.

**The proxy** counts, exactly, what each client's connections carried: its
connection records' ``produced_*`` and ``consumed_*`` (the record batches of the
Produce requests and Fetch responses it relayed; bytes are whole batches as on the
wire, compressed as sent, headers included). ``usage_from_connections`` sums them per
UTC day (of the interval's end), principal, ``client_id`` and instance. A
connection that told no instance id (the Java client pushes on one connection and
produces on another) is the instance of its client when the fleet's key
(principal, ``client_id``, source address) names exactly one; else ``""``.

**Pushed metrics**: where no proxy counts the traffic, the clients' own cumulative counters say what
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
  The Java consumer counts its records' sizes, not their batches: 61 bytes of batch
  header fewer than the proxy per batch (and uncompressed sizes).

``usage_agreement`` sets the two sources side by side where both counted a client;
``fleet_usage`` gives each fleet row (``fleet.fleet_table``) its usage on one day,
from the same usage table the export writes.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.telemetry.connections import BATCH_HEADER_BYTES

__all__ = [
    "AGREEMENT_ARROW",
    "USAGE_ARROW",
    "USAGE_MEASURES",
    "USAGE_METRICS",
    "USAGE_POINT_COLUMNS",
    "fleet_usage",
    "usage_agreement",
    "usage_from_connections",
    "usage_from_points",
    "usage_table",
]

_PREFIX = "org.apache.kafka."
#: metric name -> (usage column, whether per-topic series are the ones summed).
USAGE_METRICS = {
    f"{_PREFIX}producer.record.send.total": ("produced_records", False),
    f"{_PREFIX}producer.topic.byte.total": ("produced_bytes", True),
    f"{_PREFIX}consumer.fetch.manager.records.consumed.total": ("consumed_records", False),
    f"{_PREFIX}consumer.fetch.manager.bytes.consumed.total": ("consumed_bytes", False),
}
USAGE_MEASURES = ("produced_records", "produced_bytes", "consumed_records", "consumed_bytes")
#: The proxy's counts: the measures and the batches they came in (null from pushed metrics).
_COUNTED = (*USAGE_MEASURES, "produced_batches", "consumed_batches")
_KEY = ("day", "principal", "client_id", "client_instance_id")

USAGE_ARROW = pa.schema(
    [
        ("day", pa.string()),
        ("principal", pa.string()),
        ("client_id", pa.string()),
        ("client_instance_id", pa.string()),
        *((name, pa.int64()) for name in _COUNTED),
        #: ``pushed_metrics`` (the clients' counters) or ``proxy`` (counted on the wire).
        ("source", pa.string()),
    ]
)
USAGE_POINT_COLUMNS = (
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
    rows = points.filter(pc.fill_null(wanted, False)).select(list(USAGE_POINT_COLUMNS)).to_pylist()
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
        | {name: round(used[name]) if name in used else None for name in USAGE_MEASURES}
        | {"source": "pushed_metrics"}
        for key, used in sorted(totals.items())
    ]
    return pa.Table.from_pylist(out, schema=USAGE_ARROW)


_PROXY: dict[str, Any] = {"source": "proxy"}


def _instances_by_client(connections: pa.Table) -> dict[tuple[str, ...], set[str]]:
    """The instance ids each client's records name (any record: the one that asked for
    its subscription often carried no traffic)."""
    named = connections.filter(pc.not_equal(connections.column("client_instance_id"), ""))
    known: dict[tuple[str, ...], set[str]] = defaultdict(set)
    wanted = ["principal", "client_id", "client_source_address", "client_instance_id"]
    for row in named.select(wanted).to_pylist():
        known[_client(row)].add(row["client_instance_id"])
    return known


def _client(row: dict[str, Any]) -> tuple[str, ...]:
    return (row["principal"], row["client_id"], row["client_source_address"])


def usage_from_connections(connections: pa.Table) -> pa.Table:
    """Usage per day, principal, client id and instance (``USAGE_ARROW``) counted by a proxy."""
    # Batches, and bytes too: records landed before batches were counted have none.
    counts = ("produced_batches", "consumed_batches", "produced_bytes", "consumed_bytes")
    used = pc.greater(functools.reduce(pc.add, (connections.column(name) for name in counts)), 0)
    wanted = ["interval_end_ms", "principal", "client_id", "client_source_address"]
    records = connections.filter(used).select([*wanted, "client_instance_id", *_COUNTED])
    rows = records.to_pylist()
    known = _instances_by_client(connections)
    totals: dict[tuple[str, ...], list[int]] = defaultdict(lambda: [0] * len(_COUNTED))
    for row in rows:
        instance = row["client_instance_id"]
        if not instance and len(known[_client(row)]) == 1:
            (instance,) = known[_client(row)]
        day = datetime.fromtimestamp(row["interval_end_ms"] / 1000, UTC).strftime("%Y-%m-%d")
        total = totals[(day, row["principal"], row["client_id"], instance)]
        for i, name in enumerate(_COUNTED):
            total[i] += row[name]
    out = [
        dict(zip(_KEY, key, strict=True)) | dict(zip(_COUNTED, used, strict=True)) | _PROXY
        for key, used in sorted(totals.items())
    ]
    return pa.Table.from_pylist(out, schema=USAGE_ARROW)


def usage_table(points: pa.Table | None, connections: pa.Table | None) -> pa.Table:
    """The exported usage: the proxy's rows, then the pushed metrics' (``source`` says)."""
    parts = [usage_from_connections(connections)] if connections is not None else []
    parts += [usage_from_points(points)] if points is not None else []
    return pa.concat_tables(parts) if parts else USAGE_ARROW.empty_table()


AGREEMENT_ARROW = pa.schema(
    [
        *((name, pa.string()) for name in _KEY),
        ("measure", pa.string()),
        ("proxy", pa.int64()),
        ("pushed_metrics", pa.int64()),
        #: (pushed - proxy) / proxy, in percent; null when the proxy counted 0.
        ("difference_pct", pa.float64()),
    ]
)


def usage_agreement(usage: pa.Table) -> pa.Table:
    """Where a client's usage has both sources, each measure side by side (``AGREEMENT_ARROW``).

    Each measure as the client's counter defines it: the proxy's consumed bytes less
    the batch headers (``bytes.consumed.total`` sums its records' sizes).
    """
    by_source: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = defaultdict(dict)
    for row in usage.to_pylist():
        by_source[row["source"]][tuple(row[name] for name in _KEY)] = row
    out = []
    for key in sorted(by_source["proxy"].keys() & by_source["pushed_metrics"].keys()):
        proxy, pushed = by_source["proxy"][key], by_source["pushed_metrics"][key]
        for name in USAGE_MEASURES:
            if pushed[name] is None:
                continue  # the client does not report it
            counted = proxy[name]
            if name == "consumed_bytes":  # the Java consumer counts records, not batches
                counted -= BATCH_HEADER_BYTES * proxy["consumed_batches"]
            pct = None if counted == 0 else 100.0 * (pushed[name] - counted) / counted
            row = dict(zip(_KEY, key, strict=True))
            out.append(
                row
                | {"measure": name, "proxy": counted, "pushed_metrics": pushed[name]}
                | {"difference_pct": pct}
            )
    return pa.Table.from_pylist(out, schema=AGREEMENT_ARROW)


#: What a fleet row's or principal's usage says: the four measures (None: not reported).
Measures = dict[str, int | None]


def _add(into: Measures, row: dict[str, Any]) -> None:
    for name in USAGE_MEASURES:
        if row[name] is not None:
            into[name] = (into.get(name) or 0) + int(row[name])


def fleet_usage(
    fleet: pa.Table, usage: pa.Table, day: str
) -> tuple[list[tuple[str, Measures] | None], dict[str, dict[str, Measures]]]:
    """Each fleet row's usage on ``day`` as (source, measures), None when it has none; and
    per principal, per source, what no row claims.

    A usage row is a fleet row's when its instance is one of the row's instances, or,
    told no instance, when it is the only row of its principal and ``client_id``. A
    row shows the proxy's count where the proxy counted it (exact), else its pushed
    metrics'; a usage row no fleet row claims is its principal's alone.
    """
    rows = fleet.select(["principal", "client_id", "instances"]).to_pylist()
    by_instance: dict[tuple[str, str], int] = {}
    by_client: dict[tuple[str, str], list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        by_client[(row["principal"], row["client_id"])].append(index)
        for instance in row["instances"] or []:
            by_instance.setdefault((row["principal"], instance), index)
    today = usage.filter(pc.equal(usage.column("day"), day)).to_pylist()
    found: dict[int, dict[str, Measures]] = defaultdict(lambda: defaultdict(dict))
    unclaimed: dict[str, dict[str, Measures]] = defaultdict(lambda: defaultdict(dict))
    for used in today:
        principal, instance = used["principal"], used["client_instance_id"]
        at = by_instance.get((principal, instance)) if instance else None
        same = by_client.get((principal, used["client_id"]), [])
        if at is None and not instance and len(same) == 1:
            at = same[0]
        if at is None:
            _add(unclaimed[principal][used["source"]], used)
        else:
            _add(found[at][used["source"]], used)
    shown: list[tuple[str, Measures] | None] = []
    for index in range(len(rows)):
        sources = found.get(index, {})
        source = "proxy" if "proxy" in sources else next(iter(sources), None)
        shown.append(None if source is None else (source, dict(sources[source])))
    return shown, {p: dict(s) for p, s in unclaimed.items()}
