"""The decode pass: a micro-batch's pushes to points files and a few narrow side outputs.

One Arrow call per group of whole client instances (the job partitions and
sorts the pushes by instance; each instance's carried series and window state
ride along as extra rows) decodes the payloads, keys the series, normalises
temporality, and then

* writes the points rows itself, with pyarrow's Parquet writer, under the
  batch's staging directory (Spark's row-at-a-time writer was most of the job's
  time: ``docs/pipeline.md``);
* writes what the later stages need, already reduced: the instances' windows
  (carried partial aggregates merged with this batch's), the series state for
  the next batch, one inventory row per instance, and the points alert rules
  must see;
* returns a manifest: one row per file written, with the task's highest event
  time (the writing is ``pass_files``'s).

So Spark never handles a wide point row: it splits the windows by the
watermark, folds a row per instance into the inventory and tracks alert
episodes on the few points that can change one. Nothing here needs a Spark
session, and there is no Python loop per data point.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.arrow_alerts import (
    ALERT_STATE_ARROW,
    EPISODES_ARROW,
    holds,
    rule_matches,
    runs,
    track_episodes,
)
from clientmetrics.pipeline.arrow_series import ACCUMULATING, running_values
from clientmetrics.pipeline.clients import PUSH_LABELS
from clientmetrics.pipeline.rules import AlertRule
from clientmetrics.pipeline.schemas import (
    DECODED_ARROW,
    LABEL_COLUMNS,
    LANDING_ARROW,
    SERIES_STATE_ARROW,
    WINDOW_STATE_ARROW,
)
from clientmetrics.telemetry.otlp_arrow import decode_points

_TIMESTAMP = pa.timestamp("us", tz="UTC")
_STRING_MAP = pa.map_(pa.string(), pa.string())

#: A points table row as written (its ``date`` is the directory it is written to).
POINTS_ARROW = pa.schema(
    [
        *DECODED_ARROW,
        ("series", pa.string()),
        ("cumulative_value", pa.float64()),
        ("rate_per_second", pa.float64()),
    ]
)


def _carried_fields() -> list[pa.Field]:
    """The state schemas' columns, each once, less those the pushes already have."""
    seen = {*LABEL_COLUMNS, "payload"}
    fields = []
    for schema in (SERIES_STATE_ARROW, WINDOW_STATE_ARROW, ALERT_STATE_ARROW):
        for state_field in schema:
            if state_field.name not in seen:
                seen.add(state_field.name)
                fields.append(state_field)
    return fields


#: The pass's input: pushes (``carried`` null: labels and payload), and the
#: carried state of their instances (``carried`` is ``series``, ``window`` or
#: ``alert``).
PASS_INPUT_ARROW = pa.schema(
    [
        *(LANDING_ARROW.field(name) for name in LABEL_COLUMNS),
        LANDING_ARROW.field("payload"),
        ("carried", pa.string()),
        *_carried_fields(),
    ]
)

#: Per instance, this batch's view of it (``clients.client_view``'s shape).
CLIENT_VIEW_ARROW = pa.schema(
    [
        ("client_instance_id", pa.string()),
        *(LANDING_ARROW.field(name) for name in PUSH_LABELS),
        ("resource_attributes", _STRING_MAP),
        ("resource_seen", _TIMESTAMP),
        ("first_seen", _TIMESTAMP),
        ("last_seen", _TIMESTAMP),
        ("last_push", _TIMESTAMP),
        ("pushes", pa.int64()),
        ("terminated", pa.bool_()),
    ]
)

#: A client_windows table row as written (its ``date`` is the directory).
CLIENT_WINDOWS_ARROW = pa.schema(
    [
        *(
            WINDOW_STATE_ARROW.field(name)
            for name in (
                "client_instance_id",
                "metric_name",
                "attributes",
                "window_start",
                "window_end",
                "count",
                "min",
                "max",
            )
        ),
        ("avg", pa.float64()),
        WINDOW_STATE_ARROW.field("last"),
    ]
)


#: The points alert rules must see (see ``rule_candidates``).
CANDIDATES_ARROW = pa.schema(
    [
        ("series", pa.string()),
        ("client_instance_id", pa.string()),
        ("metric_name", pa.string()),
        ("attributes", _STRING_MAP),
        ("event_time", _TIMESTAMP),
        ("value", pa.float64()),
    ]
)

#: The side outputs, by the name of their staging directory.
SIDE_OUTPUTS = {
    "windows": WINDOW_STATE_ARROW,
    "series": SERIES_STATE_ARROW,
    "clients": CLIENT_VIEW_ARROW,
    "episodes": EPISODES_ARROW,
}


