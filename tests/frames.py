"""A bare Kafka client (a blocking socket or an asyncio stream), for tests that talk to a
server by hand."""

from __future__ import annotations

import asyncio
import socket
import struct
import uuid

from clientmetrics.wire import RequestHeader, decode_response, encode_request, request_type
from tests.procs import MIN_DEADLINE_S


def recv_frame(sock: socket.socket) -> bytes:
    """One response frame, without its size; ``ConnectionError`` if the peer closes first."""

    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    """One frame, without its size, from an asyncio stream."""
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


async def answer_frame(reader: asyncio.StreamReader) -> bytes:
    """The next frame a peer sends (``read_frame``), waited for up to ``MIN_DEADLINE_S``."""
    return await asyncio.wait_for(read_frame(reader), MIN_DEADLINE_S)


def get_then_push(port: int, client_id: str, metrics: bytes = b"") -> int:
    """GetTelemetrySubscriptions, then one uncompressed push of ``metrics``, on a new
    connection as ``client_id``; the push's error code."""
    with socket.create_connection(("127.0.0.1", port), timeout=MIN_DEADLINE_S) as sock:
        get = request_type(71, 0)(client_instance_id=uuid.UUID(int=0))
        sock.sendall(encode_request(RequestHeader(71, 0, 1, client_id), get))
        _, sub = decode_response(71, 0, recv_frame(sock))
        push = request_type(72, 0)(
            client_instance_id=sub.client_instance_id,
            subscription_id=sub.subscription_id,
            terminating=False,
            compression_type=0,
            metrics=metrics,
        )
        sock.sendall(encode_request(RequestHeader(72, 0, 2, client_id), push))
        _, answer = decode_response(72, 0, recv_frame(sock))
    return int(answer.error_code)
