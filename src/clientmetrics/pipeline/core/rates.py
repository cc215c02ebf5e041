"""Temporality and rates: every sum's cumulative value and per-second rate, across batches.

Delta and cumulative sums (and histograms and summaries, through their sum)
end up the same way: a cumulative value and a rate per second, carried on from
the series' state between batches. The dashboard's fresh view uses the same
rule (``fresh_rates``), so a chart and the tables agree on the same pushes.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.core.arrays import filled, flags, floats, less, micros, runs, take_rows
from clientmetrics.pipeline.core.schemas import DECODED_ARROW, POINTS_ARROW, SERIES_STATE_ARROW
from clientmetrics.pipeline.core.series import ACCUMULATING, SeriesOrder, running_values


def _per_second(
    amount: np.ndarray, amount_ok: np.ndarray, seconds: np.ndarray, seconds_ok: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    ok = amount_ok & seconds_ok & (seconds > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, amount / np.where(ok, seconds, 1.0), 0.0), ok


def normalise(points: pa.Table, state: pa.Table) -> pa.Table:
    """Add ``cumulative_value`` and ``rate_per_second`` per series, whatever the temporality.

    ``points`` comes from ``series.running_values`` (every series of this
    batch whole in it); ``state`` holds the carried ``SERIES_STATE_ARROW`` rows
    of its series. Delta points are summed onto the series' previous
    cumulative value; cumulative points are their own cumulative value. The
    rate is the cumulative increase per second since the series' previous
    point; after a reset (a new start time, or a monotonic sum going down) it
    is the value over the time since the new start. A delta point's rate is
    its own value over the time since its start (else since the previous
    point). Gauges have neither.
    """
    found = pc.index_in(points.column("series"), value_set=state.column("series"))
    carried, carried_ok = floats(state.column("last_cumulative").take(found))
    last_time, last_time_ok = micros(state.column("last_time").take(found))
    kind = points.column("kind")
    accumulating = filled(pc.is_in(kind, pa.array(ACCUMULATING)), False).astype(bool)
    delta = filled(pc.equal(points.column("temporality"), "delta"), False).astype(bool)
    value, value_ok = floats(points.column("value"))
    run, run_ok = floats(points.column("_run"))
    carried0 = np.where(carried_ok, carried, 0.0)

    cumulative = np.where(delta, carried0 + run, value)
    cumulative_ok = np.where(delta, run_ok, value_ok)

    has_prev = filled(points.column("_has_prev"), False).astype(bool)
    prev_delta = filled(points.column("_prev_delta"), False).astype(bool)
    prev_run, prev_run_ok = floats(points.column("_prev_run"))
    prev_value, prev_value_ok = floats(points.column("_prev_value"))
    previous = np.where(prev_delta, carried0 + prev_run, prev_value)
    previous_ok = has_prev & np.where(prev_delta, prev_run_ok, prev_value_ok)
    prev = np.where(previous_ok, previous, carried)
    prev_ok = previous_ok | carried_ok

    lag_time, lag_ok = micros(points.column("_lag_time"))
    lag_ok &= has_prev
    prev_time = np.where(lag_ok, lag_time, last_time)
    prev_time_ok = lag_ok | last_time_ok

    event, event_ok = micros(points.column("event_time"))
    start, start_ok = micros(points.column("start_time"))
    since_start = (event - start) / 1_000_000.0
    since_start_ok = event_ok & start_ok
    since_prev = (event - prev_time) / 1_000_000.0
    since_prev_ok = event_ok & prev_time_ok
    started = start_ok & (start > 0)
    monotonic = filled(points.column("monotonic"), False).astype(bool)

    reset = (
        ~prev_ok
        | (started & prev_time_ok & (start > prev_time) & ~delta)
        | (monotonic & cumulative_ok & prev_ok & less(cumulative, prev))
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


def series_lasts(points: pa.Table, order: SeriesOrder) -> pa.Table:
    """Each accumulating series' latest point, in the series state's shape.

    ``order`` groups the points by series in event-time order.
    """
    valid = flags(pc.is_valid(points.column("cumulative_value")))[order.rows]
    chosen = order.rows[valid]
    _, last = runs(order.codes[valid])
    latest = points.select(["series", "event_time", "start_time", "cumulative_value"])
    return pa.table(take_rows(latest, chosen[last]).columns, schema=SERIES_STATE_ARROW)


def merge_series(state: pa.Table, latest: pa.Table) -> pa.Table:
    """The carried series state with this batch's latest points in place of their rows."""
    kept = state.filter(pc.invert(pc.is_in(state.column("series"), latest.column("series"))))
    return pa.concat_tables([kept.cast(SERIES_STATE_ARROW), latest])


def fresh_rates(points: pa.Table, state: pa.Table) -> pa.Table:
    """Decoded points (``DECODED_ARROW``) keyed and normalised, grouped by series in time order.

    What the dashboard computes from pushes the pipeline has not processed
    yet: the same rule as the tables', carried on from ``state`` (each
    series' latest point in the tables, ``series_state_of``).
    """
    running, order = running_values(points)
    return normalise(running, state.cast(SERIES_STATE_ARROW)).take(order.indices)


def series_state_of(points: pa.Table) -> pa.Table:
    """The series state the points table's rows leave: each series' latest accumulating point.

    ``points`` needs ``series``, ``event_time``, ``start_time`` and ``cumulative_value``.
    """
    chosen = points.filter(pc.is_valid(points.column("cumulative_value")))
    if chosen.num_rows == 0:
        return SERIES_STATE_ARROW.empty_table()
    order = pc.sort_indices(chosen, [("series", "ascending"), ("event_time", "ascending")])
    ordered = chosen.take(order)
    _, last = runs(ordered.column("series"))
    latest = ordered.select(["series", "event_time", "start_time", "cumulative_value"])
    chosen_rows = latest.take(pa.array(last))
    return pa.table(chosen_rows.columns, names=SERIES_STATE_ARROW.names).cast(SERIES_STATE_ARROW)