@dataclass(frozen=True, slots=True)
class PassPlan:
    """What one micro-batch's pass needs to know, sent to every task."""

    #: Where the batch's files go: a directory URI pyarrow and Spark both understand.
    staging: str
    window_seconds: int
    #: Points older than this (µs since the epoch) are late: no window takes them.
    late_before_us: int | None = None
    rules: tuple[AlertRule, ...] = ()
    #: Points rows buffered before a file is written.
    flush_rows: int = 1_000_000


@dataclass(slots=True)
class GroupResult:
    """What the pass makes of one group of whole instances."""

    points: pa.Table
    sides: dict[str, pa.Table]
    max_event_time: int | None


def decode_pushes(pushes: pa.Table | pa.RecordBatch) -> pa.Table:
    """One row per data point (``DECODED_ARROW``), each with its push's labels."""
    decoded = decode_points(pushes.column("payload")).points
    rows = decoded.column("row")
    labels = [pushes.column(name).take(rows) for name in LABEL_COLUMNS]
    return pa.Table.from_arrays(labels + decoded.columns[1:], schema=DECODED_ARROW)


def process_group(rows: pa.Table, plan: PassPlan) -> GroupResult:
    """Decode and normalise a group of whole instances; reduce it to the side outputs.

    ``rows`` has the ``PASS_INPUT_ARROW`` columns: pushes, and the carried
    state rows of their instances. The series and window side outputs are the
    instances' whole new state, carried rows included.
    """
    carried = rows.column("carried")
    pushes = rows.filter(pc.is_null(carried))
    series_state = rows.filter(pc.equal(carried, "series")).select(SERIES_STATE_ARROW.names)
    window_state = rows.filter(pc.equal(carried, "window")).select(WINDOW_STATE_ARROW.names)
    alert_state = rows.filter(pc.equal(carried, "alert")).select(ALERT_STATE_ARROW.names)
    if pushes.num_rows:
        running, order = running_values(decode_pushes(pushes))
        points = normalise(running, series_state)
    else:
        points, order = POINTS_ARROW.empty_table(), pa.array([], pa.int64())
    highest = pc.max(pc.cast(points.column("event_time"), pa.int64())).as_py()
    windows = window_partials(points, order, plan.window_seconds, plan.late_before_us)
    sides = {
        "windows": merge_windows(window_state, windows),
        "series": merge_series(series_state, series_lasts(points, order)),
        "clients": client_views(pushes, points),
    }
    if plan.rules:
        candidates = rule_candidates(points, order, plan.rules)
        sides["episodes"] = track_episodes(candidates, alert_state, plan.rules)
    return GroupResult(points=points, sides=sides, max_event_time=highest)


# --- temporality ------------------------------------------------------------------------------


def _np(array: pa.Array | pa.ChunkedArray, fill: object) -> np.ndarray:
    return np.asarray(pc.fill_null(array, fill).to_numpy(zero_copy_only=False))


