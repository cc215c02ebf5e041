"""Alerts: a rule fires when its condition holds for the whole duration, and resolves after.

An *episode* is a run of consecutive points of one series on which a rule's
condition holds. It starts at its first such point (or, for the run that
continues an episode carried from an earlier batch, where that one started),
fires at its first point at which it has held for the rule's duration ("more
than" makes that strict) and resolves at the first later point on which the
condition fails. Episodes still open at the end of a batch are carried to the
next one as state, so an episode may span any number of batches.

The alerts table is an event log: one ``firing`` row when an episode fires and
one ``resolved`` row when a fired episode ends, both carrying the client's
labels, the start, the peak value and, for ``resolved``, when it ended.
"""

from __future__ import annotations

import hashlib
import json
from datetime import date, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.core.arrays import flags, floats, runs, timestamps
from clientmetrics.pipeline.core.arrays import micros as _micros_ok
from clientmetrics.pipeline.core.clients import client_labels, silence_deadlines, silent
from clientmetrics.pipeline.core.findings import JUDGED_COLUMNS
from clientmetrics.pipeline.core.rules import AlertRule
from clientmetrics.pipeline.core.schemas import (
    ALERT_STATE_ARROW,
    ALERTS_ARROW,
    EPISODES_ARROW,
    STRING_MAP,
    TIMESTAMP,
)
from clientmetrics.pipeline.core.series import SeriesOrder

_NEVER = np.iinfo(np.int64).max
#: ``end_with_clients``' clock for clients that leave (retire): later than any.
LEAVING = int(_NEVER)

#: The points alert rules must see (see ``rule_candidates``).
CANDIDATES_ARROW = pa.schema(
    [
        ("series", pa.string()),
        ("client_instance_id", pa.string()),
        ("metric_name", pa.string()),
        ("attributes", STRING_MAP),
        ("event_time", TIMESTAMP),
        ("value", pa.float64()),
        ("rate_per_second", pa.float64()),
        # Out of profile (``core/baselines``); null where no baseline judged the point.
        ("profile_score", pa.float64()),
        ("cohort_score", pa.float64()),
    ]
)


def measured(value: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Which values are measurements a rule can judge: not null, and finite.

    A client's NaN (Kafka's average or maximum of an empty window: no sample)
    and ±Inf mean "nothing measured": such a point neither crosses a threshold
    nor ends an episode, and is never a peak. The run summary counts them.
    """
    numbers, valid = floats(value)
    return np.asarray(valid & np.isfinite(numbers), dtype=bool)


def holds(op: str, value: np.ndarray, threshold: float) -> np.ndarray:
    """A rule's comparison of finite values (``measured``) with its finite threshold."""
    result = {
        ">": value > threshold,
        ">=": value >= threshold,
        "<": value < threshold,
        "<=": value <= threshold,
        "==": value == threshold,
        "!=": value != threshold,
    }[op]
    finite: np.ndarray = np.asarray(result, dtype=bool) & np.isfinite(value)
    return finite


def judged(points: pa.Table, rule: AlertRule) -> pa.ChunkedArray:
    """The column a rule's condition judges (``findings.JUDGED_COLUMNS``)."""
    return points.column(JUDGED_COLUMNS[rule.on])


def rule_matches(metric: pa.Array | pa.ChunkedArray, rule: AlertRule) -> np.ndarray:
    """Which metric names a rule names (exactly, or by prefix)."""
    matched = (
        pc.starts_with(metric, rule.metric) if rule.is_prefix else pc.equal(metric, rule.metric)
    )
    return np.asarray(pc.fill_null(matched, False).to_numpy(zero_copy_only=False), dtype=bool)


