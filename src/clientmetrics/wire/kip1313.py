"""KIP-1313 message versions that kio 0.6.5 does not ship.

GetTelemetrySubscriptions v1 and PushTelemetry v1 move the client instance id
from the body into request header v3. They are written in the exact style of
kio's generated entities (frozen, slotted, ``kafka_type`` metadata, class-level
``__version__``/``__flexible__``/``__api_key__``), so kio's native
``entity_reader`` and ``entity_writer`` handle them like any other entity.
"""

# No "from __future__ import annotations": kio introspects real field types.

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.request_header.v2.header import RequestHeader as KioRequestHeaderV2
from kio.schema.response_header.v1.header import ResponseHeader as KioResponseHeaderV1
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i32Timedelta

__all__ = [
    "GetTelemetrySubscriptionsRequestV1",
    "GetTelemetrySubscriptionsResponseV1",
    "PushTelemetryRequestV1",
    "PushTelemetryResponseV1",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class GetTelemetrySubscriptionsRequestV1:
    """GetTelemetrySubscriptions v1 request: no body fields (the id is in header v3)."""

    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(71)
    # kio has no header v3 entity; our headers module encodes v3 by hand.
    __header_schema__: ClassVar[type[KioRequestHeaderV2]] = KioRequestHeaderV2


@dataclass(frozen=True, slots=True, kw_only=True)
class GetTelemetrySubscriptionsResponseV1:
    """GetTelemetrySubscriptions v1 response: v0 without ClientInstanceId."""

    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(71)
    __header_schema__: ClassVar[type[KioResponseHeaderV1]] = KioResponseHeaderV1
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """The duration in milliseconds for which the request was throttled."""
    error_code: KioErrorCode = field(metadata={"kafka_type": "error_code"})
    """The error code, or 0 if there was no error."""
    subscription_id: i32 = field(metadata={"kafka_type": "int32"})
    """Unique identifier for the current subscription set for this client instance."""
    accepted_compression_types: tuple[i8, ...] = field(metadata={"kafka_type": "int8"}, default=())
    """Compression types that broker accepts for the PushTelemetryRequest."""
    push_interval: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """Configured push interval (PushIntervalMs)."""
    telemetry_max_bytes: i32 = field(metadata={"kafka_type": "int32"})
    """The maximum bytes of binary data the broker accepts in PushTelemetryRequest."""
    delta_temporality: bool = field(metadata={"kafka_type": "bool"})
    """Whether monotonic/counter metrics are to be emitted as deltas."""
    requested_metrics: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    """Requested metrics prefix string match."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PushTelemetryRequestV1:
    """PushTelemetry v1 request: v0 without ClientInstanceId (it is in header v3)."""

    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(72)
    __header_schema__: ClassVar[type[KioRequestHeaderV2]] = KioRequestHeaderV2
    subscription_id: i32 = field(metadata={"kafka_type": "int32"})
    """Unique identifier for the current subscription."""
    terminating: bool = field(metadata={"kafka_type": "bool"})
    """Client is terminating the connection."""
    compression_type: i8 = field(metadata={"kafka_type": "int8"})
    """Compression codec used to compress the metrics."""
    metrics: bytes = field(metadata={"kafka_type": "bytes"})
    """Metrics encoded in OpenTelemetry MetricsData v1 protobuf format."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PushTelemetryResponseV1:
    """PushTelemetry v1 response: unchanged from v0 apart from the version."""

    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(72)
    __header_schema__: ClassVar[type[KioResponseHeaderV1]] = KioResponseHeaderV1
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """The duration in milliseconds for which the request was throttled."""
    error_code: KioErrorCode = field(metadata={"kafka_type": "error_code"})
    """The error code, or 0 if there was no error."""
