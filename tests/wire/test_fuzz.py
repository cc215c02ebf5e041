"""Fuzz invariant: any bytes either decode or raise ProtocolError / UnsupportedApi."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clientmetrics.wire import (
    SERVED,
    ProtocolError,
    RequestHeader,
    UnsupportedApi,
    decode_request,
    decode_response,
    encode_request,
    encode_request_header,
    request_header_version,
    request_type,
    response_type,
)

from .strategies import entities

SERVED_VERSIONS = [
    (api_key, version)
    for api_key, (low, high) in SERVED.items()
    for version in range(low, high + 1)
]
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _decodes_or_refuses(frame: bytes) -> None:
    try:
        header, body = decode_request(frame)
    except (ProtocolError, UnsupportedApi):
        return
    assert type(body) is request_type(header.api_key, header.api_version)


@FUZZ
@given(frame=st.binary(max_size=200))
def test_random_bytes(frame: bytes) -> None:
    _decodes_or_refuses(frame)


@st.composite
def served_header_then_garbage(draw: st.DrawFn) -> bytes:
    api_key, version = draw(st.sampled_from(SERVED_VERSIONS))
    header = RequestHeader(api_key, version, 1, "c", None, request_header_version(api_key, version))
    return encode_request_header(header) + draw(st.binary(max_size=120))


@FUZZ
@given(frame=served_header_then_garbage())
def test_valid_header_random_body(frame: bytes) -> None:
    _decodes_or_refuses(frame)


@pytest.mark.parametrize("api_key", sorted(SERVED))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_valid_frames(api_key: int, data: st.DataObject) -> None:
    low, high = SERVED[api_key]
    version = data.draw(st.integers(low, high))
    body = data.draw(entities(request_type(api_key, version)))
    header = RequestHeader(api_key, version, 5, "c", None, request_header_version(api_key, version))
    frame = bytearray(encode_request(header, body)[4:])
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(8, max(8, len(frame) - 1)))
        if index < len(frame):
            frame[index] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(frame)))
    _decodes_or_refuses(bytes(frame[:cut]))


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        (3, 12, b"\xff\xff\xff\xff\x0f"),  # Metadata topics: compact length 2**32 - 2
        (3, 4, b"\x7f\xff\xff\xff"),  # Metadata topics: legacy length 2**31 - 1
        (32, 4, b"\x02\x10\x02a\xff\xff\xff\x7f"),  # DescribeConfigs keys: ~2**28
        (74, 1, b"\xff\xff\xff\xff\x0f"),  # ListConfigResources types
    ],
)
def test_hostile_array_length_is_refused_without_allocating(
    api_key: int, version: int, body: bytes
) -> None:
    # kio's native reader allocates the declared length first and aborts the process.
    header = RequestHeader(api_key, version, 1, "c", None, request_header_version(api_key, version))
    with pytest.raises(ProtocolError, match="array"):
        decode_request(encode_request_header(header) + body)


@FUZZ
@given(version_key=st.sampled_from(SERVED_VERSIONS), frame=st.binary(max_size=150))
def test_random_response_bytes(version_key: tuple[int, int], frame: bytes) -> None:
    api_key, version = version_key
    try:
        _correlation_id, body = decode_response(api_key, version, frame)
    except ProtocolError:
        return
    assert type(body) is response_type(api_key, version)