def _micros(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return _micros_ok(array)[0]


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
    named &= measured(judged(points, rule))
    rows = points.filter(pa.array(named))
    values = np.asarray(pc.fill_null(judged(rows, rule), 0.0).to_numpy(), dtype=np.float64)
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
    # The extremes up to the firing point (a firing event's peak must not depend on where
    # the batch that fired it ends).
    until_fired = held_times <= fired[run_of] if len(runs_first) else np.zeros(0, dtype=bool)
    fired_high = _reduce_runs(np.where(until_fired, held_values, -np.inf), runs_first, np.maximum)
    fired_low = _reduce_runs(np.where(until_fired, held_values, np.inf), runs_first, np.fmin)
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
            "started_at": timestamps(start, np.zeros(len(start), dtype=bool)),
            "last_true_at": timestamps(held_times[runs_last], np.zeros(len(start), dtype=bool)),
            "high": pa.array(
                np.maximum.reduceat(held_values, runs_first) if len(runs_first) else [],
                pa.float64(),
            ),
            "low": pa.array(
                np.fmin.reduceat(held_values, runs_first) if len(runs_first) else [], pa.float64()
            ),
            "fired_at": timestamps(fired, fired == _NEVER),
            "fired_high": pa.array(fired_high, pa.float64(), mask=fired == _NEVER),
            "fired_low": pa.array(fired_low, pa.float64(), mask=fired == _NEVER),
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


def _reduce_runs(values: np.ndarray, runs_first: np.ndarray, op: np.ufunc) -> np.ndarray:
    return op.reduceat(values, runs_first) if len(runs_first) else np.zeros(0, dtype=np.float64)


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

    def extreme(name: str, numpy_op: np.ufunc, carried: str | None = None) -> pa.Array:
        a = t.column(name).combine_chunks()
        b = p.column(carried or name).combine_chunks()
        a_ok = np.asarray(pc.is_valid(a).to_numpy(zero_copy_only=False))
        b_ok = np.asarray(pc.is_valid(b).to_numpy(zero_copy_only=False))
        is_time = pa.types.is_timestamp(a.type)
        if is_time:
            x, y = _micros(a), _micros(b)
        else:
            x = np.asarray(pc.fill_null(a, 0.0).to_numpy(), dtype=np.float64)
            y = np.asarray(pc.fill_null(b, 0.0).to_numpy(), dtype=np.float64)
        result = np.where(a_ok & b_ok, numpy_op(x, y), np.where(a_ok, x, y))
        missing = ~(a_ok | b_ok)
        if is_time:
            return timestamps(result, missing)
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
        # Nulls are skipped, and so is a NaN carried from a state written before
        # non-finite values were left out (``measured``).
        "last_true_at": extreme("last_true_at", np.maximum),
        "high": extreme("high", np.fmax),
        "low": extreme("low", np.fmin),
        "fired_at": fired_at,
        "episode": pick("episode"),
        "resolved_at": resolved,
        "newly_fired": newly,
        # What the carried part of an episode saw came before this batch's firing point.
        "fired_high": extreme("fired_high", np.fmax, carried="high"),
        "fired_low": extreme("fired_low", np.fmin, carried="low"),
    }
    return pa.table(
        [pc.cast(columns[name], EPISODES_ARROW.field(name).type) for name in EPISODES_ARROW.names],
        schema=EPISODES_ARROW,
    )


def rule_candidates(points: pa.Table, order: SeriesOrder, rules: tuple[AlertRule, ...]) -> pa.Table:
    """The points alert episodes need: those of metrics a rule names, less what cannot matter.

    Of a series a rule names, every point when the rule's condition holds on
    one of them in this batch; otherwise only its first point, which is all
    that can resolve an episode carried from an earlier batch. ``order``
    groups the points by series in event-time order.
    """
    metric = points.column("metric_name")
    named = np.zeros(points.num_rows, dtype=bool)
    holding = np.zeros(points.num_rows, dtype=bool)
    points = _with_scores(points)
    for rule in rules:
        column = judged(points, rule)
        hit = rule_matches(metric, rule) & measured(column)
        named |= hit
        holding |= hit & holds(rule.op, floats(column)[0], rule.threshold)
    if not named.any():
        return CANDIDATES_ARROW.empty_table()
    in_rules = named[order.rows]
    chosen = order.rows[in_rules]  # named points, grouped and in time order
    codes = order.codes[in_rules]
    keep = np.isin(codes, codes[holding[chosen]])
    first, _ = runs(codes)
    keep[first] = True
    rows = pa.array(chosen[keep])
    return points.select(CANDIDATES_ARROW.names).take(rows).cast(CANDIDATES_ARROW)