def _micros(array: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    values = pc.cast(array, pa.int64())
    return _np(values, 0).astype(np.int64), _np(pc.is_valid(values), False).astype(bool)


def _floats(array: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    return _np(array, 0.0).astype(np.float64), _np(pc.is_valid(array), False).astype(bool)


def _per_second(
    amount: np.ndarray, amount_ok: np.ndarray, seconds: np.ndarray, seconds_ok: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    ok = amount_ok & seconds_ok & (seconds > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, amount / np.where(ok, seconds, 1.0), 0.0), ok


def _less(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # Spark orders NaN above every number.
    less: np.ndarray = (a < b) | (np.isnan(b) & ~np.isnan(a))
    return less


def normalise(points: pa.Table, state: pa.Table) -> pa.Table:
    """Add ``cumulative_value`` and ``rate_per_second``: ``points.with_normalised_values``.

    ``points`` comes from ``arrow_series.running_values`` (every series of
    this batch whole in it); ``state`` holds the carried ``SERIES_STATE_ARROW``
    rows of its series. Same rules, and the same nulls, as the Spark transform.
    """
    found = pc.index_in(points.column("series"), value_set=state.column("series"))
    carried, carried_ok = _floats(state.column("last_cumulative").take(found))
    last_time, last_time_ok = _micros(state.column("last_time").take(found))
    kind = points.column("kind")
    accumulating = _np(pc.is_in(kind, pa.array(ACCUMULATING)), False).astype(bool)
    delta = _np(pc.equal(points.column("temporality"), "delta"), False).astype(bool)
    value, value_ok = _floats(points.column("value"))
    run, run_ok = _floats(points.column("_run"))
    carried0 = np.where(carried_ok, carried, 0.0)

    cumulative = np.where(delta, carried0 + run, value)
    cumulative_ok = np.where(delta, run_ok, value_ok)

    has_prev = _np(points.column("_has_prev"), False).astype(bool)
    prev_delta = _np(points.column("_prev_delta"), False).astype(bool)
    prev_run, prev_run_ok = _floats(points.column("_prev_run"))
    prev_value, prev_value_ok = _floats(points.column("_prev_value"))
    previous = np.where(prev_delta, carried0 + prev_run, prev_value)
    previous_ok = has_prev & np.where(prev_delta, prev_run_ok, prev_value_ok)
    prev = np.where(previous_ok, previous, carried)
    prev_ok = previous_ok | carried_ok

    lag_time, lag_ok = _micros(points.column("_lag_time"))
    lag_ok &= has_prev
    prev_time = np.where(lag_ok, lag_time, last_time)
    prev_time_ok = lag_ok | last_time_ok

    event, event_ok = _micros(points.column("event_time"))
    start, start_ok = _micros(points.column("start_time"))
    since_start = (event - start) / 1_000_000.0
    since_start_ok = event_ok & start_ok
    since_prev = (event - prev_time) / 1_000_000.0
    since_prev_ok = event_ok & prev_time_ok
    started = start_ok & (start > 0)
    monotonic = _np(points.column("monotonic"), False).astype(bool)

    reset = (
        ~prev_ok
        | (started & prev_time_ok & (start > prev_time) & ~delta)
        | (monotonic & cumulative_ok & prev_ok & _less(cumulative, prev))
    )
    # Delta points: their own value over the time since their start (else since
    # the previous point). Others: the increase since the previous point, or
    # after a reset the whole value since the new start.
    by_start = _per_second(value, value_ok, since_start, since_start_ok)
    by_prev = _per_second(value, value_ok, since_prev, since_prev_ok)
    reset_rate = _per_second(cumulative, cumulative_ok, since_start, since_start_ok)
    step_rate = _per_second(cumulative - prev, cumulative_ok & prev_ok, since_prev, since_prev_ok)
    rate = np.where(
        delta,
        np.where(started, by_start[0], by_prev[0]),
        np.where(reset, reset_rate[0], step_rate[0]),
    )
    rate_ok = np.where(
        delta,
        np.where(started, by_start[1], by_prev[1]),
        np.where(reset, started & reset_rate[1], step_rate[1]),
    )

    keep = accumulating
    base = points.select(POINTS_ARROW.names[: len(DECODED_ARROW) + 1])
    base = base.append_column(
        "cumulative_value", pa.array(cumulative, pa.float64(), mask=~(keep & cumulative_ok))
    )
    return base.append_column(
        "rate_per_second", pa.array(rate, pa.float64(), mask=~(keep & rate_ok))
    )


# --- side outputs -----------------------------------------------------------------------------


def _group_order(keys: pa.Array | pa.ChunkedArray, *then: tuple[str, pa.Array]) -> pa.Array:
    """Indices that group rows by ``keys`` (via integer codes) and sort each group by ``then``."""
    columns: dict[str, pa.Array | pa.ChunkedArray] = {
        "_key": pc.dictionary_encode(keys).combine_chunks().indices
        if isinstance(keys, pa.ChunkedArray)
        else pc.dictionary_encode(keys).indices
    }
    columns.update(then)
    table = pa.table(columns)
    return pc.sort_indices(table, [(name, "ascending") for name in table.column_names])


def _take_runs(table: pa.Table, rows: np.ndarray) -> pa.Table:
    return table.take(pa.array(rows, pa.int64()))


def _grouped(points: pa.Table, order: pa.Array, columns: list[str]) -> pa.Table:
    """Narrow columns in the order that groups the points by series; ``_row`` maps back."""
    grouped = points.select(columns).take(order)
    return grouped.append_column("_row", pc.cast(order, pa.int64()))


def window_partials(
    points: pa.Table, order: pa.Array, window_seconds: int, late_before_us: int | None
) -> pa.Table:
    """Per series and tumbling event-time window: count, sum, min, max, last (with a value).

    ``windows.aggregate_window_partials`` in Arrow, after
    ``windows.filter_on_time`` (points before ``late_before_us`` are late).
    ``order`` groups the points by series in event-time order
    (``arrow_series.running_values``): windows are then runs, and need no sort.
    """
    grouped = _grouped(points, order, ["series", "event_time", "value"])
    usable = pc.and_(
        pc.is_valid(grouped.column("value")), pc.is_valid(grouped.column("event_time"))
    )
    if late_before_us is not None:
        event = pc.cast(grouped.column("event_time"), pa.int64())
        usable = pc.and_(usable, pc.greater_equal(event, late_before_us))
    chosen = grouped.filter(usable)
    if chosen.num_rows == 0:
        return WINDOW_STATE_ARROW.empty_table()
    width = window_seconds * 1_000_000
    event, _ = _micros(chosen.column("event_time"))
    window_start = event // width * width
    first, last = runs(chosen.column("series"), pa.array(window_start))
    values = _np(chosen.column("value"), 0.0).astype(np.float64)
    heads = points.select(["client_instance_id", "metric_name", "attributes"]).take(
        chosen.column("_row").take(pa.array(first))
    )
    # np.fmin skips NaN, np.maximum keeps it: Spark's min and max, for which NaN is largest.
    columns = {
        "series": chosen.column("series").take(pa.array(first)),
        "client_instance_id": heads.column("client_instance_id"),
        "metric_name": heads.column("metric_name"),
        "attributes": heads.column("attributes"),
        "window_start": pa.array(window_start[first]).cast(_TIMESTAMP),
        "window_end": pa.array(window_start[first] + width).cast(_TIMESTAMP),
        "count": pa.array(last - first + 1, pa.int64()),
        "sum": pa.array(np.add.reduceat(values, first)),
        "min": pa.array(np.fmin.reduceat(values, first)),
        "max": pa.array(np.maximum.reduceat(values, first)),
        "last": pa.array(values[last]),
        "last_time": chosen.column("event_time").take(pa.array(last)),
    }
    return pa.table([columns[name] for name in WINDOW_STATE_ARROW.names], schema=WINDOW_STATE_ARROW)


def merge_windows(state: pa.Table, partials: pa.Table) -> pa.Table:
    """Carried partial windows combined with this batch's: ``windows.merge_window_partials``."""
    if state.num_rows == 0:
        return partials
    both = pa.concat_tables([state.cast(WINDOW_STATE_ARROW), partials])
    order = _group_order(
        both.column("series"),
        ("w", pc.cast(both.column("window_start"), pa.int64())),
        ("t", pc.cast(both.column("last_time"), pa.int64())),
    )
    both = both.take(order)
    first, last = runs(both.column("series"), both.column("window_start"))
    counts = _np(both.column("count"), 0).astype(np.int64)
    sums = _np(both.column("sum"), 0.0).astype(np.float64)
    low = _np(both.column("min"), np.nan).astype(np.float64)
    high = _np(both.column("max"), np.nan).astype(np.float64)
    heads = _take_runs(both, first)
    columns = {name: heads.column(name) for name in WINDOW_STATE_ARROW.names[:6]}
    columns["count"] = pa.array(np.add.reduceat(counts, first), pa.int64())
    columns["sum"] = pa.array(np.add.reduceat(sums, first))
    columns["min"] = pa.array(np.fmin.reduceat(low, first))
    columns["max"] = pa.array(np.maximum.reduceat(high, first))
    columns["last"] = both.column("last").take(pa.array(last))
    columns["last_time"] = both.column("last_time").take(pa.array(last))
    return pa.table([columns[name] for name in WINDOW_STATE_ARROW.names], schema=WINDOW_STATE_ARROW)


def series_lasts(points: pa.Table, order: pa.Array) -> pa.Table:
    """Each accumulating series' latest point (``points.latest_series_points``).

    ``order`` groups the points by series in event-time order.
    """
    grouped = _grouped(points, order, ["series", "cumulative_value"])
    chosen = grouped.filter(pc.is_valid(grouped.column("cumulative_value")))
    _, last = runs(chosen.column("series"))
    rows = chosen.column("_row").take(pa.array(last))
    latest = points.select(["series", "event_time", "start_time", "cumulative_value"]).take(rows)
    return pa.table(latest.columns, schema=SERIES_STATE_ARROW)


def merge_series(state: pa.Table, latest: pa.Table) -> pa.Table:
    """The carried series state with this batch's latest points in place of their rows."""
    kept = state.filter(pc.invert(pc.is_in(state.column("series"), latest.column("series"))))
    return pa.concat_tables([kept.cast(SERIES_STATE_ARROW), latest])


def _latest_resources(points: pa.Table) -> pa.Table:
    """Per instance, the resource attributes of its latest push that had points."""
    order = _group_order(
        points.column("client_instance_id"),
        ("t", pc.cast(points.column("received_at"), pa.int64())),
    )
    grouped = _grouped(points, order, ["client_instance_id"])
    _, last = runs(grouped.column("client_instance_id"))
    rows = grouped.column("_row").take(pa.array(last))
    return points.select(["client_instance_id", "received_at", "resource_attributes"]).take(rows)


def client_views(pushes: pa.Table, points: pa.Table) -> pa.Table:
    """One inventory row per instance (``clients.client_view`` in Arrow).

    ``last_push`` is the last push that carried metrics; ``last_seen`` counts
    empty pushes too; ``terminated`` is whether the latest push was terminating.
    """
    if pushes.num_rows == 0:
        return CLIENT_VIEW_ARROW.empty_table()
    received = pc.cast(pushes.column("received_at"), pa.int64())
    pushes = pushes.take(_group_order(pushes.column("client_instance_id"), ("t", received)))
    first, last = runs(pushes.column("client_instance_id"))
    latest = _take_runs(pushes, last)
    received_at, received_ok = _micros(pushes.column("received_at"))
    with_metrics = _np(pc.greater(pc.binary_length(pushes.column("payload")), 0), False)
    floor = np.iinfo(np.int64).min
    pushed = np.maximum.reduceat(
        np.where(with_metrics.astype(bool) & received_ok, received_at, floor), first
    )
    resources = _latest_resources(points)
    found = pc.index_in(latest.column("client_instance_id"), resources.column("client_instance_id"))
    columns = {
        "client_instance_id": latest.column("client_instance_id"),
        **{name: latest.column(name) for name in PUSH_LABELS},
        "resource_attributes": resources.column("resource_attributes").take(found),
        "resource_seen": resources.column("received_at").take(found),
        "first_seen": pushes.column("received_at").take(pa.array(first)),
        "last_seen": latest.column("received_at"),
        "last_push": pa.array(pushed, pa.int64(), mask=pushed == floor).cast(_TIMESTAMP),
        "pushes": pa.array(last - first + 1, pa.int64()),
        "terminated": latest.column("terminating"),
    }
    return pa.table([columns[name] for name in CLIENT_VIEW_ARROW.names], schema=CLIENT_VIEW_ARROW)


def rule_candidates(points: pa.Table, order: pa.Array, rules: tuple[AlertRule, ...]) -> pa.Table:
    """The points alert episodes need: ``alerts.points_named_by``, less what cannot matter.

    Of a series a rule names, every point when the rule's condition holds on
    one of them in this batch; otherwise only its first point, which is all
    that can resolve an episode carried from an earlier batch. ``order``
    groups the points by series in event-time order.
    """
    metric = points.column("metric_name")
    has_value = _np(pc.is_valid(points.column("value")), False).astype(bool)
    named = np.zeros(points.num_rows, dtype=bool)
    holding = np.zeros(points.num_rows, dtype=bool)
    values = _np(points.column("value"), 0.0).astype(np.float64)
    for rule in rules:
        hit = rule_matches(metric, rule) & has_value
        named |= hit
        holding |= hit & holds(rule.op, values, rule.threshold)
    if not named.any():
        return CANDIDATES_ARROW.empty_table()
    sorted_rows = order.to_numpy()
    chosen = sorted_rows[named[sorted_rows]]  # named points, grouped and in time order
    series = points.column("series").take(pa.array(chosen))
    active = pc.unique(points.column("series").filter(pa.array(holding)))
    keep = _np(pc.is_in(series, active), False).astype(bool)
    first, _ = runs(series)
    keep[first] = True
    rows = pa.array(chosen[keep])
    return points.select(CANDIDATES_ARROW.names).take(rows).cast(CANDIDATES_ARROW)


# --- the task ---------------------------------------------------------------------------------


def instance_groups(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.Table]:
    """Tables of whole instances, from batches sorted by ``client_instance_id``.

    Arrow batches end anywhere, so the last instance of each batch is held back
    and joined to the next: an instance is never split between two tables.
    """
    held: list[pa.RecordBatch] = []
    for batch in batches:
        ids = batch.column("client_instance_id")
        last = ids[len(ids) - 1] if len(ids) else None
        cut = pc.index(ids, last).as_py() if last is not None and last.is_valid else 0
        if cut > 0:
            yield pa.Table.from_batches([*held, batch.slice(0, cut)]).combine_chunks()
            held = []
        held.append(batch.slice(cut))
    if held and sum(len(batch) for batch in held):
        yield pa.Table.from_batches(held).combine_chunks()
