"""Hypothesis round-trips for every served message type and version."""

from __future__ import annotations

import io
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from clientmetrics.wire import (
    SERVED,
    FrameDecoder,
    RequestHeader,
    UnsupportedApi,
    decode_request,
    decode_response,
    encode_request,
    encode_request_header,
    encode_response,
    request_header_version,
    request_type,
    response_type,
)
from clientmetrics.wire.fixed import fixed_writer

from .strategies import entities, request_headers

SERVED_VERSIONS = [
    (api_key, version)
    for api_key, (low, high) in SERVED.items()
    for version in range(low, high + 1)
]
ROUND_TRIP = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _one_frame(framed: bytes) -> bytes:
    frames = FrameDecoder().feed(framed)
    assert len(frames) == 1
    return frames[0]


@pytest.mark.parametrize(("api_key", "version"), SERVED_VERSIONS, ids=str)
@ROUND_TRIP
@given(data=st.data())
def test_request_round_trip(api_key: int, version: int, data: st.DataObject) -> None:
    header = data.draw(request_headers(api_key, version))
    body = data.draw(entities(request_type(api_key, version)))
    decoded_header, decoded_body = decode_request(_one_frame(encode_request(header, body)))
    assert decoded_header == header
    assert decoded_body == body


@pytest.mark.parametrize(("api_key", "version"), SERVED_VERSIONS, ids=str)
@ROUND_TRIP
@given(data=st.data())
def test_response_round_trip(api_key: int, version: int, data: st.DataObject) -> None:
    header = data.draw(request_headers(api_key, version))
    body = data.draw(entities(response_type(api_key, version)))
    frame = _one_frame(encode_response(header, body))
    correlation_id, decoded = decode_response(api_key, version, frame)
    assert correlation_id == header.correlation_id
    assert decoded == body


@pytest.mark.parametrize(("api_key", "version"), [(71, 2), (72, 2), (18, 5), (0, 9), (3, 13)])
def test_unserved_versions_are_refused_with_their_header(api_key: int, version: int) -> None:
    header = RequestHeader(api_key, version, 42, "client", header_version=2)
    frame = encode_request_header_for(header) + b"\x00" * 8
    with pytest.raises(UnsupportedApi) as caught:
        decode_request(frame)
    assert caught.value.header is not None
    assert caught.value.header.correlation_id == 42
    with pytest.raises(UnsupportedApi):
        request_type(api_key, version)
    with pytest.raises(UnsupportedApi):
        response_type(api_key, version)


def encode_request_header_for(header: RequestHeader) -> bytes:
    fixed = RequestHeader(
        header.api_key,
        header.api_version,
        header.correlation_id,
        header.client_id,
        header_version=request_header_version(header.api_key, header.api_version),
    )
    return encode_request_header(fixed)


def test_body_under_the_wrong_header_is_refused() -> None:
    body: Any = request_type(72, 0)(
        client_instance_id=uuid.uuid4(),
        subscription_id=1,
        terminating=False,
        compression_type=0,
        metrics=b"",
    )
    with pytest.raises(ValueError, match="api key"):
        encode_request(RequestHeader(71, 0, 1, None), body)
    with pytest.raises(ValueError, match="version"):
        encode_request(RequestHeader(72, 1, 1, None, header_version=3), body)


FIXED_WIDTH = [
    entity
    for api_key, version in SERVED_VERSIONS
    for entity in (request_type(api_key, version), response_type(api_key, version))
    if fixed_writer(entity) is not None
]


def test_the_hot_path_responses_are_fixed_width() -> None:
    assert response_type(72, 0) in FIXED_WIDTH
    assert response_type(72, 1) in FIXED_WIDTH
    assert response_type(71, 0) not in FIXED_WIDTH  # arrays and strings


@pytest.mark.parametrize("entity_type", FIXED_WIDTH, ids=lambda t: f"{t.__module__}.{t.__name__}")
@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_fixed_width_writer_matches_kio(entity_type: type, data: st.DataObject) -> None:
    entity = data.draw(entities(entity_type))
    buffer = io.BytesIO()
    entity_writer(entity_type)(buffer, entity)
    writer = fixed_writer(entity_type)
    assert writer is not None
    assert writer(entity) == buffer.getvalue()
