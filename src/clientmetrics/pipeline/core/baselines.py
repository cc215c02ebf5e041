"""Out of profile: a client's own recent history, and its cohort's, as the threshold.

KIP-714's proactive monitoring "triggers alarms when trends go out of profile".
No threshold is written for these: each point of a metric an out-of-profile
rule names (``on = "profile"`` or ``on = "cohort"``) gets a **score**, how far
it lies from a baseline in spreads::

    score = |x - mean| / max(sd, REL_FLOOR * |mean|, ABS_FLOOR)

and the rule's condition judges the score like any other column ("above 6 for
at least 120 seconds": a sustained departure; one bad push never fires). ``x``
is a gauge's value, or a sum's rate per second (so restarts and counter resets,
which ``core/rates`` turns into a fresh rate, are no departure).

* **profile** — per series (one client instance's metric and attributes):
  the median and spread of its first ``WARMUP`` points, then an exponentially
  weighted mean and variance of its own points, carried between batches as
  state (``BASELINE_STATE_ARROW``, one row per series, dropped when the
  instance retires). A new series judges nothing until it has ``WARMUP``
  points. A point out of profile does not move the baseline (a
  departure must not become its own reference), until ``RELEARN``
  consecutive points were out: then the level is the client's new profile.
* **cohort** — the instances that share a ``client_id``, and those that share
  a software name and principal (a point is judged by the first of the two
  that is ready, and teaches both): per cohort and series key (the series without
  its instance), the mean and variance of the members' points, decayed with
  event time (``COHORT_TAU_S``). The members of a cohort live in different
  tasks, so each task sums its points (``COHORT_PARTIALS_ARROW``), the driver
  merges the sums into the cohort state (``merge_cohorts``, bounded to
  ``COHORT_ROWS_MAX`` rows) and the next batch judges against it. A cohort
  judges once it had ``COHORT_MIN_MEMBERS`` instances and ``COHORT_WARMUP``
  points. This is what judges a client with no history of its own (a new
  instance, a restart) and one that was always unlike its peers.

Everything is on whole columns; the per-client walk steps through the n-th
point of every series at once (a batch rarely holds more than a few points of
one series).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.core.alerts import measured, rule_matches
from clientmetrics.pipeline.core.arrays import filled, floats, micros, runs, timestamps
from clientmetrics.pipeline.core.rules import AlertRule
from clientmetrics.pipeline.core.schemas import (
    BASELINE_STATE_ARROW,
    COHORT_PARTIALS_ARROW,
    COHORT_STATE_ARROW,
)
from clientmetrics.pipeline.core.series import ACCUMULATING, SERIES_SEPARATOR, SeriesOrder

__all__ = ["Scored", "cohort_keys", "merge_cohorts", "score_points"]

#: A learnt point's weight in a client's profile (about 14 points' half-life).
ALPHA = 0.05
#: Points a client's baseline learns before it judges.
WARMUP = 10
#: A point in profile pulls its profile at most this many spreads (a near-miss moves it
#: little).
CLIP = 3.0
#: The median absolute deviation times this is a normal distribution's sd.
MAD_SCALE = 1.4826
#: Consecutive points out of profile after which their level is the new profile.
RELEARN = 60
#: The spread is at least this share of the mean, and at least ``ABS_FLOOR`` (the
#: metric's unit: ms for the latencies the catalogue profiles), so a series that
#: never moved is not out of profile for a change nobody would notice.
REL_FLOOR = 0.1
ABS_FLOOR = 1.0
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


@dataclass(slots=True)
class Scored:
    """What scoring a batch's points makes."""

    #: The points with ``profile_score`` and ``cohort_score`` (null: not judged).
    points: pa.Table
    #: The series' profiles after the batch (``BASELINE_STATE_ARROW``).
    state: pa.Table
    #: The batch's sums per cohort and series key (``COHORT_PARTIALS_ARROW``).
    partials: pa.Table


