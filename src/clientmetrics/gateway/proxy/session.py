"""One client connection in proxy mode: pipelined forwarding, ordered responses.

Unlike the standalone connection (one request at a time), a proxy connection
must keep a client's pipeline full: librdkafka keeps many Produce requests in
flight, and waiting for each upstream answer before reading the next request
would cap throughput at one request per round trip. So the reader forwards
each frame at once and queues a *slot* for its response; a writer task
resolves the slots in request order. The queue is bounded: a client that
outruns its broker stops being read (back-pressure), nothing piles up.

Requests nobody claims pass through undecoded, header and correlation id
intact. The KIP-1313 header rules apply to every request, forwarded or not.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import struct
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any

import structlog

from clientmetrics.gateway.config import Address
from clientmetrics.gateway.connection import ConnectionState
from clientmetrics.gateway.proxy.cluster_map import ClusterMap
from clientmetrics.gateway.proxy.configs import Slot
from clientmetrics.gateway.proxy.rewrite import rewriter_for
from clientmetrics.gateway.proxy.stream import FrameProtocol
from clientmetrics.gateway.proxy.upstream import UpstreamError, UpstreamLink
from clientmetrics.wire import (
    ErrorCode,
    ProtocolError,
    RequestHeader,
    UnsupportedApi,
    decode_request,
    error_response,
    parse_request_header,
)

log = structlog.get_logger("clientmetrics.gateway.proxy")

#: A proxy handler: answers a request itself and/or through the upstream link.
ProxyHandler = Callable[[ConnectionState, RequestHeader, bytes, int, UpstreamLink], Awaitable[Slot]]

PRODUCE, API_VERSIONS = 0, 18
MAX_IN_FLIGHT = 1024
_INT16 = struct.Struct(">h")
# Own range: the standalone connection counter is private to gateway.connection.
_connection_ids = itertools.count(1_000_000_000)


def expects_response(header: RequestHeader, frame: bytes | bytearray, offset: int) -> bool:
    """False only for Produce with acks=0, which Kafka never answers."""
    if header.api_key != PRODUCE:
        return True
    if header.api_version >= 3:  # transactional_id comes first
        if header.api_version >= 9:  # compact nullable string: uvarint length + 1
            length = shift = 0
            while True:
                byte = frame[offset]
                offset += 1
                length |= (byte & 0x7F) << shift
                if not byte & 0x80:
                    break
                shift += 7
            offset += max(length - 1, 0)
        else:
            (length,) = _INT16.unpack_from(frame, offset)
            offset += 2 + max(length, 0)
    (acks,) = _INT16.unpack_from(frame, offset)
    return bool(acks != 0)


class ProxySession:
    """Serves one client connection on a gateway port standing for one upstream broker."""

    def __init__(
        self,
        node_id: int,
        upstream: Callable[[], Awaitable[Sequence[Address]]],
        handlers: Mapping[int, ProxyHandler],
        cluster: ClusterMap,
        *,
        max_request_bytes: int,
        connect_timeout_s: float,
        spawn: Callable[[Coroutine[Any, Any, None]], object],
        on_open: Callable[[ConnectionState], None],
        on_close: Callable[[ConnectionState], None],
    ) -> None:
        self._node_id = node_id
        self._upstream = upstream
        self._handlers = handlers
        self._cluster = cluster
        self._timeout = connect_timeout_s
        self._spawn = spawn
        self._on_open = on_open
        self._on_close = on_close
        self._inbox: asyncio.Queue[bytes | bytearray | None] = asyncio.Queue()
        self._reading_paused = False
        self._slots: asyncio.Queue[Slot] = asyncio.Queue(MAX_IN_FLIGHT)
        self._link: UpstreamLink | None = None
        self.conn = ConnectionState(0, "", 0, node_id)
        self.protocol = FrameProtocol(
            max_request_bytes, self._frame_in, self._lost, on_made=self._made
        )

    def _made(self, transport: asyncio.Transport) -> None:
        peer = transport.get_extra_info("peername") or ("", 0)
        self.conn = ConnectionState(
            next(_connection_ids), str(peer[0]), int(peer[1]), self._node_id
        )
        self._on_open(self.conn)
        self._spawn(self.run())

    def _frame_in(self, frame: bytes | bytearray) -> None:
        self._inbox.put_nowait(frame)
        if self._inbox.qsize() >= MAX_IN_FLIGHT and not self._reading_paused:
            self._reading_paused = True  # back-pressure: stop reading the client
            self.protocol.pause_reading()

    def _lost(self, exc: Exception | None) -> None:
        self._inbox.put_nowait(None)

    async def run(self) -> None:
        """Forward and answer until the client or its upstream goes away."""
        output = asyncio.create_task(self._write_loop())
        # The upstream going away, or a response that cannot be delivered, closes
        # the client's connection, as a broker's failure would.
        output.add_done_callback(lambda _task: self.protocol.abort())
        watch: asyncio.Task[None] | None = None
        cid = self.conn.connection_id
        try:
            self._link = await self._connect(await self._upstream())
            watch = asyncio.create_task(self._abort_when_closed(self._link))
            await self._read_loop()
        except UpstreamError as exc:
            log.info("client_closed_upstream_unavailable", connection=cid, error=str(exc))
        except ProtocolError as exc:
            log.warning("connection_closed_on_protocol_error", connection=cid, error=str(exc))
        finally:
            for task in (output, watch):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task
            if self._link is not None:
                await self._link.close()
            self.protocol.close()
            self._on_close(self.conn)

    async def _connect(self, candidates: Sequence[Address]) -> UpstreamLink:
        # Several bootstrap brokers: one being down must not stop new clients.
        failure = UpstreamError("no upstream address")
        for address in candidates:
            link = UpstreamLink(address, self._timeout)
            try:
                await link.connect()
            except UpstreamError as exc:
                failure = exc
                continue
            return link
        raise failure

    async def _abort_when_closed(self, link: UpstreamLink) -> None:
        await link.closed.wait()
        self.protocol.abort()

    async def _read_loop(self) -> None:
        assert self._link is not None
        inbox = self._inbox
        while True:
            frame = await inbox.get()
            if frame is None:
                return
            if self._reading_paused and inbox.qsize() < MAX_IN_FLIGHT // 2:
                self._reading_paused = False
                self.protocol.resume_reading()
            await self._slots.put(await self._handle(frame))
            if inbox.empty():
                await self._link.drain()

    async def _handle(self, frame: bytes | bytearray) -> Slot:
        assert self._link is not None
        try:
            header, offset = parse_request_header(frame)  # type: ignore[arg-type]  # reads bytearray too
        except UnsupportedApi as exc:
            raise ProtocolError(str(exc)) from exc
        admitted = self.conn.admit(header)
        if admitted is not ErrorCode.NONE:
            log.info("request_rejected", reason="kip1313_instance_id", api_key=header.api_key)
            try:
                return error_response(header, admitted)
            except UnsupportedApi as exc:  # a forwarded api we cannot shape: close, as Kafka does
                raise ProtocolError(f"KIP-1313 violation on api key {header.api_key}") from exc
        handler = self._handlers.get(header.api_key)
        if handler is not None:
            return await self._answer(handler, header, frame, offset)
        if header.api_key == API_VERSIONS:
            self._record_software(frame)
        try:
            wanted = expects_response(header, frame, offset)
        except (IndexError, struct.error) as exc:
            raise ProtocolError(f"truncated Produce request: {exc}") from exc
        future = self._link.send(frame, expect_response=wanted)
        if future is None:
            return b""
        return (future, rewriter_for(header, self._cluster))

    async def _answer(
        self, handler: ProxyHandler, header: RequestHeader, frame: bytes | bytearray, offset: int
    ) -> Slot:
        assert self._link is not None
        # Large frames arrive as bytearray (zero-copy receive); decoders want bytes.
        data = frame if isinstance(frame, bytes) else bytes(frame)
        try:
            return await handler(self.conn, header, data, offset, self._link)
        except (ProtocolError, UpstreamError):
            raise
        except Exception:  # a bug in one handler must not take the connection down
            log.exception("handler_failed", api_key=header.api_key, version=header.api_version)
            return error_response(header, ErrorCode.UNKNOWN_SERVER_ERROR)

    def _record_software(self, frame: bytes | bytearray) -> None:
        with contextlib.suppress(ProtocolError, UnsupportedApi):
            _, body = decode_request(bytes(frame))
            name = getattr(body, "client_software_name", None)
            if name is not None:
                self.conn.set_software(str(name), str(getattr(body, "client_software_version", "")))

    async def _write_loop(self) -> None:
        try:
            await self._write_responses()
        except (asyncio.CancelledError, UpstreamError):
            raise
        except Exception as exc:
            # E.g. an upstream response the proxy cannot walk: the client is disconnected.
            log.warning(
                "response_not_delivered", connection=self.conn.connection_id, error=repr(exc)
            )
            raise

    async def _write_responses(self) -> None:
        protocol = self.protocol
        while True:
            slot = await self._slots.get()
            if isinstance(slot, bytes):
                if slot and protocol.transport is not None:
                    protocol.transport.write(slot)
            elif isinstance(slot, asyncio.Task):
                data = await slot
                if data and protocol.transport is not None:
                    protocol.transport.write(data)
            else:
                future, rewrite = slot
                frame = await future
                if rewrite is not None:
                    frame = await rewrite(frame)
                protocol.write_frame(frame)
            await protocol.drain()
