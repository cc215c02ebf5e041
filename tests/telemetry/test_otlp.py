"""OTLP MetricsData decode and build helpers."""

from __future__ import annotations

import re

import pytest
from google.protobuf import text_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.metrics.v1 import metrics_pb2

from clientmetrics.telemetry import (
    InvalidPayload,
    build_metrics_data,
    gauge,
    histogram,
    metric_names,
    parse_metrics_data,
    sum_metric,
)

from .conftest import FIXTURES


@pytest.mark.parametrize("which", ["producer", "consumer"])
def test_golden_pushes_parse_to_their_text_dump(which: str) -> None:
    """The binary golden pushes decode to exactly the message their .txt dump describes."""
    expected = text_format.Parse(
        (FIXTURES / f"{which}-push.txt").read_text(), metrics_pb2.MetricsData()
    )
    assert parse_metrics_data((FIXTURES / f"{which}-push.otlp.bin").read_bytes()) == expected


@pytest.mark.parametrize(("which", "count"), [("producer", 10), ("consumer", 13)])
def test_golden_metric_names(which: str, count: int) -> None:
    """librdkafka 2.16 sends 10 producer and 13 consumer metrics, named as in the dump."""
    names = metric_names((FIXTURES / f"{which}-push.otlp.bin").read_bytes())
    dump = (FIXTURES / f"{which}-push.txt").read_text()
    assert names == re.findall(r'name: "(org\.apache\.kafka\.[^"]+)"', dump)
    assert len(set(names)) == count


@pytest.mark.parametrize("garbage", [b"\xff", b"\x0a\x05\x01", b"\x0a\xff\xff\xff\xff\x0f"])
def test_garbage_is_invalid_payload(garbage: bytes) -> None:
    """Bytes that are not a MetricsData protobuf raise InvalidPayload."""
    with pytest.raises(InvalidPayload):
        parse_metrics_data(garbage)


def test_empty_payload_is_an_empty_message() -> None:
    """Zero bytes are a valid, empty MetricsData."""
    assert metric_names(b"") == []


def test_build_helpers_round_trip() -> None:
    """Gauges, sums and histograms with attributes survive encode and decode."""
    data = build_metrics_data(
        [
            gauge("g", 1.5, time_unix_nano=10, attributes={"node.id": 3}),
            sum_metric("s", 7, time_unix_nano=20, start_time_unix_nano=10),
            histogram(
                "h", [1, 2, 3], [10.0, 20.0], 42.0, time_unix_nano=20, start_time_unix_nano=10
            ),
        ],
        resource_attributes={"client_rack": "rack-a", "ok": True},
        scope_name="probe",
    )
    decoded = parse_metrics_data(data.SerializeToString())
    assert metric_names(data.SerializeToString()) == ["g", "s", "h"]
    resource = decoded.resource_metrics[0].resource
    assert {a.key for a in resource.attributes} == {"client_rack", "ok"}
    metrics = decoded.resource_metrics[0].scope_metrics[0].metrics
    assert metrics[0].gauge.data_points[0].as_double == 1.5
    assert metrics[0].gauge.data_points[0].attributes[0].value.int_value == 3
    assert metrics[1].sum.data_points[0].as_int == 7
    assert metrics[1].sum.aggregation_temporality == metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
    assert metrics[1].sum.is_monotonic
    assert list(metrics[2].histogram.data_points[0].bucket_counts) == [1, 2, 3]
    assert metrics[2].histogram.data_points[0].count == 6


def test_resource_per_metric_shape() -> None:
    """The Java client's shape: one ResourceMetrics per metric, same resource."""
    data = build_metrics_data(
        [gauge("a", 1, time_unix_nano=1), gauge("b", 2, time_unix_nano=1)],
        resource_attributes={"group_id": "g"},
        resource_per_metric=True,
    )
    assert len(data.resource_metrics) == 2
    assert data.resource_metrics[0].resource == data.resource_metrics[1].resource


def test_histogram_shape_is_checked() -> None:
    """Buckets must be one more than bounds."""
    with pytest.raises(ValueError, match="one more bucket"):
        histogram("h", [1, 2], [1.0, 2.0], 0.0, time_unix_nano=1, start_time_unix_nano=0)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(min_size=1, max_size=30),
            st.one_of(st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False)),
        ),
        max_size=8,
    )
)
def test_encode_decode_round_trip(points: list[tuple[str, float]]) -> None:
    """Any gauges built by the helpers decode to the same names and values."""
    data = build_metrics_data([gauge(n, v, time_unix_nano=1) for n, v in points])
    decoded = parse_metrics_data(data.SerializeToString())
    assert decoded == data
    assert metric_names(data.SerializeToString()) == [n for n, _ in points]


def test_export_request_merges_the_labels_into_every_resource() -> None:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
    )

    from clientmetrics.telemetry.otlp import build_metrics_data, export_request, gauge

    java_shape = build_metrics_data(
        [gauge("a", 1, time_unix_nano=1), gauge("b", 2, time_unix_nano=1)],
        resource_attributes={"client_id": "spoofed", "client_rack": "r"},
        resource_per_metric=True,
    ).SerializeToString()
    body = export_request([(java_shape, [("client_id", "real"), ("node_id", 4)]), (b"", [])])
    request = ExportMetricsServiceRequest.FromString(body)
    assert len(request.resource_metrics) == 2
    for rm in request.resource_metrics:
        attrs = [(kv.key, kv.value) for kv in rm.resource.attributes]
        assert [k for k, _ in attrs] == ["client_rack", "client_id", "node_id"]
        assert attrs[1][1].string_value == "real"
        assert attrs[2][1].int_value == 4
