"""Per-client windows closed by the watermark, and the client inventory."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from clientmetrics.pipeline.clients import (
    aggregate_client_pushes,
    merge_inventory,
    with_client_status,
)
from clientmetrics.pipeline.job import INVENTORY_STATE
from clientmetrics.pipeline.schemas import LANDING, WINDOW_STATE
from clientmetrics.pipeline.windows import (
    aggregate_window_partials,
    filter_on_time,
    merge_window_partials,
    select_closed_windows,
    select_open_windows,
)
from tests.pipeline.frames import T0, at, naive, points_frame


def test_windows_merge_across_batches_and_close_at_the_watermark(spark: SparkSession) -> None:
    rows = [
        {"metric_name": "m", "event_time": at(50), "value": 4.0, "attributes": {"node.id": "1"}},
        {"metric_name": "m", "event_time": at(70), "value": 1.0, "attributes": {"node.id": "1"}},
        {"metric_name": "m", "event_time": at(75), "value": None},
    ]
    points = points_frame(spark, rows)
    carried = spark.createDataFrame(
        [
            (
                "i-1|m",
                "i-1",
                "m",
                {"node.id": "1"},
                naive(T0),
                naive(at(60)),
                2,
                10.0,
                2.0,
                8.0,
                8.0,
                naive(at(40)),
            )
        ],
        WINDOW_STATE,
    )
    merged = merge_window_partials(carried, aggregate_window_partials(points, 60))
    watermark = at(65)
    assertDataFrameEqual(
        select_closed_windows(merged, watermark).drop("attributes"),
        [("i-1", "m", naive(T0), naive(at(60)), 3, 2.0, 8.0, 14.0 / 3, 4.0, T0.date())],
    )
    assertDataFrameEqual(
        select_open_windows(merged, watermark).select("window_start", "count", "last"),
        [(naive(at(60)), 1, 1.0)],
    )
    assert select_closed_windows(merged, None).count() == 0


def test_late_points_are_dropped_before_windowing(spark: SparkSession) -> None:
    points = points_frame(
        spark,
        [
            {"metric_name": "m", "event_time": at(10), "value": 1.0},
            {"metric_name": "m", "event_time": at(100), "value": 2.0},
        ],
    )
    assertDataFrameEqual(filter_on_time(points, at(60)).select("value"), [(2.0,)])


def _push(
    instance: str, seconds: float, payload: bytes, terminating: bool = False, port: int = 1
) -> tuple[object, ...]:
    values = {
        "received_at": at(seconds),
        "client_instance_id": instance,
        "subscription_id": 1,
        "terminating": terminating,
        "client_id": "cid",
        "client_software_name": "librdkafka",
        "client_software_version": "2.16.0",
        "client_source_address": "10.0.0.9",
        "client_source_port": port,
        "principal": "User:ANONYMOUS",
        "node_id": 0,
        "compression_type": 0,
        "push_interval_ms": 10_000,
        "payload": payload,
    }
    return tuple(values[name] for name in LANDING.names)


def test_inventory_merges_batches_and_marks_silent_and_terminated(spark: SparkSession) -> None:
    first = spark.createDataFrame([_push("a", 0, b"x", port=1), _push("b", 0, b"x")], LANDING)
    first_points = points_frame(
        spark,
        [
            {
                "client_instance_id": "a",
                "metric_name": "m",
                "received_at": at(0),
                "resource_attributes": {"group_id": "g1", "member_id": "m-1"},
            }
        ],
    )
    second = spark.createDataFrame(
        [_push("a", 20, b"", port=2), _push("b", 5, b"x", terminating=True)], LANDING
    )
    empty_points = points_frame(spark, [])
    inventory = spark.createDataFrame([], INVENTORY_STATE)
    inventory = merge_inventory(inventory, aggregate_client_pushes(first, first_points))
    inventory = merge_inventory(inventory, aggregate_client_pushes(second, empty_points))
    table = with_client_status(inventory, at(60))
    assertDataFrameEqual(
        table.select(
            "client_instance_id",
            "client_source_port",
            "group_id",
            "member_id",
            "first_seen",
            "last_seen",
            "last_push",
            "pushes",
            "terminated",
            "silent",
        ),
        [
            ("a", 2, "g1", "m-1", naive(T0), naive(at(20)), naive(T0), 2, False, True),
            ("b", 1, None, None, naive(T0), naive(at(5)), naive(at(5)), 2, True, False),
        ],
    )
    # 25 s after its last push, "a" (interval 10 s) is within 3 intervals: not silent yet.
    assert with_client_status(inventory, at(45)).where("silent").count() == 0
