"""Decoding landed pushes in Spark, series keys, and temporality normalisation."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from clientmetrics.pipeline.points import (
    explode_points,
    next_series_state,
    with_normalised_values,
    with_series_key,
)
from clientmetrics.pipeline.schemas import LANDING, SERIES_STATE
from tests.pipeline.frames import T0, at, naive, points_frame

FIXTURES = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "librdkafka-2.16"


def _landing_row(instance: str, payload: bytes | None) -> tuple[object, ...]:
    values = {
        "received_at": T0,
        "client_instance_id": instance,
        "subscription_id": 7,
        "terminating": False,
        "client_id": "c",
        "client_software_name": "librdkafka",
        "client_software_version": "2.16.0",
        "client_source_address": "10.0.0.1",
        "client_source_port": 5555,
        "principal": "User:ANONYMOUS",
        "node_id": 0,
        "compression_type": 4,
        "push_interval_ms": 1000,
        "payload": payload,
    }
    return tuple(values[name] for name in LANDING.names)


def test_explode_points_decodes_every_point_and_copies_the_push_labels(
    spark: SparkSession,
) -> None:
    consumer = (FIXTURES / "consumer-push.otlp.bin").read_bytes()
    rows = [
        _landing_row("a", consumer),
        _landing_row("b", b""),
        _landing_row("c", None),
        _landing_row("d", b"\xff\xff\xff"),
    ]
    pushes = spark.createDataFrame(rows, LANDING)
    exploded = with_series_key(explode_points(pushes))
    expected_points = (FIXTURES / "consumer-push.txt").read_text().count("data_points {")
    assert exploded.count() == expected_points
    assert {r.client_instance_id for r in exploded.select("client_instance_id").collect()} == {"a"}
    latency = exploded.where("metric_name LIKE '%node.request.latency.avg'")
    assertDataFrameEqual(
        latency.select("series", "client_source_port", "subscription_id"),
        [
            ("a|org.apache.kafka.consumer.node.request.latency.avg|node.id=-1", 5555, 7),
            ("a|org.apache.kafka.consumer.node.request.latency.avg|node.id=111", 5555, 7),
        ],
    )


def test_series_key_sorts_attributes_and_keeps_empty_ones(spark: SparkSession) -> None:
    frame = points_frame(
        spark,
        [
            {"metric_name": "m", "attributes": {"b": "2", "a": "1"}},
            {"metric_name": "m", "attributes": {"a": None}},
            {"metric_name": "m", "attributes": {}},
        ],
    ).drop("series")
    assertDataFrameEqual(
        with_series_key(frame).select("series"),
        [("i-1|m|a=1,b=2",), ("i-1|m|a=",), ("i-1|m|",)],
    )


def test_delta_and_cumulative_sums_normalise_to_the_same_cumulative_and_rate(
    spark: SparkSession,
) -> None:
    common = {"kind": "sum", "monotonic": True}
    rows = [
        # delta: +2 every 10 s, continuing a carried cumulative of 100
        {
            **common,
            "metric_name": "d",
            "temporality": "delta",
            "start_time": at(0),
            "event_time": at(10),
            "value": 2.0,
        },
        {
            **common,
            "metric_name": "d",
            "temporality": "delta",
            "start_time": at(10),
            "event_time": at(20),
            "value": 2.0,
        },
        # cumulative: 102 then 104, the same series seen the other way
        {
            **common,
            "metric_name": "c",
            "temporality": "cumulative",
            "start_time": at(-100),
            "event_time": at(10),
            "value": 102.0,
        },
        {
            **common,
            "metric_name": "c",
            "temporality": "cumulative",
            "start_time": at(-100),
            "event_time": at(20),
            "value": 104.0,
        },
        # a reset: a new start time, counting from zero again
        {
            **common,
            "metric_name": "c",
            "temporality": "cumulative",
            "start_time": at(25),
            "event_time": at(30),
            "value": 5.0,
        },
        {"metric_name": "g", "kind": "gauge", "event_time": at(10), "value": 7.0},
        {"metric_name": "g", "kind": "gauge", "event_time": at(11), "value": None},
    ]
    state = spark.createDataFrame(
        [
            ("i-1|d", naive(at(0)), naive(at(-10)), 100.0),
            ("i-1|c", naive(at(0)), naive(at(-100)), 100.0),
        ],
        SERIES_STATE,
    )
    result = with_normalised_values(points_frame(spark, rows), state)
    assertDataFrameEqual(
        result.select("metric_name", "event_time", "cumulative_value", "rate_per_second"),
        [
            ("d", naive(at(10)), 102.0, 0.2),
            ("d", naive(at(20)), 104.0, 0.2),
            ("c", naive(at(10)), 102.0, 0.2),
            ("c", naive(at(20)), 104.0, 0.2),
            ("c", naive(at(30)), 5.0, 1.0),
            ("g", naive(at(10)), None, None),
            ("g", naive(at(11)), None, None),
        ],
    )
    assertDataFrameEqual(
        next_series_state(result, state),
        [
            ("i-1|d", naive(at(20)), naive(at(10)), 104.0),
            ("i-1|c", naive(at(30)), naive(at(25)), 5.0),
        ],
    )


def test_series_state_keeps_series_absent_from_the_batch(spark: SparkSession) -> None:
    state = spark.createDataFrame([("old", naive(at(0)), naive(at(0)), 1.0)], SERIES_STATE)
    empty = with_normalised_values(points_frame(spark, []), state)
    assertDataFrameEqual(next_series_state(empty, state), state)
