"""Alert episodes in Arrow: ``alerts.track_alert_episodes`` for the decode pass.

The decode pass sees each instance whole, with its open episodes carried in as
state rows, so it can track episodes itself, on the few points that can change
one (``arrow_pass.rule_candidates``), and hand Spark one row per episode
touched. The rules are the same as the Spark transform's, and
``tests/pipeline/test_arrow_pass.py`` holds the two to the same answers:

* an episode is a run of consecutive points of one series on which the rule
  holds; it starts at its first such point (or, for the run that continues an
  episode carried from an earlier batch, where that one started);
* it fires at its first point at which it has held for the rule's duration;
* it resolves at the first later point on which the rule does not hold.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.rules import AlertRule

_TIMESTAMP = pa.timestamp("us", tz="UTC")
_STRING_MAP = pa.map_(pa.string(), pa.string())
_NEVER = np.iinfo(np.int64).max

#: Open alert episodes (``schemas.ALERT_STATE``).
ALERT_STATE_ARROW = pa.schema(
    [
        ("rule", pa.string()),
        ("series", pa.string()),
        ("client_instance_id", pa.string()),
        ("metric_name", pa.string()),
        ("attributes", _STRING_MAP),
        ("started_at", _TIMESTAMP),
        ("last_true_at", _TIMESTAMP),
        ("high", pa.float64()),
        ("low", pa.float64()),
        ("fired_at", _TIMESTAMP),
    ]
)

#: The alerts table's columns, as written (its ``date`` is the partition directory).
ALERT_EVENT_COLUMNS = (
    "alert_id",
    "rule",
    "status",
    "client_instance_id",
    "metric_name",
    "attributes",
    "labels",
    "started_at",
    "fired_at",
    "resolved_at",
    "peak",
    "op",
    "threshold",
    "duration_seconds",
)

#: Every episode a batch touched: ``alerts.track_alert_episodes``'s columns.
EPISODES_ARROW = pa.schema(
    [
        *ALERT_STATE_ARROW,
        ("episode", pa.int64()),
        ("resolved_at", _TIMESTAMP),
        ("newly_fired", pa.bool_()),
    ]
)


def holds(op: str, value: np.ndarray, threshold: float) -> np.ndarray:
    """A rule's comparison, with Spark's NaN semantics (NaN equals NaN and is largest)."""
    nan_value, nan_bound = np.isnan(value), bool(np.isnan(threshold))
    equal = (value == threshold) | (nan_value & nan_bound)
    greater = (value > threshold) | (nan_value & (not nan_bound))
    result = {
        ">": greater,
        ">=": greater | equal,
        "<": ~(greater | equal),
        "<=": ~greater,
        "==": equal,
        "!=": ~equal,
    }[op]
    return np.asarray(result, dtype=bool)


def rule_matches(metric: pa.Array | pa.ChunkedArray, rule: AlertRule) -> np.ndarray:
    """Which metric names a rule names (exactly, or by prefix)."""
    matched = (
        pc.starts_with(metric, rule.metric) if rule.is_prefix else pc.equal(metric, rule.metric)
    )
    return np.asarray(pc.fill_null(matched, False).to_numpy(zero_copy_only=False), dtype=bool)


def _micros(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    values = pc.fill_null(pc.cast(array, pa.int64()), 0)
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64)


def runs(*columns: pa.Array | pa.ChunkedArray | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each run of equal keys starts and ends (inclusive)."""
    size = len(columns[0])
    if size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.zeros(size, dtype=bool)
    starts[0] = True
    for column in columns:
        if isinstance(column, np.ndarray):
            starts[1:] |= column[1:] != column[:-1]
        else:
            change = pc.fill_null(pc.not_equal(column[1:], column[:-1]), True)
            starts[1:] |= np.asarray(change.to_numpy(zero_copy_only=False), dtype=bool)
    first = np.flatnonzero(starts)
    return first, np.append(first[1:], size) - 1


