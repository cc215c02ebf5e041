"""clientmetrics.telemetry: the KIP-714 domain, sans I/O (time and randomness are parameters)."""

from clientmetrics.telemetry.client_state import ClientState, ClientTelemetry, StateError
from clientmetrics.telemetry.compression import (
    CompressionError,
    TelemetryTooLarge,
    compress,
    compress_snappy_xerial,
    decompress,
)
from clientmetrics.telemetry.configs import (
    ConfigEntry,
    ConfigError,
    apply_incremental,
    describe,
    validate,
)
from clientmetrics.telemetry.instances import ClientInstance, InstanceRegistry
from clientmetrics.telemetry.manager import (
    ClientMetricsManager,
    PendingPush,
    PushResult,
    SubscriptionsResult,
    TelemetryConfig,
    decode_push,
)
from clientmetrics.telemetry.matching import CompiledSubscription, PatternCache
from clientmetrics.telemetry.model import (
    ONE_UUID,
    RESERVED_UUIDS,
    SELECTORS,
    UNKNOWN,
    AcceptedPush,
    ClientContext,
    Subscription,
    kafka_uuid_text,
)
from clientmetrics.telemetry.naming import telemetry_attributes, telemetry_name
from clientmetrics.telemetry.otlp import (
    InvalidPayload,
    build_metrics_data,
    gauge,
    histogram,
    metric_names,
    parse_metrics_data,
    sum_metric,
)
from clientmetrics.telemetry.stats import TelemetryStats
from clientmetrics.telemetry.subscription_id import (
    SubscriptionPlan,
    resolve_plan,
    subscription_id,
    uuid_hash_code,
)
from clientmetrics.wire.api import AlterOp
from clientmetrics.wire.codec import ZERO_UUID

__all__ = [
    "ONE_UUID",
    "RESERVED_UUIDS",
    "SELECTORS",
    "UNKNOWN",
    "ZERO_UUID",
    "AcceptedPush",
    "AlterOp",
    "ClientContext",
    "ClientInstance",
    "ClientMetricsManager",
    "ClientState",
    "ClientTelemetry",
    "CompiledSubscription",
    "CompressionError",
    "ConfigEntry",
    "ConfigError",
    "InstanceRegistry",
    "InvalidPayload",
    "PatternCache",
    "PendingPush",
    "PushResult",
    "StateError",
    "Subscription",
    "SubscriptionPlan",
    "SubscriptionsResult",
    "TelemetryConfig",
    "TelemetryStats",
    "TelemetryTooLarge",
    "apply_incremental",
    "build_metrics_data",
    "compress",
    "compress_snappy_xerial",
    "decode_push",
    "decompress",
    "describe",
    "gauge",
    "histogram",
    "kafka_uuid_text",
    "metric_names",
    "parse_metrics_data",
    "resolve_plan",
    "subscription_id",
    "sum_metric",
    "telemetry_attributes",
    "telemetry_name",
    "uuid_hash_code",
    "validate",
]
