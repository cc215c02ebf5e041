"""One TCP connection to an upstream broker, on behalf of one client connection.

Requests are written as they arrive (pipelined, as the client sent them) and a
Kafka broker answers a connection's requests in order, so responses are matched
to requests by position; the correlation id is checked, never looked up. That
lets client frames pass through with their own correlation ids, untouched, while
requests the gateway injects for itself (the upstream half of a split config
request, a Metadata probe) use ids from a range of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import struct
from collections import deque

import structlog

from clientmetrics.errors import ClientMetricsError
from clientmetrics.gateway.config import Address
from clientmetrics.wire import FrameDecoder, ProtocolError

log = structlog.get_logger("clientmetrics.gateway.proxy")

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
#: Upstream responses can be as large as a fetch allows; the frame cap is int32.
_MAX_RESPONSE_BYTES = 2**31 - 1
_READ_CHUNK = 1 << 20


class UpstreamError(ClientMetricsError):
    """The upstream broker could not be reached or went away."""


class UpstreamLink:
    """A pipelined request/response channel to one upstream broker."""

    def __init__(self, address: Address, connect_timeout_s: float) -> None:
        self.address = address
        self._timeout = connect_timeout_s
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._pending: deque[tuple[int, asyncio.Future[bytes]]] = deque()
        self._injected_ids = itertools.count(-2, -1)  # clients count up from 0
        self._failure: UpstreamError | None = None
        self.closed = asyncio.Event()

    async def connect(self) -> None:
        """Open the connection; raises ``UpstreamError`` if the broker cannot be reached."""
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.address.host, self.address.port), self._timeout
            )
        except (TimeoutError, OSError) as exc:
            raise UpstreamError(f"cannot connect to upstream {self.address}: {exc}") from exc
        self._writer = writer
        self._reader_task = asyncio.create_task(self._read_loop(reader))

    def send(self, frame: bytes, *, expect_response: bool = True) -> asyncio.Future[bytes] | None:
        """Write a request frame (no size prefix); the future gets the response frame."""
        if self._failure is not None:
            raise self._failure
        assert self._writer is not None, "send before connect"
        self._writer.write(_SIZE.pack(len(frame)))
        self._writer.write(frame)
        if not expect_response:
            return None
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        (correlation_id,) = _CORRELATION.unpack_from(frame, 4)
        self._pending.append((correlation_id, future))
        return future

    def inject(self, frame_without_id: bytes) -> asyncio.Future[bytes]:
        """Send a gateway-made request; its correlation id (bytes 4-8) is overwritten."""
        correlation_id = next(self._injected_ids)
        frame = frame_without_id[:4] + _CORRELATION.pack(correlation_id) + frame_without_id[8:]
        future = self.send(frame)
        assert future is not None
        return future

    async def drain(self) -> None:
        """Wait while the upstream socket's send buffer is full (back-pressure)."""
        if self._writer is not None and self._failure is None:
            try:
                await self._writer.drain()
            except ConnectionError as exc:
                self._fail(UpstreamError(f"upstream {self.address} went away: {exc}"))

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        decoder = FrameDecoder(_MAX_RESPONSE_BYTES)
        reason = "closed by upstream"
        try:
            while True:
                data = await reader.read(_READ_CHUNK)
                if not data:
                    break
                for frame in decoder.feed(data):
                    self._resolve(frame)
        except (ConnectionError, ProtocolError) as exc:
            reason = str(exc)
        self._fail(UpstreamError(f"upstream {self.address}: {reason}"))

    def _resolve(self, frame: bytes) -> None:
        if not self._pending:
            raise ProtocolError("upstream sent a response to no request")
        expected, future = self._pending.popleft()
        (correlation_id,) = _CORRELATION.unpack_from(frame, 0)
        if correlation_id != expected:
            raise ProtocolError(
                f"upstream answered correlation id {correlation_id}, expected {expected}"
            )
        if not future.done():
            future.set_result(frame)

    def _fail(self, error: UpstreamError) -> None:
        if self._failure is None:
            self._failure = error
            log.debug("upstream_link_closed", upstream=str(self.address), reason=str(error))
        while self._pending:
            _, future = self._pending.popleft()
            if not future.done():
                future.set_exception(error)
        self.closed.set()
        if self._writer is not None:
            self._writer.close()

    async def close(self) -> None:
        """Close the connection and fail what is still pending."""
        task = self._reader_task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._fail(UpstreamError(f"upstream link to {self.address} closed"))
        if self._writer is not None:
            with contextlib.suppress(ConnectionError, OSError):
                await self._writer.wait_closed()
