"""A client's own profile: per series, what its recent points were (``core/baselines``).

A profile starts as the median and median absolute deviation of the series'
first ``WARMUP`` points (a blip among them does not skew it); then each point
in profile moves an exponentially weighted mean and variance by ``ALPHA``, its
pull bounded to ``CLIP`` spreads. A point out of profile does not move it (a
departure must not become its own reference), until ``RELEARN`` consecutive
points were out: then their level is the client's new profile. The state is
one ``BASELINE_STATE_ARROW`` row per series a profile or cohort rule names.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.core.arrays import filled, floats, micros, runs, timestamps
from clientmetrics.pipeline.core.schemas import BASELINE_STATE_ARROW

__all__ = ["ABS_FLOOR", "MAD_SCALE", "RELEARN", "REL_FLOOR", "WARMUP", "learn", "spread"]

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


def spread(mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    floor = np.maximum(REL_FLOOR * np.abs(mean), ABS_FLOOR)
    spread: np.ndarray = np.maximum(np.sqrt(np.maximum(var, 0.0)), floor)
    return spread


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


def learn(
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
        width = spread(m, v)
        score = np.abs(value - m) / width
        judge = warm & np.isfinite(limit[at])
        profile[rows[at[judge]]] = score[judge]
        away = judge & (score > limit[at])
        relearn = away & (o + 1 >= RELEARN)
        pull = np.clip(value - m, -CLIP * width, CLIP * width)
        mean[alive] = np.where(away, np.where(relearn, value, m), m + ALPHA * pull)
        var[alive] = np.where(away, v, (1 - ALPHA) * (v + ALPHA * pull * pull))
        out[alive] = np.where(away & ~relearn, o + 1, 0)
        # Still learning: keep the point; the WARMUP-th makes the profile.
        learning = alive[~warm]
        early[learning, count[learning]] = value[~warm]
        count[learning] += 1
        done = learning[count[learning] == WARMUP]
        mean[done], var[done] = _robust(early[done])
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
            # ``baselines.forgive`` sets these after both kinds judged the batch.
            "profile_out": state.column("profile_out").take(found),
            "cohort_out": state.column("cohort_out").take(found),
        }
    )
    kept = state.filter(pc.invert(pc.is_in(state.column("series"), latest.column("series"))))
    return pa.concat_tables([kept.cast(BASELINE_STATE_ARROW), latest.cast(BASELINE_STATE_ARROW)])