def _with_scores(points: pa.Table) -> pa.Table:
    """The points with the baselines' score columns (null when no baseline scored them)."""
    for name in ("profile_score", "cohort_score"):
        if name not in points.column_names:
            points = points.append_column(name, pa.nulls(points.num_rows, pa.float64()))
    return points


def _sql_text(moment: object) -> str:
    """A timestamp as SQL spells it in UTC: ``2026-11-21 22:26:40[.ffffff, zeros trimmed]``."""
    text = f"{moment:%Y-%m-%d %H:%M:%S}"
    fraction = f"{moment.microsecond:06d}".rstrip("0")  # type: ignore[attr-defined]
    return f"{text}.{fraction}" if fraction else text


def alert_id(rule: str, series: str, started_at: object) -> str:
    """An event's stable id: a hash of rule, series and start (incident tools deduplicate on it)."""
    key = f"{rule}|{series}|{_sql_text(started_at)}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def alert_events(
    episodes: pa.Table,
    rules: tuple[AlertRule, ...],
    inventory: pa.Table,
    reasons: np.ndarray | None = None,
) -> pa.Table:
    """The alerts table rows a batch adds (``ALERTS_ARROW``): ``firing`` and ``resolved`` events.

    ``episodes`` are the batch's (``track_episodes``); ``inventory`` has the
    rows of their instances, whose labels each event carries. ``reasons``
    says, per episode, why a resolved one resolved (default ``cleared``).
    """
    by_name = {rule.name: rule for rule in rules}
    fired = flags(episodes.column("newly_fired"))
    resolved = flags(pc.is_valid(episodes.column("fired_at"))) & flags(
        pc.is_valid(episodes.column("resolved_at"))
    )
    rows = np.concatenate([np.flatnonzero(fired), np.flatnonzero(resolved)])
    status = ["firing"] * int(fired.sum()) + ["resolved"] * int(resolved.sum())
    why = [None] * int(fired.sum()) + [
        "cleared" if reasons is None else str(reasons[row]) for row in np.flatnonzero(resolved)
    ]
    chosen = episodes.take(pa.array(rows, pa.int64()))
    labels = client_labels(inventory)
    found = pc.index_in(chosen.column("client_instance_id"), inventory.column("client_instance_id"))
    events = []
    for index, row in enumerate(chosen.to_pylist()):
        rule = by_name[row["rule"]]
        low = rule.op in ("<", "<=")
        events.append(
            {
                "alert_id": alert_id(row["rule"], row["series"], row["started_at"]),
                "rule": row["rule"],
                "status": status[index],
                "client_instance_id": row["client_instance_id"],
                "metric_name": row["metric_name"],
                "attributes": row["attributes"],
                "started_at": row["started_at"],
                "fired_at": row["fired_at"],
                "resolved_at": row["resolved_at"] if status[index] == "resolved" else None,
                "peak": _peak(row, low, firing=status[index] == "firing"),
                "op": rule.op,
                "threshold": rule.threshold,
                "duration_seconds": rule.duration_seconds,
                "resolution": why[index],
            }
        )
    table = pa.Table.from_pylist(events, schema=ALERTS_ARROW.remove(6))
    return table.add_column(6, ALERTS_ARROW.field("labels"), labels.take(found))


def _peak(episode: dict[str, Any], low: bool, *, firing: bool) -> float | None:
    """A firing event's peak is the extreme up to its firing; a resolved one's, the episode's."""
    name = ("fired_" if firing else "") + ("low" if low else "high")
    value = episode[name]
    return None if value is None else float(value)


