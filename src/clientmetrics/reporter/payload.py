"""Push payloads: OTLP encoding, the TelemetryMaxBytes bound and the codec choice.

Pure functions (no I/O, no clock): the driver and the simulator pass points and
times in. A payload that would exceed TelemetryMaxBytes loses whole metrics from
the end of the list (callers put the KIP's standard metrics first), never gets
sent oversized.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clientmetrics.telemetry.client_state import choose_compression_type
from clientmetrics.telemetry.compression import CompressionError, compress
from clientmetrics.telemetry.otlp import build_metrics_data, gauge, sum_metric

__all__ = [
    "SUPPORTED_COMPRESSION_TYPES",
    "EncodedPush",
    "MetricPoint",
    "encode_push",
]

#: Every codec ``telemetry.compression`` can write: gzip, snappy, lz4, zstd.
SUPPORTED_COMPRESSION_TYPES = frozenset({1, 2, 3, 4})
SCOPE_NAME = "clientmetrics.reporter"


@dataclass(frozen=True, slots=True)
class MetricPoint:
    """One telemetry data point, named and typed by the KIP's rules."""

    name: str
    value: float
    time_unix_nano: int
    #: A monotonic Sum (with ``start_time_unix_nano``); otherwise a Gauge.
    is_sum: bool = False
    start_time_unix_nano: int = 0
    delta: bool = True
    attributes: Mapping[str, str | int] = field(default_factory=dict)

    def to_otlp(self) -> Any:
        """The OTLP ``Metric`` message for this point."""
        if self.is_sum:
            return sum_metric(
                self.name,
                self.value,
                time_unix_nano=self.time_unix_nano,
                start_time_unix_nano=self.start_time_unix_nano,
                attributes=self.attributes,
                delta=self.delta,
            )
        return gauge(
            self.name, self.value, time_unix_nano=self.time_unix_nano, attributes=self.attributes
        )


@dataclass(frozen=True, slots=True)
class EncodedPush:
    """What goes in a PushTelemetry request."""

    compression_type: int
    metrics: bytes
    #: Names sent, and names dropped to stay under TelemetryMaxBytes.
    sent: int
    dropped: int


def _encode(metrics: Sequence[Any], resource: Mapping[str, str | int], scope_version: str) -> bytes:
    if not metrics:
        return b""
    data = build_metrics_data(
        metrics, resource_attributes=resource, scope_name=SCOPE_NAME, scope_version=scope_version
    )
    return bytes(data.SerializeToString())


def _compressed(
    raw: bytes, accepted: tuple[int, ...], supported: frozenset[int]
) -> tuple[int, bytes]:
    codec = choose_compression_type(accepted, supported, len(raw))
    if codec == 0:
        return 0, raw
    try:
        return codec, compress(codec, raw)
    except CompressionError:
        return 0, raw  # Java falls back to NONE and still sends (checklist 51)


def encode_push(
    points: Sequence[MetricPoint],
    *,
    resource: Mapping[str, str | int],
    accepted_compression_types: tuple[int, ...],
    max_bytes: int,
    supported: frozenset[int] = SUPPORTED_COMPRESSION_TYPES,
    scope_version: str = "",
) -> EncodedPush:
    """Encode, compress and, if needed, trim ``points`` to fit ``max_bytes``.

    The empty payload always fits; that is the push a client whose subscription
    matches none of its metrics sends.
    """
    metrics = [p.to_otlp() for p in points]

    def attempt(count: int) -> tuple[int, bytes]:
        raw = _encode(metrics[:count], resource, scope_version)
        return _compressed(raw, accepted_compression_types, supported)

    codec, data = attempt(len(metrics))
    if len(data) <= max_bytes:
        return EncodedPush(codec, data, len(metrics), 0)
    # Largest prefix that fits: size grows with the count, so bisect.
    low, high = 0, len(metrics) - 1
    best = (0, b"")
    while low <= high:
        middle = (low + high) // 2
        candidate = attempt(middle)
        if len(candidate[1]) <= max_bytes:
            best, low = candidate, middle + 1
        else:
            high = middle - 1
    kept = high
    return EncodedPush(best[0], best[1], kept, len(metrics) - kept)
