"""Broker-side telemetry counters (Kafka's ``client-metrics`` group).

Kafka keeps throttle, plugin-export and plugin-error sensors *per client
instance* (tagged ``client_instance_id``): about eight broker metrics per
client, a cardinality problem at scale. We keep gateway-wide counters only;
per-client detail belongs in the pushed data, not in the gateway's metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from clientmetrics.wire.errors import ErrorCode


def _empty() -> Mapping[ErrorCode, int]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class TelemetryStats:
    """A point-in-time copy of the manager's counters (all monotonic except the gauge)."""

    #: Gauge: instances currently tracked (Kafka ``instance-count``).
    instance_count: int = 0
    #: Pushes answered UNKNOWN_SUBSCRIPTION_ID (``unknown-subscription-request-count``).
    unknown_subscription_requests: int = 0
    #: Gets and pushes answered THROTTLING_QUOTA_EXCEEDED (``throttle-count``).
    throttles: int = 0
    #: Pushes answered NONE, empty ones included.
    accepted_pushes: int = 0
    #: Accepted pushes whose Metrics field was empty.
    empty_pushes: int = 0
    #: Exporter runs that succeeded (``plugin-export-count``) and their time.
    exports: int = 0
    export_time_ms_sum: float = 0.0
    export_time_ms_max: float = 0.0
    #: Exporter runs that failed (``plugin-error-count``).
    export_errors: int = 0
    #: Instances created, expired, dropped by LRU eviction, removed on disconnect.
    instances_created: int = 0
    instances_expired: int = 0
    instances_evicted: int = 0
    instances_disconnected: int = 0
    #: Every Get and push answered, by error code.
    gets_by_error: Mapping[ErrorCode, int] = field(default_factory=_empty)
    pushes_by_error: Mapping[ErrorCode, int] = field(default_factory=_empty)


class StatsRecorder:
    """The live, mutable counters behind ``TelemetryStats`` (owned by the manager)."""

    __slots__ = (
        "accepted_pushes",
        "empty_pushes",
        "export_errors",
        "export_time_ms_max",
        "export_time_ms_sum",
        "exports",
        "gets_by_error",
        "instances_created",
        "instances_disconnected",
        "instances_evicted",
        "instances_expired",
        "pushes_by_error",
        "throttles",
        "unknown_subscription_requests",
    )

    def __init__(self) -> None:
        self.unknown_subscription_requests = 0
        self.throttles = 0
        self.accepted_pushes = 0
        self.empty_pushes = 0
        self.exports = 0
        self.export_time_ms_sum = 0.0
        self.export_time_ms_max = 0.0
        self.export_errors = 0
        self.instances_created = 0
        self.instances_expired = 0
        self.instances_evicted = 0
        self.instances_disconnected = 0
        self.gets_by_error: dict[ErrorCode, int] = {}
        self.pushes_by_error: dict[ErrorCode, int] = {}

    def get_answered(self, code: ErrorCode) -> None:
        """Count one GetTelemetrySubscriptions response."""
        self.gets_by_error[code] = self.gets_by_error.get(code, 0) + 1
        if code is ErrorCode.THROTTLING_QUOTA_EXCEEDED:
            self.throttles += 1

    def push_answered(self, code: ErrorCode, empty: bool) -> None:
        """Count one PushTelemetry response."""
        self.pushes_by_error[code] = self.pushes_by_error.get(code, 0) + 1
        if code is ErrorCode.THROTTLING_QUOTA_EXCEEDED:
            self.throttles += 1
        elif code is ErrorCode.UNKNOWN_SUBSCRIPTION_ID:
            self.unknown_subscription_requests += 1
        elif code is ErrorCode.NONE:
            self.accepted_pushes += 1
            self.empty_pushes += empty

    def export_finished(self, elapsed_ms: float, ok: bool) -> None:
        """Count one exporter run (success time feeds sum and max, as Kafka's sensors)."""
        if not ok:
            self.export_errors += 1
            return
        self.exports += 1
        self.export_time_ms_sum += elapsed_ms
        self.export_time_ms_max = max(self.export_time_ms_max, elapsed_ms)

    def snapshot(self, instance_count: int) -> TelemetryStats:
        """An immutable copy of every counter."""
        return TelemetryStats(
            instance_count=instance_count,
            unknown_subscription_requests=self.unknown_subscription_requests,
            throttles=self.throttles,
            accepted_pushes=self.accepted_pushes,
            empty_pushes=self.empty_pushes,
            exports=self.exports,
            export_time_ms_sum=self.export_time_ms_sum,
            export_time_ms_max=self.export_time_ms_max,
            export_errors=self.export_errors,
            instances_created=self.instances_created,
            instances_expired=self.instances_expired,
            instances_evicted=self.instances_evicted,
            instances_disconnected=self.instances_disconnected,
            gets_by_error=MappingProxyType(dict(self.gets_by_error)),
            pushes_by_error=MappingProxyType(dict(self.pushes_by_error)),
        )
