"""The columnar OTLP decoder, on golden librdkafka pushes and hand-built payloads of every kind."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2 as m
from opentelemetry.proto.resource.v1 import resource_pb2

from clientmetrics.telemetry.otlp_arrow import POINT_SCHEMA, attributes_to_map, decode_points
from tests.golden import LIBRDKAFKA as FIXTURES

T0 = 1_795_300_000_000_000_000  # ns


def _kv(key: str, value: object) -> common_pb2.KeyValue:
    any_value = common_pb2.AnyValue()
    if isinstance(value, bool):
        any_value.bool_value = value
    elif isinstance(value, int):
        any_value.int_value = value
    elif isinstance(value, float):
        any_value.double_value = value
    elif isinstance(value, bytes):
        any_value.bytes_value = value
    else:
        any_value.string_value = str(value)
    return common_pb2.KeyValue(key=key, value=any_value)


def _payload(*metrics: m.Metric, resource: dict[str, object] | None = None) -> bytes:
    attributes = [_kv(k, v) for k, v in (resource or {}).items()]
    data = m.MetricsData(
        resource_metrics=[
            m.ResourceMetrics(
                resource=resource_pb2.Resource(attributes=attributes),
                scope_metrics=[
                    m.ScopeMetrics(
                        scope=common_pb2.InstrumentationScope(name="lib", version="1.0"),
                        metrics=list(metrics),
                    )
                ],
            )
        ]
    )
    return data.SerializeToString()


def _decode(*payloads: bytes) -> list[dict[str, Any]]:
    decoded = decode_points(pa.array(list(payloads), pa.binary()))
    assert decoded.points.schema == POINT_SCHEMA
    return decoded.points.to_pylist()


def _ts(nanos: int) -> datetime:
    return datetime.fromtimestamp(nanos // 1000 / 1e6, UTC)


def test_golden_consumer_push_has_every_point_with_broker_copies_distinct() -> None:
    rows = _decode((FIXTURES / "consumer-push.otlp.bin").read_bytes())
    text = (FIXTURES / "consumer-push.txt").read_text()
    assert len(rows) == text.count("data_points {")
    latency = [r for r in rows if r["metric_name"].endswith("node.request.latency.avg")]
    assert sorted(dict(r["attributes"])["node.id"] for r in latency) == ["-1", "111"]
    assert {r["row"] for r in rows} == {0}
    assert dict(rows[0]["resource_attributes"])["group_id"] == "gp1"
    assert rows[0]["scope_version"] == "2.16.0"
    total = next(r for r in rows if r["metric_name"].endswith("rebalance.latency.total"))
    assert (total["kind"], total["temporality"], total["monotonic"], total["value"]) == (
        "sum",
        "cumulative",
        True,
        6019.0,
    )


def test_golden_producer_and_consumer_in_one_batch_keep_their_rows() -> None:
    consumer = (FIXTURES / "consumer-push.otlp.bin").read_bytes()
    producer = (FIXTURES / "producer-push.otlp.bin").read_bytes()
    rows = _decode(producer, b"", consumer)
    rows_by_payload = {r["row"] for r in rows}
    assert rows_by_payload == {0, 2}
    assert all("producer" in r["metric_name"] for r in rows if r["row"] == 0)
    assert all("consumer" in r["metric_name"] for r in rows if r["row"] == 2)


def test_gauge_and_sums_of_both_temporalities() -> None:
    gauge = m.Metric(
        name="g",
        unit="ms",
        gauge=m.Gauge(
            data_points=[
                m.NumberDataPoint(
                    time_unix_nano=T0, as_int=7, attributes=[_kv("node.id", 3), _kv("ok", True)]
                )
            ]
        ),
    )
    delta = m.Metric(
        name="d",
        sum=m.Sum(
            aggregation_temporality=m.AGGREGATION_TEMPORALITY_DELTA,
            is_monotonic=True,
            data_points=[
                m.NumberDataPoint(start_time_unix_nano=T0 - 10**9, time_unix_nano=T0, as_double=1.5)
            ],
        ),
    )
    cumulative = m.Metric(
        name="c",
        sum=m.Sum(
            aggregation_temporality=m.AGGREGATION_TEMPORALITY_CUMULATIVE,
            data_points=[m.NumberDataPoint(time_unix_nano=T0, as_int=-4)],
        ),
    )
    rows = _decode(_payload(gauge, delta, cumulative, resource={"client_rack": "r1"}))
    assert [(r["metric_name"], r["kind"], r["temporality"], r["monotonic"]) for r in rows] == [
        ("g", "gauge", None, None),
        ("d", "sum", "delta", True),
        ("c", "sum", "cumulative", False),
    ]
    assert [r["value"] for r in rows] == [7.0, 1.5, -4.0]
    assert rows[0]["attributes"] == [("node.id", "3"), ("ok", "true")]
    assert rows[0]["metric_unit"] == "ms"
    assert rows[1]["start_time"] == _ts(T0 - 10**9)
    assert rows[1]["event_time"] == _ts(T0)
    assert rows[2]["resource_attributes"] == [("client_rack", "r1")]


def test_histogram_keeps_buckets() -> None:
    point = m.HistogramDataPoint(
        time_unix_nano=T0,
        count=6,
        sum=42.0,
        min=1.0,
        max=20.0,
        bucket_counts=[1, 2, 3],
        explicit_bounds=[5.0, 10.0],
    )
    metric = m.Metric(
        name="h",
        histogram=m.Histogram(
            data_points=[point], aggregation_temporality=m.AGGREGATION_TEMPORALITY_DELTA
        ),
    )
    (row,) = _decode(_payload(metric))
    assert (row["kind"], row["temporality"], row["value"], row["count"]) == (
        "histogram",
        "delta",
        42.0,
        6,
    )
    assert (row["min"], row["max"]) == (1.0, 20.0)
    assert row["bucket_counts"] == [1, 2, 3]
    assert row["explicit_bounds"] == [5.0, 10.0]


def test_exponential_histogram_keeps_scale_offsets_and_buckets() -> None:
    point = m.ExponentialHistogramDataPoint(
        time_unix_nano=T0,
        count=9,
        sum=12.5,
        scale=3,
        zero_count=2,
        positive=m.ExponentialHistogramDataPoint.Buckets(offset=-2, bucket_counts=[4, 1]),
        negative=m.ExponentialHistogramDataPoint.Buckets(offset=1, bucket_counts=[2]),
    )
    metric = m.Metric(
        name="e",
        exponential_histogram=m.ExponentialHistogram(
            data_points=[point], aggregation_temporality=m.AGGREGATION_TEMPORALITY_CUMULATIVE
        ),
    )
    (row,) = _decode(_payload(metric))
    assert (row["kind"], row["temporality"], row["value"], row["count"]) == (
        "exponential_histogram",
        "cumulative",
        12.5,
        9,
    )
    assert (row["scale"], row["zero_count"]) == (3, 2)
    assert (row["positive_offset"], row["positive_bucket_counts"]) == (-2, [4, 1])
    assert (row["negative_offset"], row["negative_bucket_counts"]) == (1, [2])
    assert row["bucket_counts"] is None


def test_summary_keeps_quantiles() -> None:
    quantiles = [
        m.SummaryDataPoint.ValueAtQuantile(quantile=0.5, value=3.0),
        m.SummaryDataPoint.ValueAtQuantile(quantile=0.99, value=9.0),
    ]
    point = m.SummaryDataPoint(time_unix_nano=T0, count=4, sum=16.0, quantile_values=quantiles)
    (row,) = _decode(_payload(m.Metric(name="s", summary=m.Summary(data_points=[point]))))
    assert (row["kind"], row["temporality"], row["value"], row["count"]) == (
        "summary",
        None,
        16.0,
        4,
    )
    assert row["quantiles"] == [{"quantile": 0.5, "value": 3.0}, {"quantile": 0.99, "value": 9.0}]


def test_empty_and_malformed_payloads_yield_no_points_without_losing_the_rest() -> None:
    good = _payload(m.Metric(name="g", gauge=m.Gauge(data_points=[m.NumberDataPoint(as_int=1)])))
    decoded = decode_points(pa.array([b"", b"\xff\xff\xff", None, good], pa.binary()))
    assert decoded.malformed == (1,)
    assert decoded.points.column("row").to_pylist() == [3]


def test_an_empty_batch_gives_an_empty_table_of_the_schema() -> None:
    decoded = decode_points(pa.array([], pa.binary()))
    assert decoded.points.num_rows == 0
    assert decoded.points.schema == POINT_SCHEMA


def test_unrenderable_attribute_values_become_null() -> None:
    pairs = pa.array(
        [
            [
                {"key": "b", "value": {"bytes_value": b"x"}},
                {"key": "d", "value": {"double_value": 0.5}},
            ],
            None,
        ],
        pa.list_(
            pa.struct(
                [
                    ("key", pa.string()),
                    (
                        "value",
                        pa.struct(
                            [
                                ("string_value", pa.string()),
                                ("bool_value", pa.bool_()),
                                ("int_value", pa.int64()),
                                ("double_value", pa.float64()),
                                ("bytes_value", pa.binary()),
                            ]
                        ),
                    ),
                ]
            )
        ),
    )
    assert attributes_to_map(pairs).to_pylist() == [[("b", None), ("d", "0.5")], []]


_names = st.text(alphabet="abcdefghij.", min_size=1, max_size=12)
_attributes = st.dictionaries(_names, st.one_of(st.integers(-(2**40), 2**40), _names), max_size=3)
_points = st.lists(
    st.tuples(st.integers(0, 2**62), st.floats(allow_nan=False, allow_infinity=False), _attributes),
    min_size=0,
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(_names, _points), max_size=4), max_size=5))
def test_round_trip_of_generated_gauges(payloads: list[list[tuple[str, Any]]]) -> None:
    encoded = []
    expected = []
    for row, metrics in enumerate(payloads):
        built = []
        for name, points in metrics:
            data_points = []
            for nanos, value, attributes in points:
                kvs = [_kv(k, v) for k, v in attributes.items()]
                data_points.append(
                    m.NumberDataPoint(time_unix_nano=nanos, as_double=value, attributes=kvs)
                )
                rendered = sorted((k, str(v)) for k, v in attributes.items())
                expected.append((row, name, _ts(nanos), value, rendered))
            built.append(m.Metric(name=name, gauge=m.Gauge(data_points=data_points)))
        encoded.append(_payload(*built))
    rows = _decode(*encoded)
    got = [
        (r["row"], r["metric_name"], r["event_time"], r["value"], sorted(r["attributes"]))
        for r in rows
    ]
    assert got == expected


def test_franz_go_and_java_node_id_decode_as_librdkafkas_node_dot_id() -> None:
    """One broker label downstream, whichever client spelled it."""

    def latency(key: str) -> m.Metric:
        point = m.NumberDataPoint(time_unix_nano=T0, as_int=5, attributes=[_kv(key, 2)])
        return m.Metric(name="lat", gauge=m.Gauge(data_points=[point]))

    rows = _decode(_payload(latency("node.id")), _payload(latency("node_id")))
    assert [r["attributes"] for r in rows] == [[("node.id", "2")], [("node.id", "2")]]
    # Other keys are left alone, resource attributes too.
    rows = _decode(_payload(latency("node_idx"), resource={"node_id": "r"}))
    assert rows[0]["attributes"] == [("node_idx", "2")]
    assert rows[0]["resource_attributes"] == [("node_id", "r")]


def test_java_node_strings_are_the_broker_ids_librdkafka_and_franz_go_send() -> None:
    """The Java client's ``node_id="node-1"`` (connection ids) is the integer id's text."""

    def latency(key: str, value: object) -> m.Metric:
        point = m.NumberDataPoint(time_unix_nano=T0, as_int=5, attributes=[_kv(key, value)])
        return m.Metric(name="lat", gauge=m.Gauge(data_points=[point]))

    forms = [
        ("node_id", "node-1"),  # Java, broker 1
        ("node.id", 1),  # librdkafka
        ("node_id", 1),  # franz-go
        ("node_id", "node--1"),  # Java, the bootstrap connection
        ("node.id", -1),  # librdkafka, the coordinator
        ("node_id", "node-+1"),  # Java 4.4, its group coordinator connection to broker 1
    ]
    rows = _decode(*(_payload(latency(k, v)) for k, v in forms))
    assert [r["attributes"] for r in rows] == [
        [("node.id", v)] for v in ("1", "1", "1", "-1", "-1", "+1")
    ]
    # Only that label's values, and only a whole "node-<integer>", are rewritten.
    rows = _decode(
        _payload(latency("node_id", "node-x")),
        _payload(latency("node_id", "node-1-2")),
        _payload(latency("peer", "node-1")),
    )
    assert [r["attributes"] for r in rows] == [
        [("node.id", "node-x")],
        [("node.id", "node-1-2")],
        [("peer", "node-1")],
    ]
