"""Out of profile: a client's own recent history, and its cohort's, as the threshold.

KIP-714's proactive monitoring "triggers alarms when trends go out of profile".
No threshold is written for these: each point of a metric an out-of-profile
rule names (``on = "profile"`` or ``on = "cohort"``) gets a **score**, how far
it lies from a baseline in spreads::

    score = |x - mean| / max(sd, REL_FLOOR * |mean|, ABS_FLOOR)

and the rule's condition judges the score like any other column ("above 4 for
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
from clientmetrics.pipeline.core.arrays import filled, flags, floats, runs
from clientmetrics.pipeline.core.cohorts import judge_cohorts
from clientmetrics.pipeline.core.profiles import learn
from clientmetrics.pipeline.core.rules import AlertRule
from clientmetrics.pipeline.core.schemas import BASELINE_STATE_ARROW, COHORT_PARTIALS_ARROW
from clientmetrics.pipeline.core.series import ACCUMULATING, SeriesOrder

__all__ = ["Scored", "forgive", "score_points"]


@dataclass(slots=True)
class Scored:
    """What scoring a batch's points makes."""

    #: The points with ``profile_score`` and ``cohort_score`` (null: not judged).
    points: pa.Table
    #: The series' profiles after the batch (``BASELINE_STATE_ARROW``).
    state: pa.Table
    #: The batch's sums per cohort and series key (``COHORT_PARTIALS_ARROW``).
    partials: pa.Table


def _limits(metric: pa.ChunkedArray, rules: list[AlertRule]) -> np.ndarray:
    """Per point, the lowest threshold of the rules naming its metric (inf: none)."""
    limit = np.full(len(metric), np.inf)
    for rule in rules:
        limit[rule_matches(metric, rule)] = np.fmin(
            limit[rule_matches(metric, rule)], rule.threshold
        )
    return limit


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
        state = learn(series, codes, x[rows], own_limit[rows], points, rows, state, profile)
        partials = judge_cohorts(points, rows, x, peer_limit, cohorts, inventory, cohort)
        state = _forgiving(series, codes, rows, state, (profile, own_limit), (cohort, peer_limit))
    scored = points.append_column("profile_score", pa.array(profile, mask=np.isnan(profile)))
    scored = scored.append_column("cohort_score", pa.array(cohort, mask=np.isnan(cohort)))
    return Scored(scored, state.cast(BASELINE_STATE_ARROW), partials)


def forgive(
    scores: np.ndarray, limit: np.ndarray, rows: np.ndarray, codes: np.ndarray, was_out: np.ndarray
) -> np.ndarray:
    """One point back in profile does not end a departure: it is not judged (null).

    A real departure still has points that fall back within the limit by
    chance (a latency ×8 with a healthy spread of a third of its level: about
    one point in fifty), and each would end the episode and restart the time
    its condition must hold. So a point in profile right after a point out of
    it is left unjudged, neither ending nor continuing the episode; a second
    one in a row ends it. ``rows`` are the scored points grouped by series
    (``codes``) in time order; ``was_out`` says, per series, whether its
    latest judged point before the batch was out. Returns the same after it.
    """
    score = scores[rows]
    judged = np.flatnonzero(np.isfinite(score))
    out = score[judged] > limit[rows[judged]]
    first, last = runs(codes)
    group = np.repeat(np.arange(len(first)), last - first + 1)[judged]
    starts = np.ones(len(judged), dtype=bool)
    starts[1:] = group[1:] != group[:-1]
    before = np.empty(len(judged), dtype=bool)
    before[1:] = out[:-1]
    before[starts] = was_out[group[starts]]
    scores[rows[judged[~out & before]]] = np.nan
    latest = was_out.copy()
    ends = np.append(starts[1:], True)[: len(judged)]
    latest[group[ends]] = out[ends]
    return latest


def _forgiving(
    series: pa.Array | pa.ChunkedArray,
    codes: np.ndarray,
    rows: np.ndarray,
    state: pa.Table,
    *kinds: tuple[np.ndarray, np.ndarray],
) -> pa.Table:
    """``forgive`` each kind's scores, its per-series flag carried in ``state`` (which
    ``learn`` left holding every scored series, with the flags the batch found)."""
    first, _ = runs(codes)
    heads = series.take(pa.array(first, pa.int64())) if len(first) else pa.array([], pa.string())
    found = pc.index_in(heads, state.column("series"))
    where = filled(pc.index_in(state.column("series"), heads), -1).astype(np.int64)
    mine = where >= 0
    for name, (scores, limit) in zip(("profile_out", "cohort_out"), kinds, strict=True):
        latest = forgive(scores, limit, rows, codes, flags(state.column(name).take(found)))
        new = flags(state.column(name))
        new[mine] = latest[where[mine]]
        state = state.set_column(
            state.schema.get_field_index(name), name, pa.array(new, pa.bool_())
        )
    return state
