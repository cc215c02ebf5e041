"""Per-client windows (count, min, max, avg, last) in event time, closed by a watermark.

Batches arrive as files land, so a window can span several of them. Partial
aggregates of windows the watermark has not passed yet are carried between
batches as state; a window is written once, when the watermark (the highest
event time seen minus the allowed lateness) passes its end. Points older than
the previous watermark are late: they stay in the points table but no longer
change a window.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.core.arrays import (
    filled,
    floats,
    group_order,
    micros,
    runs,
    take_rows,
    timestamps,
)
from clientmetrics.pipeline.core.schemas import (
    CLIENT_WINDOWS_ARROW,
    TIMESTAMP,
    WINDOW_STATE_ARROW,
)
from clientmetrics.pipeline.core.series import SeriesOrder


def window_partials(
    points: pa.Table, order: SeriesOrder, window_seconds: int, late_before_us: int | None
) -> pa.Table:
    """Per series and tumbling event-time window: count, sum, min, max, last (with a value).

    Points before ``late_before_us`` are late: they stay in the points table
    but no longer change a window. ``order`` groups the points by series in
    event-time order (``series.running_values``): windows are then runs, and
    need no sort.
    """
    value, value_ok = floats(points.column("value"))
    event, event_ok = micros(points.column("event_time"))
    rows = order.rows
    usable = value_ok[rows] & event_ok[rows]
    if late_before_us is not None:
        usable &= event[rows] >= late_before_us
    chosen, codes = rows[usable], order.codes[usable]
    if not len(chosen):
        return WINDOW_STATE_ARROW.empty_table()
    width = window_seconds * 1_000_000
    window_start = event[chosen] // width * width
    first, last = runs(codes, window_start)
    values = value[chosen]
    heads = take_rows(
        points.select(["series", "client_instance_id", "metric_name", "attributes"]),
        chosen[first],
    )
    # np.fmin skips NaN, np.maximum keeps it: NaN is larger than every number.
    columns = {
        **{name: heads.column(name) for name in heads.column_names},
        "window_start": pa.array(window_start[first]).cast(TIMESTAMP),
        "window_end": pa.array(window_start[first] + width).cast(TIMESTAMP),
        "count": pa.array(last - first + 1, pa.int64()),
        "sum": pa.array(np.add.reduceat(values, first)),
        "min": pa.array(np.fmin.reduceat(values, first)),
        "max": pa.array(np.maximum.reduceat(values, first)),
        "last": pa.array(values[last]),
        "last_time": timestamps(event[chosen[last]]),
    }
    return pa.table([columns[name] for name in WINDOW_STATE_ARROW.names], schema=WINDOW_STATE_ARROW)


def merge_windows(state: pa.Table, partials: pa.Table) -> pa.Table:
    """Carried partial windows combined with this batch's partials for the same window."""
    if state.num_rows == 0:
        return partials
    both = pa.concat_tables([state.cast(WINDOW_STATE_ARROW), partials])
    order = group_order(
        both.column("series"),
        ("w", pc.cast(both.column("window_start"), pa.int64())),
        ("t", pc.cast(both.column("last_time"), pa.int64())),
    )
    both = both.take(order)
    first, last = runs(both.column("series"), both.column("window_start"))
    counts = filled(both.column("count"), 0).astype(np.int64)
    sums = filled(both.column("sum"), 0.0).astype(np.float64)
    low = filled(both.column("min"), np.nan).astype(np.float64)
    high = filled(both.column("max"), np.nan).astype(np.float64)
    heads = take_rows(both, first)
    columns = {name: heads.column(name) for name in WINDOW_STATE_ARROW.names[:6]}
    columns["count"] = pa.array(np.add.reduceat(counts, first), pa.int64())
    columns["sum"] = pa.array(np.add.reduceat(sums, first))
    columns["min"] = pa.array(np.fmin.reduceat(low, first))
    columns["max"] = pa.array(np.maximum.reduceat(high, first))
    columns["last"] = both.column("last").take(pa.array(last))
    columns["last_time"] = both.column("last_time").take(pa.array(last))
    return pa.table([columns[name] for name in WINDOW_STATE_ARROW.names], schema=WINDOW_STATE_ARROW)


def split_windows(windows: pa.Table, watermark_us: int | None) -> tuple[pa.Table, pa.Table]:
    """The windows the watermark has closed, as client_windows rows, and those still open.

    ``windows`` has the ``WINDOW_STATE_ARROW`` columns; no watermark closes nothing.
    """
    table = windows.cast(WINDOW_STATE_ARROW)
    end = pc.cast(table.column("window_end"), pa.int64())
    if watermark_us is None:
        return CLIENT_WINDOWS_ARROW.empty_table(), table
    done = table.filter(pc.fill_null(pc.less_equal(end, watermark_us), False))
    still_open = table.filter(pc.fill_null(pc.greater(end, watermark_us), False))
    average = pc.divide(pc.cast(done.column("sum"), pa.float64()), done.column("count"))
    columns = {name: done.column(name) for name in CLIENT_WINDOWS_ARROW.names if name != "avg"}
    columns["avg"] = average
    closed = pa.table(
        [columns[name] for name in CLIENT_WINDOWS_ARROW.names], schema=CLIENT_WINDOWS_ARROW
    )
    return closed, still_open
