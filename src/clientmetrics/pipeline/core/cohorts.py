"""A cohort's profile: the instances sharing a client id, or a software and principal.

Per cohort and series key (the series without its instance), the mean and
variance of the members' points, decayed with event time (``COHORT_TAU_S``).
Members live in different tasks of the pipeline: each task scores its points
against the cohort state the previous batch left (``judge_cohorts``) and sums
them per cohort (``COHORT_PARTIALS_ARROW``); the driver merges the sums into
the state (``merge_cohorts``, bounded to ``COHORT_ROWS_MAX`` rows).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.core.arrays import filled, floats, micros, timestamps
from clientmetrics.pipeline.core.profiles import MAD_SCALE, spread
from clientmetrics.pipeline.core.schemas import (
    COHORT_PARTIALS_ARROW,
    COHORT_STATE_ARROW,
)
from clientmetrics.pipeline.core.series import series_without_instance

__all__ = ["COHORT_ROWS_MAX", "cohort_keys", "judge_cohorts", "merge_cohorts"]

#: How fast a cohort's profile forgets, in seconds of event time.
COHORT_TAU_S = 900.0
COHORT_MIN_MEMBERS = 5
#: A point further than this many spreads from the median of its cohort's points in
#: its task is not learnt.
COHORT_SCREEN = 6.0
COHORT_WARMUP = 50
#: The cohort state's bound (rows: cohort × series key); the least recent go first.
COHORT_ROWS_MAX = 50_000
#: A cohort row not updated for this long (event time) is dropped.
COHORT_RETENTION_S = 86_400.0


def cohort_keys(inventory: pa.Table) -> tuple[pa.Array, pa.Array]:
    """Each instance's two cohorts: ``client_id=ID``, and ``software=NAME principal=P``.

    Null where the instance has no client id, or neither a software name nor a
    principal.
    """
    client = pc.fill_null(pc.cast(inventory.column("client_id"), pa.string()), "")
    software = pc.fill_null(inventory.column("client_software_name"), "")
    principal = pc.fill_null(inventory.column("principal"), "")
    by_id = pc.binary_join_element_wise("client_id=", client, "")
    by_software = pc.binary_join_element_wise("software=", software, " principal=", principal, "")
    has_software = pc.or_(pc.not_equal(software, ""), pc.not_equal(principal, ""))
    return (
        _array(pc.if_else(pc.not_equal(client, ""), by_id, None)),
        _array(pc.if_else(has_software, by_software, None)),
    )


def _array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def judge_cohorts(
    points: pa.Table,
    rows: np.ndarray,
    x: np.ndarray,
    limit: np.ndarray,
    cohorts: pa.Table,
    inventory: pa.Table,
    scores: np.ndarray,
) -> pa.Table:
    """Score the points against their cohort (into ``scores``); sum them up per cohort.

    A point is judged by its ``client_id`` cohort when that one is ready, else
    by its software-and-principal cohort; it teaches both, unless it is away.
    """
    rows = rows[np.isfinite(limit[rows])]
    if not len(rows):
        return COHORT_PARTIALS_ARROW.empty_table()
    taken = pa.array(rows, pa.int64())
    instances = points.column("client_instance_id").take(taken)
    of = pc.index_in(instances, inventory.column("client_instance_id"))
    key = series_without_instance(points.column("series").take(taken))
    times, _ = micros(points.column("event_time").take(taken))
    value = x[rows]
    mine = [cohort.take(of) for cohort in cohort_keys(inventory)]
    judged = np.zeros(len(rows), dtype=bool)
    score = np.zeros(len(rows))
    for cohort in mine:
        against, ready = _against(cohort, key, value, cohorts)
        use = ready & ~judged
        score[use] = against[use]
        judged |= ready
    scores[rows[judged]] = score[judged]
    # Away from the cohort that judged it: it teaches neither (a cohort that cannot
    # judge yet must not learn a newcomer's departure as its profile).
    away = judged & (score > limit[rows])
    partials = [COHORT_PARTIALS_ARROW.empty_table()]
    partials += [_sums(cohort, key, instances, value, times, away) for cohort in mine]
    return pa.concat_tables(partials)


def _against(
    cohort: pa.Array, key: pa.Array, value: np.ndarray, cohorts: pa.Table
) -> tuple[np.ndarray, np.ndarray]:
    """Each point's score against its cohort's profile, and whether that profile judges."""
    joined = pc.binary_join_element_wise(cohort, key, "\x1f")
    known = pc.binary_join_element_wise(cohorts.column("cohort"), cohorts.column("key"), "\x1f")
    found = pc.index_in(joined, known)
    mean, mean_ok = floats(cohorts.column("mean").take(found))
    var, _ = floats(cohorts.column("var").take(found))
    members = filled(cohorts.column("members").take(found), 0).astype(np.int64)
    seen = filled(cohorts.column("points").take(found), 0).astype(np.int64)
    ready = mean_ok & (members >= COHORT_MIN_MEMBERS) & (seen >= COHORT_WARMUP)
    return np.abs(value - mean) / spread(mean, var), ready


def _sums(
    cohort: pa.Array,
    key: pa.Array,
    instances: pa.Array | pa.ChunkedArray,
    value: np.ndarray,
    times: np.ndarray,
    away: np.ndarray,
) -> pa.Table:
    """The task's sums per cohort and key (``COHORT_PARTIALS_ARROW``).

    A point away from its cohort does not teach it, unless most of the cohort's
    points here are away: then the cohort as a whole moved (a broker slow for all).
    """
    valid = np.asarray(pc.is_valid(cohort).to_numpy(zero_copy_only=False), dtype=bool)
    value = value[valid]
    table = pa.table(
        {
            "cohort": cohort.filter(pa.array(valid)),
            "key": key.filter(pa.array(valid)),
            "instance": instances.filter(pa.array(valid)),
            "x": pa.array(value),
            "xx": pa.array(value * value),
            "t": pa.array(times[valid], pa.int64()),
            "away": pa.array(away[valid].astype(np.float64)),
        }
    )
    joined = pc.binary_join_element_wise(table.column("cohort"), table.column("key"), "\x1f")
    share = table.append_column("k", joined).group_by("k").aggregate([("away", "mean")])
    moved = share.column("away_mean").take(pc.index_in(joined, share.column("k")))
    learn = pc.and_(
        pc.or_(pc.equal(table.column("away"), 0.0), pc.greater(moved, 0.5)),
        pa.array(~_far(joined, value)),
    )
    summed = (
        table.filter(learn)
        .group_by(["cohort", "key"])
        .aggregate(
            [
                ("x", "count"),
                ("instance", "count_distinct"),
                ("x", "sum"),
                ("xx", "sum"),
                ("t", "max"),
            ]
        )
    )
    return pa.table(
        {
            "cohort": summed.column("cohort"),
            "key": summed.column("key"),
            "points": summed.column("x_count"),
            "instances": summed.column("instance_count_distinct"),
            "total": summed.column("x_sum"),
            "total_squares": summed.column("xx_sum"),
            "last_time": pc.cast(summed.column("t_max"), pa.int64()).cast(
                COHORT_PARTIALS_ARROW.field("last_time").type
            ),
        }
    ).cast(COHORT_PARTIALS_ARROW)


def _far(groups: pa.Array | pa.ChunkedArray, value: np.ndarray) -> np.ndarray:
    """Which points lie ``COHORT_SCREEN`` spreads from the median of their group's (a
    blip, a newcomer): they are not learnt, even while the cohort cannot judge yet."""

    def median_of(numbers: np.ndarray) -> np.ndarray:
        table = pa.table({"k": groups, "x": pa.array(numbers)})
        found = table.group_by("k").aggregate([("x", "approximate_median")])
        return floats(
            found.column("x_approximate_median").take(pc.index_in(groups, found.column("k")))
        )[0]

    median = median_of(value)
    width = MAD_SCALE * median_of(np.abs(value - median))
    far: np.ndarray = np.abs(value - median) > COHORT_SCREEN * spread(median, width * width)
    return far


def merge_cohorts(state: pa.Table, partials: pa.Table) -> pa.Table:
    """The cohort state after a batch: every task's partial sums merged into it.

    Per cohort and series key, the batch's mean ``m`` and variance ``v`` of
    the members' points move the profile by ``w = 1 - exp(-dt / COHORT_TAU_S)``
    (``dt``: event time since its last update; a new row takes the batch's):
    ``mean += w (m - mean)``, ``var = (1 - w) var + w (v + (m - mean)²)``.
    Members are the most instances one batch showed. Rows not updated for
    ``COHORT_RETENTION_S`` go, and at most ``COHORT_ROWS_MAX`` stay (the newest).
    """
    state = state.cast(COHORT_STATE_ARROW)
    if partials.num_rows:
        summed = partials.group_by(["cohort", "key"]).aggregate(
            [
                ("points", "sum"),
                ("instances", "sum"),
                ("total", "sum"),
                ("total_squares", "sum"),
                ("last_time", "max"),
            ]
        )
        n, _ = floats(summed.column("points_sum"))
        m = np.asarray(floats(summed.column("total_sum"))[0]) / np.maximum(n, 1)
        v = np.maximum(
            floats(summed.column("total_squares_sum"))[0] / np.maximum(n, 1) - m * m, 0.0
        )
        t, _ = micros(summed.column("last_time_max"))
        joined = pc.binary_join_element_wise(summed.column("cohort"), summed.column("key"), "\x1f")
        known = pc.binary_join_element_wise(state.column("cohort"), state.column("key"), "\x1f")
        found = pc.index_in(joined, known)
        old_ok = np.asarray(pc.is_valid(found).to_numpy(zero_copy_only=False), dtype=bool)
        mean, _ = floats(state.column("mean").take(found))
        var, _ = floats(state.column("var").take(found))
        old_t, _ = micros(state.column("last_time").take(found))
        old_n = filled(state.column("points").take(found), 0).astype(np.int64)
        old_members = filled(state.column("members").take(found), 0).astype(np.int64)
        dt = np.maximum(t - old_t, 0) / 1e6
        w = np.where(old_ok, 1.0 - np.exp(-dt / COHORT_TAU_S), 1.0)
        # Early on a cohort learns as fast as a plain average would.
        w = np.maximum(w, np.where(old_ok, n / np.maximum(n + old_n, 1), 1.0))
        delta = m - mean
        merged = pa.table(
            {
                "cohort": summed.column("cohort"),
                "key": summed.column("key"),
                "points": pa.array(old_n + n.astype(np.int64), pa.int64()),
                "members": pa.array(
                    np.maximum(old_members, filled(summed.column("instances_sum"), 0)), pa.int64()
                ),
                "mean": pa.array(mean + w * delta, pa.float64()),
                "var": pa.array((1 - w) * var + w * (v + delta * delta), pa.float64()),
                "last_time": timestamps(np.maximum(t, np.where(old_ok, old_t, 0))),
            }
        ).cast(COHORT_STATE_ARROW)
        state = pa.concat_tables([state.filter(pc.invert(pc.is_in(known, joined))), merged])
    times, _ = micros(state.column("last_time"))
    if state.num_rows:
        newest = times.max()
        state = state.filter(pa.array(times >= newest - COHORT_RETENTION_S * 1e6))
    if state.num_rows > COHORT_ROWS_MAX:
        times, _ = micros(state.column("last_time"))
        keep = np.argsort(-times, kind="stable")[:COHORT_ROWS_MAX]
        state = state.take(pa.array(np.sort(keep), pa.int64()))
    return state
