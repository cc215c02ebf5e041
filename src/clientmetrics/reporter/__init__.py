"""clientmetrics.reporter: KIP-714 telemetry for Python Kafka clients, and the load simulator."""

from clientmetrics.reporter.collect import ALIASES, STANDARD_METRICS, Collector, RawMetric
from clientmetrics.reporter.driver import (
    Reporter,
    ReporterStats,
    enable_telemetry,
    new_client_instance_id,
)
from clientmetrics.reporter.kafka_python import KafkaPythonClient, TransportError
from clientmetrics.reporter.payload import (
    SUPPORTED_COMPRESSION_TYPES,
    EncodedPush,
    MetricPoint,
    encode_push,
)
from clientmetrics.reporter.protocol import (
    get_request,
    get_response_event,
    push_request,
    push_response_event,
    telemetry_version,
)

__all__ = [
    "ALIASES",
    "STANDARD_METRICS",
    "SUPPORTED_COMPRESSION_TYPES",
    "Collector",
    "EncodedPush",
    "KafkaPythonClient",
    "MetricPoint",
    "RawMetric",
    "Reporter",
    "ReporterStats",
    "TransportError",
    "enable_telemetry",
    "encode_push",
    "get_request",
    "get_response_event",
    "new_client_instance_id",
    "push_request",
    "push_response_event",
    "telemetry_version",
]