def _timestamps(micros: np.ndarray, missing: np.ndarray) -> pa.Array:
    return pa.array(micros, pa.int64(), mask=missing).cast(_TIMESTAMP)


def track_episodes(points: pa.Table, state: pa.Table, rules: tuple[AlertRule, ...]) -> pa.Table:
    """Every episode this batch touched (``EPISODES_ARROW``), for each rule.

    ``points`` has ``series``, ``client_instance_id``, ``metric_name``,
    ``attributes``, ``event_time`` and ``value``, grouped by series and in
    event-time order; ``state`` holds the open episodes of the same series.
    """
    tables = [
        _track_rule(points, state.filter(pc.equal(state.column("rule"), rule.name)), rule)
        for rule in rules
    ]
    return pa.concat_tables([EPISODES_ARROW.empty_table(), *tables])


def _track_rule(points: pa.Table, state: pa.Table, rule: AlertRule) -> pa.Table:
    named = rule_matches(points.column("metric_name"), rule)
    named &= np.asarray(pc.is_valid(points.column("value")).to_numpy(zero_copy_only=False))
    rows = points.filter(pa.array(named))
    values = np.asarray(pc.fill_null(rows.column("value"), 0.0).to_numpy(), dtype=np.float64)
    true = holds(rule.op, values, rule.threshold)
    # Only series on which the rule holds somewhere, or that carry an open
    # episode, can change an alert.
    active = pc.unique(
        pa.concat_arrays(
            [
                pc.filter(rows.column("series").combine_chunks(), pa.array(true)),
                state.column("series").combine_chunks().cast(pa.string()),
            ]
        )
    )
    keep = np.asarray(pc.is_in(rows.column("series"), active).to_numpy(zero_copy_only=False))
    rows, values, true = rows.filter(pa.array(keep)), values[keep], true[keep]
    times = _micros(rows.column("event_time"))
    series = rows.column("series").combine_chunks()

    # Episode number per point: how many points the rule failed on so far in the series.
    first, last = runs(series)
    group = np.repeat(np.arange(len(first)), last - first + 1)
    failed = (~true).astype(np.int64)
    count = np.cumsum(failed)
    episode = count - (count[first] - failed[first])[group]

    # The runs of points on which it held, one per (series, episode).
    held_rows = np.flatnonzero(true)
    held_series = series.take(pa.array(held_rows))
    runs_first, runs_last = runs(held_series, episode[held_rows])
    run_of = np.repeat(np.arange(len(runs_first)), runs_last - runs_first + 1)
    heads = held_rows[runs_first]
    carried = pc.index_in(rows.column("series").take(pa.array(heads)), state.column("series"))
    carried_start = state.column("started_at").take(carried)
    carried_ok = np.asarray(pc.is_valid(carried_start).to_numpy(zero_copy_only=False))
    run_episode = episode[heads]
    start = np.where((run_episode == 0) & carried_ok, _micros(carried_start), times[heads])
    held_times, held_values = times[held_rows], values[held_rows]
    seconds = (held_times - start[run_of]) / 1_000_000.0
    satisfied = seconds > rule.duration_seconds if rule.strict else seconds >= rule.duration_seconds
    fired = (
        np.minimum.reduceat(np.where(satisfied, held_times, _NEVER), runs_first)
        if len(runs_first)
        else np.zeros(0, dtype=np.int64)
    )
    described = rows.select(["series", "client_instance_id", "metric_name", "attributes"]).take(
        pa.array(heads)
    )
    trues = pa.table(
        {
            "series": described.column("series"),
            "episode": pa.array(run_episode, pa.int64()),
            "client_instance_id": described.column("client_instance_id"),
            "metric_name": described.column("metric_name"),
            "attributes": described.column("attributes"),
            "started_at": _timestamps(start, np.zeros(len(start), dtype=bool)),
            "last_true_at": _timestamps(held_times[runs_last], np.zeros(len(start), dtype=bool)),
            "high": pa.array(
                np.maximum.reduceat(held_values, runs_first) if len(runs_first) else [],
                pa.float64(),
            ),
            "low": pa.array(
                np.fmin.reduceat(held_values, runs_first) if len(runs_first) else [], pa.float64()
            ),
            "fired_at": _timestamps(fired, fired == _NEVER),
        }
    )
    # A point the rule fails on ends the episode before it.
    failed_rows = np.flatnonzero(~true)
    closes = pa.table(
        {
            "series": series.take(pa.array(failed_rows)),
            "episode": pa.array(episode[failed_rows] - 1, pa.int64()),
            "resolved_at": rows.column("event_time").take(pa.array(failed_rows)),
        }
    )
    return _merge(trues, state, closes, rule.name)