def _spread(mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    floor = np.maximum(REL_FLOOR * np.abs(mean), ABS_FLOOR)
    spread: np.ndarray = np.maximum(np.sqrt(np.maximum(var, 0.0)), floor)
    return spread


def _limits(metric: pa.ChunkedArray, rules: list[AlertRule]) -> np.ndarray:
    """Per point, the lowest threshold of the rules naming its metric (inf: none)."""
    limit = np.full(len(metric), np.inf)
    for rule in rules:
        limit[rule_matches(metric, rule)] = np.fmin(
            limit[rule_matches(metric, rule)], rule.threshold
        )
    return limit


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


def score_points(
    points: pa.Table,
    order: SeriesOrder,
    state: pa.Table,
    cohorts: pa.Table,
    inventory: pa.Table,
    rules: tuple[AlertRule, ...],
) -> Scored:
    """Score a batch's points against their profiles, and learn from them.

    ``points`` are normalised (``core/rates``) and ``order`` groups them by
    series in event-time order; ``state`` holds the carried profiles of their
    series, ``cohorts`` the cohort state as the previous batch left it, and
    ``inventory`` the instances' rows (their cohort).
    """
    own = [rule for rule in rules if rule.on == "profile"]
    peers = [rule for rule in rules if rule.on == "cohort"]
    size = points.num_rows
    profile = np.full(size, np.nan)
    cohort = np.full(size, np.nan)
    partials = COHORT_PARTIALS_ARROW.empty_table()
    if own or peers:
        metric = points.column("metric_name")
        accumulating = filled(pc.is_in(points.column("kind"), pa.array(ACCUMULATING)), False)
        values, _ = floats(points.column("value"))
        rates, _ = floats(points.column("rate_per_second"))
        x = np.where(accumulating.astype(bool), rates, values)
        ok = np.where(
            accumulating.astype(bool),
            measured(points.column("rate_per_second")),
            measured(points.column("value")),
        )
        own_limit, peer_limit = _limits(metric, own), _limits(metric, peers)
        chosen = ok & (np.isfinite(own_limit) | np.isfinite(peer_limit))
        rows = order.rows[chosen[order.rows]]
        codes = order.codes[chosen[order.rows]]
        series = points.column("series").take(pa.array(rows, pa.int64()))
        state = _learn(series, codes, x[rows], own_limit[rows], points, rows, state, profile)
        partials = _judge_cohorts(points, rows, x, peer_limit, cohorts, inventory, cohort)
    scored = points.append_column("profile_score", pa.array(profile, mask=np.isnan(profile)))
    scored = scored.append_column("cohort_score", pa.array(cohort, mask=np.isnan(cohort)))
    return Scored(scored, state.cast(BASELINE_STATE_ARROW), partials)


def _warmup_rows(lists: pa.Array | pa.ChunkedArray, size: int) -> np.ndarray:
    """The carried first points, one row of ``WARMUP`` per series (NaN: none yet)."""
    if isinstance(lists, pa.ChunkedArray):
        lists = lists.combine_chunks()
    rows = np.full((size, WARMUP), np.nan)
    lengths = np.minimum(filled(pc.list_value_length(lists), 0).astype(np.int64), WARMUP)
    flat, _ = floats(pc.list_flatten(pc.list_slice(lists, 0, WARMUP)))
    starts = np.cumsum(lengths) - lengths
    column = np.arange(len(flat)) - np.repeat(starts, lengths)
    rows[np.repeat(np.arange(size), lengths), column] = flat
    return rows


def _robust(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Median and variance (from the median absolute deviation) of each row's points."""
    median = np.nanmedian(rows, axis=1)
    mad = np.nanmedian(np.abs(rows - median[:, None]), axis=1)
    return median, (MAD_SCALE * mad) ** 2


def _learn(
    series: pa.Array | pa.ChunkedArray,
    codes: np.ndarray,
    x: np.ndarray,
    limit: np.ndarray,
    points: pa.Table,
    rows: np.ndarray,
    state: pa.Table,
    profile: np.ndarray,
) -> pa.Table:
    """Walk each series' points in order: score (into ``profile``), then learn.

    ``rows`` are the scored points (grouped by series, in time order), ``codes``
    their series' codes, ``x`` and ``limit`` their values and profile thresholds.
    A profile starts as the median and median absolute deviation of its first
    ``WARMUP`` points (a blip among them does not skew it); from then on each
    point in profile moves it by ``ALPHA``, its pull bounded to ``CLIP`` spreads.
    """
    first, last = runs(codes)
    heads = series.take(pa.array(first, pa.int64())) if len(first) else pa.array([], pa.string())
    found = pc.index_in(heads, state.column("series"))
    count = filled(state.column("baseline_count").take(found), 0).astype(np.int64)
    early = _warmup_rows(state.column("baseline_warmup").take(found), len(first))
    mean, _ = floats(state.column("baseline_mean").take(found))
    var, _ = floats(state.column("baseline_var").take(found))
    out = filled(state.column("baseline_out").take(found), 0).astype(np.int64)
    times, _ = micros(points.column("event_time").take(pa.array(rows, pa.int64())))
    length = last - first + 1
    for step in range(int(length.max(initial=0))):
        alive = np.flatnonzero(length > step)
        at = first[alive] + step
        value, m, v, o = x[at], mean[alive], var[alive], out[alive]
        warm = count[alive] >= WARMUP
        spread = _spread(m, v)
        score = np.abs(value - m) / spread
        judge = warm & np.isfinite(limit[at])
        profile[rows[at[judge]]] = score[judge]
        away = judge & (score > limit[at])
        relearn = away & (o + 1 >= RELEARN)
        pull = np.clip(value - m, -CLIP * spread, CLIP * spread)
        mean[alive] = np.where(away, np.where(relearn, value, m), m + ALPHA * pull)
        var[alive] = np.where(away, v, (1 - ALPHA) * (v + ALPHA * pull * pull))
        out[alive] = np.where(away & ~relearn, o + 1, 0)
        # Still learning: keep the point; the WARMUP-th makes the profile.
        learning = alive[~warm]
        early[learning, count[learning]] = value[~warm]
        count[learning] += 1
        done = learning[count[learning] == WARMUP]
        mean[done], var[done] = _robust(early[done])
    own = np.isfinite(limit[first]) if len(first) else np.zeros(0, dtype=bool)
    kept_early = [
        None if n >= WARMUP else row[:n].tolist() for n, row in zip(count, early, strict=True)
    ]
    latest = pa.table(
        {
            "series": heads,
            "baseline_count": pa.array(count, pa.int64()),
            "baseline_warmup": pa.array(kept_early, pa.list_(pa.float64())),
            "baseline_mean": pa.array(mean, pa.float64()),
            "baseline_var": pa.array(var, pa.float64()),
            "baseline_out": pa.array(out, pa.int64()),
            "last_time": timestamps(times[last]),
        }
    ).filter(pa.array(own))
    kept = state.filter(pc.invert(pc.is_in(state.column("series"), latest.column("series"))))
    return pa.concat_tables([kept.cast(BASELINE_STATE_ARROW), latest.cast(BASELINE_STATE_ARROW)])


def _series_keys(series: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The series keys without their instance (``metric|attributes``)."""
    parts = pc.split_pattern(series, SERIES_SEPARATOR, max_splits=1)
    key = pc.list_element(parts, 1)
    return key.combine_chunks() if isinstance(key, pa.ChunkedArray) else key


def _judge_cohorts(
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
    key = _series_keys(points.column("series").take(taken))
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
    return np.abs(value - mean) / _spread(mean, var), ready


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
    share = table.group_by(["cohort", "key"]).aggregate(
        [("away", "mean"), ("x", "approximate_median")]
    )
    joined = pc.binary_join_element_wise(table.column("cohort"), table.column("key"), "\x1f")
    grouped = pc.binary_join_element_wise(share.column("cohort"), share.column("key"), "\x1f")
    group = pc.index_in(joined, grouped)
    moved = share.column("away_mean").take(group)
    # Far from the median of its cohort's points here (a blip, a newcomer): not learnt,
    # even while the cohort cannot judge yet.
    median, _ = floats(share.column("x_approximate_median").take(group))
    distance = pa.table({"k": joined, "d": pa.array(np.abs(value - median))})
    mad = distance.group_by("k").aggregate([("d", "approximate_median")])
    spread = (
        MAD_SCALE
        * floats(mad.column("d_approximate_median").take(pc.index_in(joined, mad.column("k"))))[0]
    )
    far = np.abs(value - median) > COHORT_SCREEN * _spread(median, spread * spread)
    learn = pc.and_(
        pc.or_(pc.equal(table.column("away"), 0.0), pc.greater(moved, 0.5)), pa.array(~far)
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
