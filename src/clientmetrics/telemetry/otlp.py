"""OTLP ``MetricsData`` decode and build helpers (pure functions).

Decoding checks that a push payload is a ``MetricsData`` message; building is
for tests, the reporter and the load simulator. Both use the upb protobuf
backend through ``opentelemetry-proto``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2
from opentelemetry.proto.resource.v1 import resource_pb2

from clientmetrics.errors import ClientMetricsError

#: The generated message class (typed ``Any``: the protobuf stubs are not typed).
MetricsData: Any = metrics_pb2.MetricsData
Metric: Any = metrics_pb2.Metric

AttributeValue = str | bool | int | float
Attributes = Mapping[str, AttributeValue]

DELTA = metrics_pb2.AGGREGATION_TEMPORALITY_DELTA
CUMULATIVE = metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE


class InvalidPayload(ClientMetricsError):
    """A push payload that is not an OTLP ``MetricsData`` protobuf."""


def parse_metrics_data(payload: bytes) -> Any:
    """Decode ``payload`` as ``MetricsData``; raise ``InvalidPayload`` if it is not one."""
    message = metrics_pb2.MetricsData()
    try:
        message.ParseFromString(payload)
    except DecodeError as exc:
        raise InvalidPayload(f"not an OTLP MetricsData message: {exc}") from exc
    return message


def metric_names(payload: bytes) -> list[str]:
    """Every metric name in ``payload``, in order of appearance (duplicates kept)."""
    data = parse_metrics_data(payload)
    return [
        metric.name
        for resource_metrics in data.resource_metrics
        for scope_metrics in resource_metrics.scope_metrics
        for metric in scope_metrics.metrics
    ]


def _any_value(value: AttributeValue) -> Any:
    # bool before int: bool is an int subclass.
    if isinstance(value, bool):
        return common_pb2.AnyValue(bool_value=value)
    if isinstance(value, int):
        return common_pb2.AnyValue(int_value=value)
    if isinstance(value, float):
        return common_pb2.AnyValue(double_value=value)
    return common_pb2.AnyValue(string_value=value)


def key_values(attributes: Attributes) -> list[Any]:
    """OTLP ``KeyValue`` list for a mapping, in the mapping's order."""
    return [common_pb2.KeyValue(key=k, value=_any_value(v)) for k, v in attributes.items()]


def _number_point(
    value: float, time_unix_nano: int, start_time_unix_nano: int, attributes: Attributes
) -> Any:
    point = metrics_pb2.NumberDataPoint(
        time_unix_nano=time_unix_nano,
        start_time_unix_nano=start_time_unix_nano,
        attributes=key_values(attributes),
    )
    # Integers stay integers on the wire, as librdkafka sends them.
    if isinstance(value, int) and not isinstance(value, bool):
        point.as_int = value
    else:
        point.as_double = float(value)
    return point


def gauge(
    name: str,
    value: float,
    *,
    time_unix_nano: int,
    attributes: Attributes | None = None,
    unit: str = "",
) -> Any:
    """A ``Metric`` with one gauge point."""
    point = _number_point(value, time_unix_nano, 0, attributes or {})
    return metrics_pb2.Metric(name=name, unit=unit, gauge=metrics_pb2.Gauge(data_points=[point]))


def sum_metric(
    name: str,
    value: float,
    *,
    time_unix_nano: int,
    start_time_unix_nano: int,
    attributes: Attributes | None = None,
    monotonic: bool = True,
    delta: bool = True,
    unit: str = "",
) -> Any:
    """A ``Metric`` with one sum point (delta and monotonic by default, as KIP-714 asks)."""
    point = _number_point(value, time_unix_nano, start_time_unix_nano, attributes or {})
    data = metrics_pb2.Sum(
        data_points=[point],
        is_monotonic=monotonic,
        aggregation_temporality=DELTA if delta else CUMULATIVE,
    )
    return metrics_pb2.Metric(name=name, unit=unit, sum=data)


def histogram(
    name: str,
    bucket_counts: Sequence[int],
    explicit_bounds: Sequence[float],
    total: float,
    *,
    time_unix_nano: int,
    start_time_unix_nano: int,
    attributes: Attributes | None = None,
    delta: bool = True,
    unit: str = "",
) -> Any:
    """A ``Metric`` with one explicit-bucket histogram point."""
    if len(bucket_counts) != len(explicit_bounds) + 1:
        raise ValueError("a histogram needs one more bucket than bounds")
    point = metrics_pb2.HistogramDataPoint(
        time_unix_nano=time_unix_nano,
        start_time_unix_nano=start_time_unix_nano,
        attributes=key_values(attributes or {}),
        count=sum(bucket_counts),
        sum=total,
        bucket_counts=list(bucket_counts),
        explicit_bounds=list(explicit_bounds),
    )
    data = metrics_pb2.Histogram(
        data_points=[point], aggregation_temporality=DELTA if delta else CUMULATIVE
    )
    return metrics_pb2.Metric(name=name, unit=unit, histogram=data)


def build_metrics_data(
    metrics: Iterable[Any],
    *,
    resource_attributes: Attributes | None = None,
    scope_name: str = "",
    scope_version: str = "",
    resource_per_metric: bool = False,
) -> Any:
    """A ``MetricsData`` holding ``metrics`` under one resource.

    With ``resource_per_metric`` each metric gets its own ``ResourceMetrics``
    carrying the same resource, which is the shape the Java client sends.
    """
    resource = resource_pb2.Resource(attributes=key_values(resource_attributes or {}))
    scope = common_pb2.InstrumentationScope(name=scope_name, version=scope_version)

    def wrap(group: list[Any]) -> Any:
        scoped = metrics_pb2.ScopeMetrics(scope=scope, metrics=group)
        return metrics_pb2.ResourceMetrics(resource=resource, scope_metrics=[scoped])

    items = list(metrics)
    groups = [[m] for m in items] if resource_per_metric else [items]
    return metrics_pb2.MetricsData(resource_metrics=[wrap(g) for g in groups if g])


def labelled_resource_metrics(payload: bytes, labels: Sequence[tuple[str, AttributeValue]]) -> Any:
    """The payload's ``ResourceMetrics``, the broker's labels merged into each resource.

    A label replaces a client attribute of the same name (the broker's value is the
    authoritative one); the other attributes are kept.
    """
    data = parse_metrics_data(payload)
    names = {name for name, _ in labels}
    added = [common_pb2.KeyValue(key=k, value=_any_value(v)) for k, v in labels]
    for resource_metrics in data.resource_metrics:
        attributes = resource_metrics.resource.attributes
        kept = [kv for kv in attributes if kv.key not in names]
        if len(kept) != len(attributes):
            del attributes[:]
            attributes.extend(kept)
        attributes.extend(added)
    return data.resource_metrics


#: The topic the topic exporter and the broker plugin write ``export_request`` records
#: to, and the pipeline's Kafka source reads, unless told otherwise.
TELEMETRY_TOPIC = "otlp_metrics"


def export_request(
    payloads: Iterable[tuple[bytes, Sequence[tuple[str, AttributeValue]]]],
) -> bytes:
    """One serialized OTLP ``ExportMetricsServiceRequest`` for ``(payload, labels)`` pairs."""
    request = metrics_service_pb2.ExportMetricsServiceRequest()
    for payload, labels in payloads:
        request.resource_metrics.extend(labelled_resource_metrics(payload, labels))
    serialized: bytes = request.SerializeToString()
    return serialized
