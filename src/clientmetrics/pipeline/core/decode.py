"""Landed pushes to data points: one row per OTLP data point, with its push's labels.

What a client put in its payload is checked here (``core.rejects``): a payload
that is not OTLP, one with too many points, points whose time is far from
their push's receipt or whose counts do not fit the tables are skipped and
become dead letters; a push with points and none usable makes no client.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.core import rejects
from clientmetrics.pipeline.core.schemas import DECODED_ARROW, LABEL_COLUMNS, REJECTED_ARROW
from clientmetrics.telemetry.model import PUSH_LABELS
from clientmetrics.telemetry.otlp_arrow import DecodedPoints, decode_points


@dataclass(frozen=True, slots=True)
class DecodedPushes:
    """The usable points of some pushes, the pushes that stay, and the dead letters."""

    #: ``DECODED_ARROW`` rows.
    points: pa.Table
    #: The input's rows less the pushes rejected whole.
    pushes: pa.Table
    #: ``REJECTED_ARROW`` rows.
    rejected: pa.Table


def decode_pushes(pushes: pa.Table | pa.RecordBatch) -> pa.Table:
    """One row per data point (``DECODED_ARROW``), each with its push's labels.

    Empty pushes and payloads that are not valid OTLP contribute no rows; a
    count the tables cannot hold is null. The broker's labels are columns, so
    a resource attribute of a label's name (the topic's records carry them
    there too) is not kept in ``resource_attributes``: a push makes the same
    rows from either source. Nothing else is checked: that is
    ``decode_screened``, what the pass runs (a view of the pushes, such as the
    dashboard's, shows what clients sent).
    """
    decoded = decode_points(pushes.column("payload"), drop_resource_keys=PUSH_LABELS).points
    labels = [pushes.column(name).take(decoded.column("row")) for name in LABEL_COLUMNS]
    return pa.Table.from_arrays(labels + list(decoded.columns[1:]), schema=DECODED_ARROW)


def decode_screened(pushes: pa.Table) -> DecodedPushes:
    """The usable points of pushes, the pushes that stay, and the dead letters of the rest."""
    decoded = decode_points(pushes.column("payload"), drop_resource_keys=PUSH_LABELS)
    points = decoded.points
    rows = points.column("row").to_numpy(zero_copy_only=False).astype(np.int64)
    size = pushes.num_rows
    per_push = np.bincount(rows, minlength=size)
    malformed = np.zeros(size, dtype=bool)
    malformed[list(decoded.malformed)] = True
    too_many = per_push > rejects.MAX_POINTS_PER_PUSH
    whole = malformed | too_many
    time_bad, count_bad = _point_problems(pushes, decoded, rows)
    point_bad = (time_bad | count_bad) & ~whole[rows]
    usable = np.bincount(rows[~point_bad & ~whole[rows]], minlength=size)
    # A push whose every point is unusable is garbage: no client from it.
    dropped = whole | ((per_push > 0) & (usable == 0))
    keep_point = ~dropped[rows] & ~point_bad
    rejected = [
        rejects.dead_letters(
            pushes.filter(pa.array(malformed)),
            rejects.PAYLOAD_NOT_OTLP,
            "payload",
            pushes.column("payload").filter(pa.array(malformed)),
        ),
        rejects.dead_letters(
            pushes.filter(pa.array(too_many)),
            rejects.TOO_MANY_POINTS,
            "payload",
            pa.array(per_push[too_many], pa.int64()),  # the excerpt: how many points
        ),
        _point_letters(pushes, points, rows, time_bad & point_bad, rejects.POINT_TIME_OUT_OF_RANGE),
        _point_letters(
            pushes,
            points,
            rows,
            count_bad & ~time_bad & point_bad,
            rejects.POINT_COUNT_OUT_OF_RANGE,
        ),
    ]
    chosen = pa.array(keep_point)
    kept = points.filter(chosen)
    kept_rows = pa.array(rows[keep_point], pa.int64())
    labels = [pushes.column(name).take(kept_rows) for name in LABEL_COLUMNS]
    # A start after the point's own time is unknown, not a reason to skip the point.
    columns = [
        _start_times(kept) if f.name == "start_time" else kept.column(f.name)
        for f in DECODED_ARROW
        if f.name not in LABEL_COLUMNS
    ]
    return DecodedPushes(
        points=pa.Table.from_arrays(labels + columns, schema=DECODED_ARROW),
        pushes=pushes.filter(pa.array(~dropped)),
        rejected=pa.concat_tables([REJECTED_ARROW.empty_table(), *rejected]),
    )


def _point_problems(
    pushes: pa.Table, decoded: DecodedPoints, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per point: whether its time is unusable, and whether a count of it is."""
    events = pc.cast(decoded.points.column("event_time"), pa.int64())
    received = pc.cast(pushes.column("received_at"), pa.int64()).take(pa.array(rows))
    latest = pc.add(received, rejects.POINT_AHEAD_US)
    inside = pc.and_(
        pc.greater_equal(events, rejects.EARLIEST_RECEIVED_US), pc.less_equal(events, latest)
    )
    time_bad = ~np.asarray(pc.fill_null(inside, False).to_numpy(zero_copy_only=False), dtype=bool)
    problems = decoded.problems
    if problems is None:
        return time_bad, np.zeros(len(rows), dtype=bool)
    count_bad = np.asarray(pc.is_valid(problems).to_numpy(zero_copy_only=False), dtype=bool)
    return time_bad, count_bad


def _point_letters(
    pushes: pa.Table, points: pa.RecordBatch, rows: np.ndarray, bad: np.ndarray, reason: str
) -> pa.Table:
    """One dead letter per push with ``bad`` points: how many, and the first one's metric."""
    where = np.flatnonzero(bad)
    if not len(where):
        return REJECTED_ARROW.empty_table()
    pushed, first, count = np.unique(rows[where], return_index=True, return_counts=True)
    chosen = pa.array(where[first], pa.int64())
    names = pc.fill_null(points.column("metric_name").take(chosen), "")
    if reason == rejects.POINT_TIME_OUT_OF_RANGE:
        field = "time_unix_nano"
        moment = pc.cast(points.column("event_time").take(chosen), pa.string())
        value = pc.binary_join_element_wise(names, pc.fill_null(moment, ""), " at ")
    else:
        field = "count"
        value = names
    return rejects.dead_letters(
        pushes.take(pa.array(pushed, pa.int64())), reason, field, value, pa.array(count, pa.int64())
    )


def _start_times(points: pa.Table) -> pa.Array | pa.ChunkedArray:
    start = points.column("start_time")
    after = pc.greater(pc.cast(start, pa.int64()), pc.cast(points.column("event_time"), pa.int64()))
    return pc.if_else(pc.fill_null(after, False), pa.nulls(len(start), start.type), start)
