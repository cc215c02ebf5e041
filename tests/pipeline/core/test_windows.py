"""Windows in event time, merged across batches, closed by the watermark: by hand."""

from __future__ import annotations

import math

import pyarrow as pa

from clientmetrics.pipeline.core.rates import normalise
from clientmetrics.pipeline.core.schemas import SERIES_STATE_ARROW, WINDOW_STATE_ARROW
from clientmetrics.pipeline.core.series import running_values
from clientmetrics.pipeline.core.windows import merge_windows, split_windows, window_partials
from tests.pipeline.core.tables import T0, at, at_us, by_column, decoded, table


def _partials(rows: list[dict[str, object]], late_before: int | None = None) -> pa.Table:
    running, order = running_values(decoded(rows))
    points = normalise(running, SERIES_STATE_ARROW.empty_table())
    return window_partials(points, order, 60, late_before)


def test_windows_merge_across_batches_and_close_at_the_watermark() -> None:
    node = {"node.id": "1"}
    gauge = {"metric_name": "m", "kind": "gauge"}
    rows = [
        {**gauge, "event_time": at(50), "value": 4.0, "attributes": node},
        {**gauge, "event_time": at(70), "value": 1.0, "attributes": node},
        {**gauge, "event_time": at(75), "value": None},
    ]
    carried = table(
        WINDOW_STATE_ARROW,
        [
            {
                "series": "i-1|m|node.id=1",
                "client_instance_id": "i-1",
                "metric_name": "m",
                "attributes": node,
                "window_start": T0,
                "window_end": at(60),
                "count": 2,
                "sum": 10.0,
                "min": 2.0,
                "max": 8.0,
                "last": 8.0,
                "last_time": at(40),
            }
        ],
    )
    merged = merge_windows(carried, _partials(rows))
    closed, still_open = split_windows(merged, at_us(65))
    columns = ("window_start", "window_end", "count", "min", "max", "avg", "last")
    assert by_column(closed, *columns) == [(T0, at(60), 3, 2.0, 8.0, 14.0 / 3, 4.0)]
    assert by_column(still_open, "window_start", "count", "last") == [(at(60), 1, 1.0)]
    nothing, everything = split_windows(merged, None)
    assert (nothing.num_rows, everything.num_rows) == (0, 2)


def test_late_points_are_left_out_of_windows() -> None:
    rows = [
        {"metric_name": "m", "kind": "gauge", "event_time": at(t), "value": v}
        for t, v in ((10, 1.0), (100, 2.0))
    ]
    assert by_column(_partials(rows, late_before=at_us(60)), "count", "sum") == [(1, 2.0)]


def test_nan_is_the_largest_value_and_poisons_no_minimum() -> None:
    rows = [
        {"metric_name": "m", "kind": "gauge", "event_time": at(t), "value": v}
        for t, v in ((1, 3.0), (2, float("nan")), (3, 1.0))
    ]
    ((low, high),) = by_column(_partials(rows), "min", "max")
    assert low == 1.0
    assert math.isnan(high)
