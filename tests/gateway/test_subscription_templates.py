"""The patched GetTelemetrySubscriptions template encodes exactly what the codec would."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from clientmetrics.gateway.telemetry_rpcs import SubscriptionTemplates
from clientmetrics.telemetry.manager import SubscriptionsResult
from clientmetrics.wire import (
    ErrorCode,
    RequestHeader,
    decode_response,
    encode_response,
    response_type,
)
from clientmetrics.wire.build import build

INT32 = st.integers(-(2**31), 2**31 - 1)
results = st.builds(
    SubscriptionsResult,
    error_code=st.just(ErrorCode.NONE),
    client_instance_id=st.uuids(),
    subscription_id=INT32,
    accepted_compression_types=st.lists(st.sampled_from([1, 2, 3, 4]), max_size=4).map(tuple),
    push_interval_ms=st.integers(100, 3_600_000),
    telemetry_max_bytes=st.integers(1, 2**31 - 1),
    delta_temporality=st.booleans(),
    requested_metrics=st.lists(st.text(max_size=30), max_size=5).map(tuple),
    throttle_time_ms=st.integers(0, 1000),
)


def codec_encoding(header: RequestHeader, result: SubscriptionsResult) -> bytes:
    values = {
        "throttle_time": result.throttle_time_ms,
        "error_code": result.error_code,
        "client_instance_id": result.client_instance_id,
        "subscription_id": result.subscription_id,
        "accepted_compression_types": result.accepted_compression_types,
        "push_interval": result.push_interval_ms,
        "telemetry_max_bytes": result.telemetry_max_bytes,
        "delta_temporality": result.delta_temporality,
        "requested_metrics": result.requested_metrics,
    }
    return encode_response(header, build(response_type(71, header.api_version), values))


@given(results, st.lists(results, max_size=3), INT32, st.sampled_from([0, 1]))
def test_template_matches_the_codec(
    result: SubscriptionsResult,
    earlier: list[SubscriptionsResult],
    correlation: int,
    version: int,
) -> None:
    templates = SubscriptionTemplates()
    for other in earlier:  # a warm cache must not leak one client's fields into another's
        templates.render(RequestHeader(71, version, 1, "c", uuid.uuid4()), other)
    header = RequestHeader(71, version, correlation, "c", result.client_instance_id)
    rendered = templates.render(header, result)
    assert rendered == codec_encoding(header, result)
    decoded_correlation, body = decode_response(71, version, rendered[4:])
    assert decoded_correlation == correlation
    assert body.subscription_id == result.subscription_id
    if version == 0:
        assert body.client_instance_id == result.client_instance_id
