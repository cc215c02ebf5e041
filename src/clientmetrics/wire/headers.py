"""Request and response headers, v0 to v3 (KIP-1313), hand-coded for the hot path.

Request header layout (``RequestHeader.json``):

* v0: ApiKey int16, ApiVersion int16, CorrelationId int32 (ControlledShutdown v0 only)
* v1: v0 + ClientId — always the old int16-length nullable string, even in flexible
  versions, so any broker can read the header of an ApiVersions request
* v2: v1 + tagged fields (flexible)
* v3: v2 with ClientInstanceId (uuid) between ClientId and the tagged fields

Response header v0 is CorrelationId; v1 adds tagged fields. Unknown tagged fields
are skipped, as the protocol requires.
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from kio.index import load_request_schema, load_response_schema

from clientmetrics.wire.api import ApiKey
from clientmetrics.wire.errors import ProtocolError
from clientmetrics.wire.schemas import SERVED, kio_known_versions, request_type, response_type

__all__ = [
    "HEADER_V3_FROM",
    "RequestHeader",
    "encode_request_header",
    "encode_response_header",
    "parse_request_header",
    "parse_response_header",
    "peek_request",
    "read_uvarint",
    "request_header_version",
    "response_header_version",
]

_PREFIX = struct.Struct(">hhi")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_ZERO_UUID_BYTES = bytes(16)

HEADER_V3_FROM: Mapping[int, int] = MappingProxyType(
    {ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: 1, ApiKey.PUSH_TELEMETRY: 1}
)
"""api_key -> first version whose requests use header v3 (KIP-1313 ``headerVersions``).

KIP-1313 gives every RPC except SaslHandshake a new v3-header version; add each
API here as its new version becomes known.
"""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """A decoded request header. ``header_version`` says which layout it had or gets."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_instance_id: uuid.UUID | None = None
    """Request header v3 only (KIP-1313); a zero id on the wire decodes as ``UUID(int=0)``."""
    header_version: int = 2


@functools.cache
def _kio_flexible(api_key: int, api_version: int, request: bool) -> bool | None:
    """Flexibility of a message kio knows, extrapolated past kio's version range."""
    known = kio_known_versions(api_key)
    if known is None:
        return None
    low, high = known
    if api_version < low:
        # Versions removed from the schemas (KIP-896) all predate flexible versions.
        return False
    version = min(api_version, high)  # once flexible, every later version is too
    load = load_request_schema if request else load_response_schema
    return bool(load(api_key, version).__flexible__)


def _served_flexible(api_key: int, api_version: int, request: bool) -> bool | None:
    served = SERVED.get(api_key)
    if served is None or not served[0] <= api_version <= served[1]:
        return None
    entity = request_type(api_key, api_version) if request else response_type(api_key, api_version)
    return bool(entity.__flexible__)  # type: ignore[attr-defined]


@functools.cache
def request_header_version(api_key: int, api_version: int) -> int:
    """Request header version: flexible -> 2, else 1; v0 and v3 by table."""
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    first_v3 = HEADER_V3_FROM.get(api_key)
    if first_v3 is not None and api_version >= first_v3:
        return 3
    flexible = _served_flexible(api_key, api_version, True)
    if flexible is None:
        flexible = _kio_flexible(api_key, api_version, True)
    return 2 if flexible else 1


@functools.cache
def response_header_version(api_key: int, api_version: int) -> int:
    """Response header version: ApiVersions always 0; flexible -> 1, else 0."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    flexible = _served_flexible(api_key, api_version, False)
    if flexible is None:
        flexible = _kio_flexible(api_key, api_version, False)
    return 1 if flexible else 0


def peek_request(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) without decoding anything else."""
    if len(frame) < 8:
        raise ProtocolError(f"request frame of {len(frame)} bytes is shorter than 8")
    key, version, correlation_id = _PREFIX.unpack_from(frame, 0)
    return key, version, correlation_id


def read_uvarint(frame: bytes | bytearray | memoryview, offset: int) -> tuple[int, int]:
    """An unsigned varint at ``offset``: (value, offset after it); ProtocolError if bad."""
    value = 0
    shift = 0
    while True:
        if offset >= len(frame):
            raise ProtocolError("truncated varint")
        byte = frame[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, offset
        shift += 7
        if shift > 28:
            raise ProtocolError("varint longer than 5 bytes")


def skip_tagged_fields(frame: bytes | bytearray | memoryview, offset: int) -> int:
    """Offset after a tagged-fields section; every tag is unknown to a header."""
    count, offset = read_uvarint(frame, offset)
    for _ in range(count):
        _tag, offset = read_uvarint(frame, offset)
        size, offset = read_uvarint(frame, offset)
        offset += size
        if offset > len(frame):
            raise ProtocolError("truncated tagged field")
    return offset


def write_uvarint(value: int) -> bytes:
    """Unsigned varint encoding of ``value``."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def parse_request_header(frame: bytes) -> tuple[RequestHeader, int]:
    """The request header and the offset where the body starts."""
    key, version, correlation_id = peek_request(frame)
    header_version = request_header_version(key, version)
    if header_version == 0:
        return RequestHeader(key, version, correlation_id, None, None, 0), 8
    if len(frame) < 10:
        raise ProtocolError("truncated request header: no client id")
    (length,) = _INT16.unpack_from(frame, 8)
    offset = 10
    client_id: str | None = None
    if length >= 0:
        if offset + length > len(frame):
            raise ProtocolError("truncated request header: client id")
        # Java decodes with replacement characters; so do we, rather than drop a client.
        client_id = frame[offset : offset + length].decode("utf-8", "replace")
        offset += length
    elif length != -1:
        raise ProtocolError(f"invalid client id length {length}")
    instance_id: uuid.UUID | None = None
    if header_version >= 3:
        if offset + 16 > len(frame):
            raise ProtocolError("truncated request header: client instance id")
        instance_id = uuid.UUID(bytes=bytes(frame[offset : offset + 16]))
        offset += 16
    if header_version >= 2:
        offset = skip_tagged_fields(frame, offset)
    header = RequestHeader(key, version, correlation_id, client_id, instance_id, header_version)
    return header, offset


def encode_request_header(header: RequestHeader) -> bytes:
    """The header's bytes in the layout ``header.header_version`` names.

    A v3 header with ``client_instance_id=None`` is written with a zero id.
    """
    parts = [_PREFIX.pack(header.api_key, header.api_version, header.correlation_id)]
    version = header.header_version
    if version >= 1:
        if header.client_id is None:
            parts.append(_INT16.pack(-1))
        else:
            raw = header.client_id.encode("utf-8")
            parts.append(_INT16.pack(len(raw)))
            parts.append(raw)
    if version >= 3:
        instance_id = header.client_instance_id
        parts.append(_ZERO_UUID_BYTES if instance_id is None else instance_id.bytes)
    if version >= 2:
        parts.append(b"\x00")
    return b"".join(parts)


def parse_response_header(frame: bytes, header_version: int) -> tuple[int, int]:
    """(correlation_id, body offset) of a response frame."""
    if len(frame) < 4:
        raise ProtocolError(f"response frame of {len(frame)} bytes is shorter than 4")
    (correlation_id,) = _INT32.unpack_from(frame, 0)
    offset = 4
    if header_version >= 1:
        offset = skip_tagged_fields(frame, offset)
    return correlation_id, offset


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    """Response header bytes: v0 is the correlation id, v1 adds empty tagged fields."""
    if header_version >= 1:
        return _INT32.pack(correlation_id) + b"\x00"
    return _INT32.pack(correlation_id)
