"""The two telemetry RPCs as the client sends them, v0 or v1 (KIP-1313's table).

Shared by the kafka-python driver and the load simulator: which version to use,
the request header and body for each, and the response turned into a
state-machine event.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from clientmetrics.telemetry.client_state import (
    PushAccepted,
    PushFailed,
    ReceivedSubscription,
    SubscriptionFailed,
    SubscriptionReceived,
)
from clientmetrics.wire import (
    ZERO_UUID,
    ApiKey,
    RequestHeader,
    request_header_version,
    request_type,
)
from clientmetrics.wire.durations import to_millis

__all__ = [
    "GET_TELEMETRY_SUBSCRIPTIONS",
    "PUSH_TELEMETRY",
    "get_request",
    "get_response_event",
    "push_request",
    "push_response_event",
    "telemetry_version",
]

GET_TELEMETRY_SUBSCRIPTIONS = ApiKey.GET_TELEMETRY_SUBSCRIPTIONS
PUSH_TELEMETRY = ApiKey.PUSH_TELEMETRY


def telemetry_version(api_versions: Mapping[int, tuple[int, int]]) -> int | None:
    """1 when the broker offers v1 of both 71 and 72, 0 when v0 of both, else ``None``.

    A broker that advertises 71 without 72 is treated as not supporting telemetry
    (librdkafka stalls for ever on such a broker).
    """
    get = api_versions.get(GET_TELEMETRY_SUBSCRIPTIONS)
    push = api_versions.get(PUSH_TELEMETRY)
    if get is None or push is None:
        return None
    if get[0] <= 1 <= get[1] and push[0] <= 1 <= push[1]:
        return 1
    if get[0] == 0 and push[0] == 0:
        return 0
    return None


def _header(
    api_key: int, version: int, correlation_id: int, client_id: str | None, instance_id: uuid.UUID
) -> RequestHeader:
    header_version = request_header_version(api_key, version)
    return RequestHeader(
        api_key,
        version,
        correlation_id,
        client_id,
        instance_id if header_version >= 3 else None,
        header_version,
    )


def get_request(
    version: int, correlation_id: int, client_id: str | None, instance_id: uuid.UUID
) -> tuple[RequestHeader, Any]:
    """GetTelemetrySubscriptions: v1 puts the id in header v3, v0 in the body.

    Under v0 the client still sends its own (KIP-1313 generated) id, never zero:
    the "new client, old broker" cell of the KIP's table.
    """
    header = _header(GET_TELEMETRY_SUBSCRIPTIONS, version, correlation_id, client_id, instance_id)
    cls = request_type(GET_TELEMETRY_SUBSCRIPTIONS, version)
    body = cls() if version >= 1 else cls(client_instance_id=instance_id)
    return header, body


def push_request(
    version: int,
    correlation_id: int,
    client_id: str | None,
    instance_id: uuid.UUID,
    *,
    subscription_id: int,
    terminating: bool,
    compression_type: int,
    metrics: bytes,
) -> tuple[RequestHeader, Any]:
    """PushTelemetry in the given version."""
    header = _header(PUSH_TELEMETRY, version, correlation_id, client_id, instance_id)
    cls = request_type(PUSH_TELEMETRY, version)
    fields: dict[str, Any] = {
        "subscription_id": subscription_id,
        "terminating": terminating,
        "compression_type": compression_type,
        "metrics": metrics,
    }
    if version == 0:
        fields["client_instance_id"] = instance_id
    return header, cls(**fields)


def get_response_event(body: Any) -> SubscriptionReceived | SubscriptionFailed:
    """A decoded GetTelemetrySubscriptions response as a state-machine event."""
    code = int(body.error_code)
    if code != 0:
        return SubscriptionFailed(code)
    returned = getattr(body, "client_instance_id", None)
    instance_id = returned if isinstance(returned, uuid.UUID) and returned != ZERO_UUID else None
    return SubscriptionReceived(
        ReceivedSubscription(
            subscription_id=int(body.subscription_id),
            accepted_compression_types=tuple(int(t) for t in body.accepted_compression_types),
            push_interval_ms=to_millis(body.push_interval),
            telemetry_max_bytes=int(body.telemetry_max_bytes),
            delta_temporality=bool(body.delta_temporality),
            requested_metrics=tuple(body.requested_metrics),
            client_instance_id=instance_id,
        )
    )


def push_response_event(body: Any) -> PushAccepted | PushFailed:
    """A decoded PushTelemetry response as a state-machine event."""
    code = int(body.error_code)
    return PushAccepted() if code == 0 else PushFailed(code)