def end_with_clients(
    state: pa.Table,
    inventory: pa.Table,
    rules: tuple[AlertRule, ...],
    as_of_us: int | None,
) -> tuple[pa.Table, pa.Table]:
    """Open episodes whose client terminated or expired end: their events, and the rest.

    A client that said goodbye (its latest push was terminating) or went
    silent (``clients.silent`` as of ``as_of_us``) will not clear its
    alerts itself: a fired episode resolves (``terminated``: at its last
    push; ``expired``: when it went silent), one not fired yet is dropped.
    ``state`` is open episodes (``ALERT_STATE_ARROW``); ``inventory`` their
    instances' rows (episodes of instances it lacks stay open). With
    ``as_of_us`` = ``LEAVING`` every client of ``inventory`` is silent whatever
    the clock (they retire).
    """
    if state.num_rows == 0:
        return ALERTS_ARROW.empty_table(), state
    found = pc.index_in(state.column("client_instance_id"), inventory.column("client_instance_id"))
    rows = inventory.take(found)
    terminated = flags(rows.column("terminated"))
    expired = np.zeros(state.num_rows, dtype=bool)
    if as_of_us is not None:
        quiet = silent(
            rows.column("last_seen"),
            rows.column("push_interval_ms"),
            pa.array(terminated),
            as_of_us,
        )
        expired = flags(quiet) & flags(pc.is_valid(found))
    gone = terminated | expired
    if not gone.any():
        return ALERTS_ARROW.empty_table(), state
    seen = _micros(rows.column("last_seen"))
    deadline, _ = silence_deadlines(rows.column("last_seen"), rows.column("push_interval_ms"))
    ended_at = np.where(terminated, seen, deadline)[gone]
    ending = state.filter(pa.array(gone))
    size = ending.num_rows
    episodes = ending.append_column("episode", pa.array(np.zeros(size, dtype=np.int64)))
    episodes = episodes.append_column("resolved_at", timestamps(ended_at, np.zeros(size, bool)))
    episodes = episodes.append_column("newly_fired", pa.array(np.zeros(size, dtype=bool)))
    for name in ("fired_high", "fired_low"):  # only resolved events come from here
        episodes = episodes.append_column(name, pa.nulls(size, pa.float64()))
    reasons = np.where(terminated[gone], "terminated", "expired")
    events = alert_events(episodes.select(EPISODES_ARROW.names), rules, inventory, reasons)
    return events, state.filter(pa.array(~gone))


def open_episodes(episodes: pa.Table) -> pa.Table:
    """The alert state to carry into the next batch: episodes that have not resolved."""
    still_open = episodes.filter(pc.is_null(episodes.column("resolved_at")))
    return still_open.select(ALERT_STATE_ARROW.names).cast(ALERT_STATE_ARROW)


def event_time(events: pa.Table) -> pa.ChunkedArray:
    """When each alert event happened: its resolution, else its firing (its ``date``)."""
    moment = pc.coalesce(events.column("resolved_at"), events.column("fired_at"))
    return moment if isinstance(moment, pa.ChunkedArray) else pa.chunked_array([moment])


def _json_default(value: object) -> str:
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


def alert_json(alert: dict[str, Any]) -> str:
    """One alert event as a JSON line (maps become objects, times ISO 8601)."""
    return json.dumps(alert, default=_json_default, sort_keys=True)


def event_lines(events: pa.Table) -> list[str]:
    """Alert events (``ALERTS_ARROW`` rows) as the JSON lines the sink and webhook get.

    Each has the alerts table's columns and its ``date`` (of the event).
    """
    days = pc.cast(event_time(events), pa.date32()).to_pylist()
    maps = [field.name for field in ALERTS_ARROW if pa.types.is_map(field.type)]
    lines = []
    for row, day in zip(events.to_pylist(), days, strict=True):
        for name in maps:
            row[name] = None if row[name] is None else dict(row[name])
        lines.append(alert_json({**row, "date": day}))
    return lines