def _keys(table: pa.Table) -> pa.Array:
    episode = pc.cast(table.column("episode"), pa.string())
    joined = pc.binary_join_element_wise(table.column("series"), episode, "\x1f")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def _merge(trues: pa.Table, state: pa.Table, closes: pa.Table, rule: str) -> pa.Table:
    """Carried episodes (episode 0) merged with this batch's runs; resolution times joined on."""
    previous = state.select(ALERT_STATE_ARROW.names[1:]).append_column(
        "episode", pa.array(np.zeros(state.num_rows, dtype=np.int64))
    )
    t_keys, p_keys = _keys(trues), _keys(previous)
    keys = pc.unique(pa.concat_arrays([p_keys, t_keys]))
    t = trues.take(pc.index_in(keys, t_keys))
    p = previous.take(pc.index_in(keys, p_keys))

    def pick(name: str) -> pa.Array:
        return pc.coalesce(p.column(name), t.column(name))

    def extreme(name: str, numpy_op: np.ufunc) -> pa.Array:
        a, b = t.column(name).combine_chunks(), p.column(name).combine_chunks()
        a_ok = np.asarray(pc.is_valid(a).to_numpy(zero_copy_only=False))
        b_ok = np.asarray(pc.is_valid(b).to_numpy(zero_copy_only=False))
        timestamps = pa.types.is_timestamp(a.type)
        if timestamps:
            x, y = _micros(a), _micros(b)
        else:
            x = np.asarray(pc.fill_null(a, 0.0).to_numpy(), dtype=np.float64)
            y = np.asarray(pc.fill_null(b, 0.0).to_numpy(), dtype=np.float64)
        result = np.where(a_ok & b_ok, numpy_op(x, y), np.where(a_ok, x, y))
        missing = ~(a_ok | b_ok)
        if timestamps:
            return _timestamps(result, missing)
        return pa.array(result, pa.float64(), mask=missing)

    fired_at = pick("fired_at")
    carried_fired = p.column("fired_at")
    resolved = closes.column("resolved_at").take(pc.index_in(keys, _keys(closes)))
    newly = pc.and_(pc.is_valid(fired_at), pc.invert(pc.is_valid(carried_fired)))
    columns = {
        "rule": pa.array([rule] * len(keys), pa.string()),
        "series": pick("series"),
        "client_instance_id": pick("client_instance_id"),
        "metric_name": pick("metric_name"),
        "attributes": pick("attributes"),
        "started_at": pick("started_at"),
        # Spark's greatest and least skip nulls; NaN is the largest number.
        "last_true_at": extreme("last_true_at", np.maximum),
        "high": extreme("high", np.maximum),
        "low": extreme("low", np.fmin),
        "fired_at": fired_at,
        "episode": pick("episode"),
        "resolved_at": resolved,
        "newly_fired": newly,
    }
    return pa.table(
        [pc.cast(columns[name], EPISODES_ARROW.field(name).type) for name in EPISODES_ARROW.names],
        schema=EPISODES_ARROW,
    )
