"""What kio is strict about and the wire layer tolerates, as the protocol requires."""

from __future__ import annotations

import datetime
import uuid

import pytest
from kio.schema.errors import ErrorCode as KioErrorCode

from clientmetrics.wire import (
    ProtocolError,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request_header,
    encode_response,
    response_type,
)

PUSH_V0_HEADER = encode_request_header(RequestHeader(72, 0, 3, "c"))
INSTANCE = uuid.UUID("11111111-2222-3333-4444-555555555555")
PUSH_V0_FIELDS = (
    INSTANCE.bytes
    + b"\x00\x00\x00\x09"  # SubscriptionId 9
    + b"\x01"  # Terminating
    + b"\x04"  # CompressionType zstd
    + b"\x04abc"  # Metrics: compact bytes, length + 1
)


def test_unknown_top_level_tag_is_skipped() -> None:
    tags = b"\x02" + b"\x0a\x03xyz" + b"\x63\x00"  # tags 10 and 99, unknown to v0
    header, body = decode_request(PUSH_V0_HEADER + PUSH_V0_FIELDS + tags)
    assert header.correlation_id == 3
    assert (body.client_instance_id, body.subscription_id, body.metrics) == (INSTANCE, 9, b"abc")
    assert body.terminating is True


def test_unknown_tag_in_a_nested_struct_is_skipped() -> None:
    # Metadata v12 response with one broker whose struct carries an unknown tag.
    body = (
        b"\x00\x00\x00\x00"  # throttle
        + b"\x02"  # brokers: one
        + b"\x00\x00\x00\x01"
        + b"\x05host"
        + b"\x00\x00\x23\x84"
        + b"\x00"  # id, host, port, rack null
        + b"\x01"
        + b"\x2a\x01\xff"  # broker tags: unknown tag 42
        + b"\x00"  # cluster id null
        + b"\x00\x00\x00\x01"  # controller id
        + b"\x01"  # topics: none
        + b"\x00"  # tags
    )
    correlation_id, decoded = decode_response(3, 12, b"\x00\x00\x00\x07\x00" + body)
    assert correlation_id == 7
    (broker,) = decoded.brokers
    assert (broker.node_id, broker.host, broker.port, broker.rack) == (1, "host", 9092, None)
    assert decoded.controller_id == 1


def test_unknown_error_code_becomes_unknown_server_error() -> None:
    frame = b"\x00\x00\x00\x01\x00" + b"\x00\x00\x00\x00" + b"\x7f\x00" + b"\x00"
    _, decoded = decode_response(72, 0, frame)
    assert decoded.error_code is KioErrorCode.unknown_server_error


def test_zero_uuid_in_a_response_decodes_as_the_zero_uuid() -> None:
    header = RequestHeader(71, 0, 1, None)
    body = response_type(71, 0)(
        throttle_time=datetime.timedelta(0),
        error_code=KioErrorCode.none,
        client_instance_id=None,
        subscription_id=0,
        push_interval=datetime.timedelta(0),
        telemetry_max_bytes=0,
        delta_temporality=False,
    )
    _, decoded = decode_response(71, 0, encode_response(header, body)[4:])
    assert decoded.client_instance_id == uuid.UUID(int=0)


def test_truncated_tag_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        decode_request(PUSH_V0_HEADER + PUSH_V0_FIELDS + b"\x01\x0a\x09xy")


def test_every_truncated_body_is_a_protocol_error() -> None:
    frame = PUSH_V0_HEADER + PUSH_V0_FIELDS + b"\x00"
    for cut in range(len(PUSH_V0_HEADER), len(frame)):
        with pytest.raises(ProtocolError):
            decode_request(frame[:cut])


def test_null_push_metrics_reads_as_an_empty_push() -> None:
    """librdkafka before PR #4912 sends a null Metrics when nothing matched."""
    null_metrics = PUSH_V0_FIELDS[: -len(b"\x04abc")] + b"\x00"  # compact null
    _, body = decode_request(PUSH_V0_HEADER + null_metrics + b"\x00")
    assert (body.subscription_id, body.metrics) == (9, b"")


def test_null_is_still_refused_where_no_real_client_sends_it() -> None:
    # GetTelemetrySubscriptions v0 has no bytes field; DescribeConfigs' resource name
    # (a non-nullable string) sent as null stays an error.
    frame = (
        encode_request_header(RequestHeader(32, 4, 5, "c")) + b"\x02\x10\x00\x01\x00\x00\x00\x00"
    )
    with pytest.raises(ProtocolError):
        decode_request(frame)
