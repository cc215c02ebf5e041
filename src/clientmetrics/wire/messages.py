"""Whole-message codecs: framed requests and responses for the served APIs."""

from __future__ import annotations

from typing import Any

from clientmetrics.wire.codec import read_entity, write_entity
from clientmetrics.wire.errors import UnsupportedApi
from clientmetrics.wire.framing import encode_frame
from clientmetrics.wire.headers import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    parse_response_header,
    response_header_version,
)
from clientmetrics.wire.schemas import request_type, response_type

__all__ = [
    "decode_body",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
]


def decode_request(frame: bytes) -> tuple[RequestHeader, Any]:
    """Header and body entity of a request frame (without its size prefix).

    Raises ``ProtocolError`` for malformed bytes and ``UnsupportedApi`` (with the
    parsed header as ``.header``) for an api key or version that is not served.
    """
    header, offset = parse_request_header(frame)
    return header, decode_body(header, frame, offset)


def decode_body(header: RequestHeader, frame: bytes, offset: int) -> Any:
    """The body entity of a request whose header was already parsed at ``offset``.

    Saves parsing the header twice on the hot path; raises like ``decode_request``.
    """
    try:
        entity_type = request_type(header.api_key, header.api_version)
    except UnsupportedApi as exc:
        raise UnsupportedApi(header.api_key, header.api_version, header=header) from exc
    return read_entity(entity_type, frame, offset)


def _check_matches(header: RequestHeader, body: Any) -> None:
    # Catches a local bug (a body sent under the wrong header) before it hits the wire.
    if body.__api_key__ != header.api_key:
        raise ValueError(
            f"{type(body).__name__} is api key {body.__api_key__}, header says {header.api_key}"
        )


def encode_request(header: RequestHeader, body: Any) -> bytes:
    """The framed request (size prefix included)."""
    _check_matches(header, body)
    if body.__version__ != header.api_version:
        raise ValueError(
            f"{type(body).__name__} is version {body.__version__}, header says {header.api_version}"
        )
    return encode_frame(encode_request_header(header) + write_entity(body))


def encode_response(header: RequestHeader, body: Any) -> bytes:
    """The framed response to the request ``header`` describes.

    The response header version follows the request's api key and version, and
    the correlation id is the request's.
    """
    _check_matches(header, body)
    return frame_response(header, write_entity(body))


def frame_response(header: RequestHeader, encoded_body: bytes) -> bytes:
    """The framed response to ``header``'s request, its body already encoded (an answer
    that is the same for every client is encoded once)."""
    version = response_header_version(header.api_key, header.api_version)
    return encode_frame(encode_response_header(header.correlation_id, version) + encoded_body)


def decode_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation_id, body) of a response frame (without its size prefix)."""
    entity_type = response_type(api_key, api_version)
    correlation_id, offset = parse_response_header(
        frame, response_header_version(api_key, api_version)
    )
    return correlation_id, read_entity(entity_type, frame, offset)
