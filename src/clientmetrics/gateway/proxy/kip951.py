"""KIP-951 node endpoints in Produce (v10+) and Fetch (v16+) responses, rewritten in place.

These are the hot-path responses, often megabytes of records. Decoding and
re-encoding them whole to change a host name would cost more than the proxy
itself, and the endpoints are only present when a leader moved. So the body is
walked, not decoded: fixed-width fields are skipped, records are skipped by their
length, and only the response's own tagged-field section (always last) is read.
When it has no NodeEndpoints (tag 0) the frame is returned untouched; otherwise
only that tail is rebuilt, every other byte is kept.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from clientmetrics.wire import ApiKey, ProtocolError
from clientmetrics.wire.headers import read_uvarint, skip_tagged_fields, write_uvarint

__all__ = ["FETCH_MAX", "PRODUCE_MAX", "Endpoint", "rewrite_node_endpoints"]

PRODUCE, FETCH = ApiKey.PRODUCE, ApiKey.FETCH
#: Highest versions whose layout this module knows; the proxy caps ApiVersions here.
PRODUCE_MAX = 13  # v13 names topics by id (KIP-516)
FETCH_MAX = 18  # v18's response is laid out as v17's
_NODE_ENDPOINTS_TAG = 0
_INT32 = struct.Struct(">i")

#: Maps an upstream node id to the (host, port) clients must use instead.
Endpoint = Callable[[int], tuple[str, int]]


def _skip_compact(frame: bytes, offset: int) -> int:
    """Skip a compact (nullable) string or bytes: uvarint length + 1, then the bytes."""
    length, offset = read_uvarint(frame, offset)
    return offset + max(length - 1, 0)


def _produce_tail(frame: bytes, offset: int, version: int) -> int:
    topics, offset = read_uvarint(frame, offset)
    for _ in range(max(topics - 1, 0)):
        # v13+: the topic id (16 bytes) instead of its name.
        offset = offset + 16 if version >= 13 else _skip_compact(frame, offset)
        partitions, offset = read_uvarint(frame, offset)
        for _ in range(max(partitions - 1, 0)):
            offset += 4 + 2 + 8 + 8 + 8  # index, error, base offset, append time, start
            errors, offset = read_uvarint(frame, offset)
            for _ in range(max(errors - 1, 0)):
                offset = _skip_compact(frame, offset + 4)
                offset = skip_tagged_fields(frame, offset)
            offset = _skip_compact(frame, offset)  # error_message
            offset = skip_tagged_fields(frame, offset)
        offset = skip_tagged_fields(frame, offset)
    return offset + 4  # throttle_time_ms


def _fetch_tail(frame: bytes, offset: int, version: int) -> int:
    offset += 4 + 2 + 4  # throttle, error, session id
    topics, offset = read_uvarint(frame, offset)
    for _ in range(max(topics - 1, 0)):
        offset += 16  # topic id
        partitions, offset = read_uvarint(frame, offset)
        for _ in range(max(partitions - 1, 0)):
            offset += 4 + 2 + 8 + 8 + 8  # index, error, high watermark, LSO, log start
            aborted, offset = read_uvarint(frame, offset)
            for _ in range(max(aborted - 1, 0)):
                offset = skip_tagged_fields(frame, offset + 16)
            offset = _skip_compact(frame, offset + 4)  # preferred replica, records
            offset = skip_tagged_fields(frame, offset)
        offset = skip_tagged_fields(frame, offset)
    return offset


def _rewrite_endpoints(raw: bytes, endpoint: Endpoint) -> bytes:
    """Re-encode a NodeEndpoints array with every host and port replaced."""
    count, offset = read_uvarint(raw, 0)
    out = [write_uvarint(count)]
    for _ in range(max(count - 1, 0)):
        (node_id,) = _INT32.unpack_from(raw, offset)
        offset = _skip_compact(raw, offset + 4) + 4  # host, port
        rack_start = offset
        offset = _skip_compact(raw, offset)
        offset = skip_tagged_fields(raw, offset)
        host, port = endpoint(node_id)
        encoded = host.encode()
        out += [
            _INT32.pack(node_id),
            write_uvarint(len(encoded) + 1),
            encoded,
            _INT32.pack(port),
            raw[rack_start:offset],  # rack and the entry's tagged fields, unchanged
        ]
    return b"".join(out)


def rewrite_node_endpoints(
    api_key: int, version: int, frame: bytes, body_offset: int, endpoint: Endpoint
) -> tuple[bytes, list[tuple[int, str, int]]]:
    """The response frame with NodeEndpoints rewritten, and the upstream endpoints it named.

    ``frame`` is a whole Produce v10+ or Fetch v16+ response (header included,
    no size prefix); the body starts at ``body_offset``. Returns ``frame`` itself
    when there is nothing to rewrite. Raises ``ProtocolError`` on a malformed body.
    """
    try:
        walk = _produce_tail if api_key == PRODUCE else _fetch_tail
        tail = walk(frame, body_offset, version)
        count, offset = read_uvarint(frame, tail)
        if count == 0:
            return frame, []
        parts: list[bytes] = [frame[:tail], write_uvarint(count)]
        nodes: list[tuple[int, str, int]] = []
        for _ in range(count):
            tag, offset = read_uvarint(frame, offset)
            size, start = read_uvarint(frame, offset)
            raw = frame[start : start + size]
            offset = start + size
            if tag == _NODE_ENDPOINTS_TAG:
                nodes = _upstream_endpoints(raw)
                raw = _rewrite_endpoints(raw, endpoint)
            parts += [write_uvarint(tag), write_uvarint(len(raw)), raw]
    except (IndexError, struct.error) as exc:
        raise ProtocolError(f"malformed response body of api key {api_key}: {exc}") from exc
    if offset != len(frame):
        raise ProtocolError(f"response of api key {api_key} has {len(frame) - offset} extra bytes")
    return b"".join(parts), nodes


def _upstream_endpoints(raw: bytes) -> list[tuple[int, str, int]]:
    count, offset = read_uvarint(raw, 0)
    nodes = []
    for _ in range(max(count - 1, 0)):
        (node_id,) = _INT32.unpack_from(raw, offset)
        length, start = read_uvarint(raw, offset + 4)
        host_end = start + length - 1
        (port,) = _INT32.unpack_from(raw, host_end)
        nodes.append((node_id, raw[start:host_end].decode("utf-8", "replace"), port))
        offset = skip_tagged_fields(raw, _skip_compact(raw, host_end + 4))
    return nodes
