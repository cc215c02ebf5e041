"""Request headers v0-v3 and response headers v0-v1."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clientmetrics.wire import (
    ProtocolError,
    RequestHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    parse_response_header,
    peek_request,
    request_header_version,
    response_header_version,
)

from .strategies import client_ids

# (api_key, api_version) -> request header version, per Kafka's generator rule and KIP-1313.
REQUEST_RULE = [
    (7, 0, 0),  # ControlledShutdown v0: the only v0 header
    (7, 1, 1),  # a key kio does not know: v1
    (999, 3, 1),  # an unknown key: v1
    (18, 2, 1),
    (18, 3, 2),  # ApiVersions: first flexible version
    (3, 8, 1),
    (3, 9, 2),
    (3, 12, 2),
    (0, 99, 2),  # Produce past kio's newest version: still flexible
    (32, 0, 1),  # DescribeConfigs v0: removed from the schemas, pre-flexible
    (32, 4, 2),
    (71, 0, 2),
    (71, 1, 3),  # KIP-1313
    (72, 0, 2),
    (72, 1, 3),  # KIP-1313
    (74, 0, 2),
]
RESPONSE_RULE = [
    (18, 0, 0),
    (18, 3, 0),  # ApiVersions responses always use header v0
    (18, 9, 0),
    (3, 8, 0),
    (3, 9, 1),
    (71, 0, 1),
    (71, 1, 1),
    (72, 1, 1),
    (32, 3, 0),
    (32, 4, 1),
    (999, 0, 0),
]


@pytest.mark.parametrize(("api_key", "version", "expected"), REQUEST_RULE)
def test_request_header_version_rule(api_key: int, version: int, expected: int) -> None:
    assert request_header_version(api_key, version) == expected


@pytest.mark.parametrize(("api_key", "version", "expected"), RESPONSE_RULE)
def test_response_header_version_rule(api_key: int, version: int, expected: int) -> None:
    assert response_header_version(api_key, version) == expected


# One (api_key, api_version) per header version, so parse picks the same layout.
KEY_FOR_HEADER_VERSION = {0: (7, 0), 1: (3, 4), 2: (72, 0), 3: (72, 1)}


@st.composite
def headers(draw: st.DrawFn) -> RequestHeader:
    header_version = draw(st.sampled_from(sorted(KEY_FOR_HEADER_VERSION)))
    api_key, api_version = KEY_FOR_HEADER_VERSION[header_version]
    return RequestHeader(
        api_key=api_key,
        api_version=api_version,
        correlation_id=draw(st.integers(-(2**31), 2**31 - 1)),
        client_id=draw(client_ids()) if header_version >= 1 else None,
        client_instance_id=draw(st.uuids()) if header_version >= 3 else None,
        header_version=header_version,
    )


@settings(max_examples=300, deadline=None)
@given(header=headers(), body=st.binary(max_size=20))
def test_request_header_round_trip(header: RequestHeader, body: bytes) -> None:
    frame = encode_request_header(header) + body
    parsed, offset = parse_request_header(frame)
    assert parsed == header
    assert frame[offset:] == body
    assert peek_request(frame) == (header.api_key, header.api_version, header.correlation_id)


def test_v3_layout_puts_the_instance_id_between_client_id_and_tags() -> None:
    instance_id = uuid.UUID("0123456789abcdef0123456789abcdef")
    header = RequestHeader(72, 1, 7, "ab", instance_id, 3)
    expected = (
        b"\x00\x48\x00\x01\x00\x00\x00\x07"  # key 72, version 1, correlation 7
        + b"\x00\x02ab"  # ClientId: old-style int16 length even in a flexible header
        + instance_id.bytes
        + b"\x00"  # no tagged fields
    )
    assert encode_request_header(header) == expected


def test_v3_zero_instance_id_decodes_as_the_zero_uuid() -> None:
    frame = encode_request_header(RequestHeader(71, 1, 1, None, None, 3))
    parsed, _ = parse_request_header(frame)
    assert parsed.client_instance_id == uuid.UUID(int=0)
    assert parsed.client_id is None


def test_unknown_header_tags_are_skipped() -> None:
    base = encode_request_header(RequestHeader(72, 0, 9, "c", None, 2))[:-1]
    tags = b"\x02" + b"\x05\x03xyz" + b"\x7f\x00"  # two tags we do not know, one empty
    parsed, offset = parse_request_header(base + tags + b"BODY")
    assert parsed == RequestHeader(72, 0, 9, "c", None, 2)
    assert offset == len(base) + len(tags)


@pytest.mark.parametrize(
    "header",
    [
        RequestHeader(3, 4, 1, "client", None, 1),
        RequestHeader(72, 0, 1, "client", None, 2),
        RequestHeader(72, 1, 1, "client", uuid.uuid4(), 3),
    ],
    ids=lambda h: f"v{h.header_version}",
)
def test_every_truncation_is_a_protocol_error(header: RequestHeader) -> None:
    frame = encode_request_header(header)
    for cut in range(len(frame)):
        with pytest.raises(ProtocolError):
            parse_request_header(frame[:cut])


def test_invalid_client_id_length_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="client id length"):
        parse_request_header(b"\x00\x03\x00\x04\x00\x00\x00\x01\xff\xfe")


def test_peek_needs_eight_bytes() -> None:
    assert peek_request(b"\x00\x48\x00\x00\x00\x00\x01\x00rest") == (72, 0, 256)
    with pytest.raises(ProtocolError):
        peek_request(b"\x00\x48\x00\x00\x00\x00\x01")


@settings(max_examples=100, deadline=None)
@given(correlation_id=st.integers(-(2**31), 2**31 - 1), version=st.sampled_from([0, 1]))
def test_response_header_round_trip(correlation_id: int, version: int) -> None:
    frame = encode_response_header(correlation_id, version) + b"body"
    assert parse_response_header(frame, version) == (correlation_id, len(frame) - 4)


def test_response_header_skips_unknown_tags_and_rejects_truncation() -> None:
    frame = b"\x00\x00\x00\x05" + b"\x01\x00\x02hi" + b"body"
    assert parse_response_header(frame, 1) == (5, 9)
    with pytest.raises(ProtocolError):
        parse_response_header(frame[:7], 1)
    with pytest.raises(ProtocolError):
        parse_response_header(b"\x00\x00\x00", 0)
