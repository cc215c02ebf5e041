"""The fast decode-and-normalise path agrees with the reference transforms, row for row."""

from __future__ import annotations

import random

import pyarrow as pa
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2 as m
from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual

from clientmetrics.pipeline.arrow_series import series_keys, with_running_values
from clientmetrics.pipeline.points import (
    POINT_COLUMNS,
    explode_points,
    normalised_points,
    with_normalised_values,
    with_series_key,
)
from clientmetrics.pipeline.schemas import LANDING, SERIES_STATE
from tests.synthetic import (
    Push,
    landing_table,
    points_per_producer_payload,
    producer_payload,
)
from tests.pipeline.frames import at, naive

S = 1_000_000_000
T0_NS = int(at(0).timestamp()) * S


def _kv(key: str, value: int | str) -> common_pb2.KeyValue:
    if isinstance(value, int):
        return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(int_value=value))
    return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value))


def _mixed_payload(step: int, swap: bool) -> bytes:
    """Delta and cumulative sums (with resets), a delta histogram, a gauge; attributes reordered."""
    now = T0_NS + step * 10 * S
    attrs = [_kv("node.id", 1), _kv("topic", "t")]
    attrs = attrs[::-1] if swap else attrs
    delta = m.Sum(
        aggregation_temporality=m.AGGREGATION_TEMPORALITY_DELTA,
        is_monotonic=True,
        data_points=[
            m.NumberDataPoint(
                start_time_unix_nano=now - 10 * S,
                time_unix_nano=now,
                as_int=step,
                attributes=attrs,
            ),
            # No start time: the rate falls back to the previous point.
            m.NumberDataPoint(time_unix_nano=now, as_double=0.5 * step),
        ],
    )
    restart = step // 4  # a new start time every fourth step: a reset
    cumulative = m.Sum(
        aggregation_temporality=m.AGGREGATION_TEMPORALITY_CUMULATIVE,
        is_monotonic=True,
        data_points=[
            m.NumberDataPoint(
                start_time_unix_nano=T0_NS + restart * 40 * S - S,
                time_unix_nano=now,
                as_double=float((step % 4) * 3 + 1),
            )
        ],
    )
    histogram = m.Histogram(
        aggregation_temporality=m.AGGREGATION_TEMPORALITY_DELTA,
        data_points=[
            m.HistogramDataPoint(
                start_time_unix_nano=now - 10 * S,
                time_unix_nano=now,
                count=2,
                sum=float(step),
                bucket_counts=[1, 1],
                explicit_bounds=[1.0],
            )
        ],
    )
    gauge = m.Gauge(data_points=[m.NumberDataPoint(time_unix_nano=now, as_double=float(step))])
    metrics = [
        m.Metric(name="d", sum=delta),
        m.Metric(name="c", sum=cumulative),
        m.Metric(name="h", histogram=histogram),
        m.Metric(name="g", gauge=gauge),
    ]
    data = m.MetricsData(
        resource_metrics=[m.ResourceMetrics(scope_metrics=[m.ScopeMetrics(metrics=metrics)])]
    )
    return data.SerializeToString()


def mixed_pushes(spark: SparkSession) -> DataFrame:
    """Landed pushes of three kinds of client, in arrival order, in three partitions."""
    rng = random.Random(7)
    pushes = []
    for client in range(5):
        for step in range(9):
            payload = _mixed_payload(step, swap=rng.random() < 0.5) if client < 3 else b""
            if client == 4:
                payload = producer_payload(T0_NS + step * 5 * S, step)
            at_us = (T0_NS + step * 10 * S) // 1000 + client
            pushes.append(Push(at_us, f"i-{client}", payload))
    rng.shuffle(pushes)  # landing order is arrival order, not series order
    return spark.createDataFrame(landing_table(pushes).to_pandas(), LANDING).repartition(3)


def test_fast_path_matches_the_reference_transforms(
    spark: SparkSession, small_arrow_batches: None
) -> None:
    pushes = mixed_pushes(spark)
    state = spark.createDataFrame(
        [
            ("i-0|d|node.id=1,topic=t", naive(at(-10)), naive(at(-20)), 50.0),
            ("i-1|c|", naive(at(-10)), naive(at(-100)), 400.0),
            ("i-2|h|", naive(at(-10)), naive(at(-20)), 7.0),
            ("gone|x|", naive(at(-10)), naive(at(-20)), 1.0),
        ],
        SERIES_STATE,
    )
    reference = with_normalised_values(with_series_key(explode_points(pushes)), state)
    fast = normalised_points(pushes, state)
    assert fast.columns == list(POINT_COLUMNS)
    assert fast.count() == 3 * 9 * 5 + 9 * points_per_producer_payload(3)
    assertDataFrameEqual(fast, reference.select(*POINT_COLUMNS))
    # The carried delta total continues, and the attribute order did not split the series.
    carried = fast.where("series = 'i-0|d|node.id=1,topic=t'").orderBy("event_time")
    assert [r.cumulative_value for r in carried.collect()] == [
        50.0 + sum(range(step + 1)) for step in range(9)
    ]


def test_series_keys_match_spark_spelling() -> None:
    attributes = pa.array(
        [[("b", "2"), ("a", "1")], [("a", None)], [], None],
        pa.map_(pa.string(), pa.string()),
    )
    keys = series_keys(pa.array(["i-1"] * 4), pa.array(["m"] * 4), attributes)
    assert keys.to_pylist() == ["i-1|m|a=1,b=2", "i-1|m|a=", "i-1|m|", "i-1|m|"]


def test_running_values_per_series_in_event_time_order() -> None:
    ts = pa.timestamp("us", tz="UTC")
    points = pa.table(
        {
            "client_instance_id": ["i", "i", "i", "i", "i"],
            "metric_name": ["d", "d", "g", "d", "e"],
            "attributes": pa.array([[], [], [], [], []], pa.map_(pa.string(), pa.string())),
            "kind": ["sum", "sum", "gauge", "sum", "sum"],
            "temporality": ["delta", "delta", None, "delta", "cumulative"],
            "value": [2.0, None, 9.0, 1.0, 5.0],
            "event_time": pa.array([30, 10, 10, 20, 10], pa.int64()).cast(ts),
            "received_at": pa.array([1, 1, 1, 1, 1], pa.int64()).cast(ts),
        }
    )
    result = with_running_values(points).to_pydict()
    columns = ("series", "value", "_run", "_prev_run", "_has_prev", "_prev_delta")
    rows = list(zip(*(result[name] for name in columns), strict=True))
    # Each series' rows together (series in any order), in event-time order.
    runs = [
        series
        for i, series in enumerate(result["series"])
        if series != result["series"][i - 1] or i == 0
    ]
    assert sorted(runs) == ["i|d|", "i|e|", "i|g|"]
    assert sorted(rows, key=lambda row: row[0]) == [
        ("i|d|", None, None, None, False, None),
        ("i|d|", 1.0, 1.0, None, True, True),
        ("i|d|", 2.0, 3.0, 1.0, True, True),
        ("i|e|", 5.0, 5.0, None, False, None),
        ("i|g|", 9.0, None, None, None, None),
    ]
