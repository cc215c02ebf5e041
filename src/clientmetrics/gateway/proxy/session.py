"""One client connection in proxy mode: pipelined forwarding, ordered responses.

Unlike the standalone connection (one request at a time), a proxy connection
must keep a client's pipeline full: librdkafka keeps many Produce requests in
flight, and waiting for each upstream answer before reading the next request
would cap throughput at one request per round trip. So each frame is forwarded
as soon as it is complete and a *pending* entry is queued for its response;
entries are written to the client in request order as their responses arrive.

Frames nobody claims are forwarded from the protocol callback itself, without
a task switch, and answered from the upstream's callback the same way: the
common case costs no scheduling at all. Requests the gateway answers (or
splits) go through one task per connection that handles them in order; frames
behind such a request wait for it, so order is never broken. At most
``MAX_IN_FLIGHT`` requests are pending: beyond that the client is not read
(back-pressure), and a client that does not read its responses stops the
responses, nothing piles up without bound.

The KIP-1313 header rules apply to every request, forwarded or not.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import struct
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any

import structlog

from clientmetrics.gateway.config import Address
from clientmetrics.gateway.connection import ConnectionState
from clientmetrics.gateway.proxy.cluster_map import ClusterMap
from clientmetrics.gateway.proxy.configs import Slot
from clientmetrics.gateway.proxy.rewrite import Rewriter, rewriter_for
from clientmetrics.gateway.proxy.stream import FrameProtocol
from clientmetrics.gateway.proxy.upstream import UpstreamError, UpstreamLink
from clientmetrics.gateway.upstream_security import UpstreamTls
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


class _Pending:
    """A response owed to the client, in request order."""

    __slots__ = ("framed", "future", "rewrite")

    def __init__(
        self, future: asyncio.Future[Any], framed: bool, rewrite: Rewriter | None = None
    ) -> None:
        self.future = future
        self.framed = framed  # local answers carry their size prefix already
        self.rewrite = rewrite


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
        upstream_tls: UpstreamTls | None = None,
        spawn: Callable[[Coroutine[Any, Any, None]], object],
        on_open: Callable[[ConnectionState], None],
        on_close: Callable[[ConnectionState], None],
    ) -> None:
        self._node_id = node_id
        self._upstream = upstream
        self._handlers = handlers
        self._cluster = cluster
        self._timeout = connect_timeout_s
        self._upstream_tls = upstream_tls
        self._spawn = spawn
        self._on_open = on_open
        self._on_close = on_close
        self._inbox: deque[bytes | bytearray] = deque()
        self._wake = asyncio.Event()
        self._busy = True  # until the upstream link is up, frames wait in the inbox
        self._lost = False
        self._pending: deque[_Pending] = deque()
        self._paused = False
        self._link: UpstreamLink | None = None
        self.conn = ConnectionState(0, "", 0, node_id)
        self.protocol = FrameProtocol(
            max_request_bytes,
            self._frame_in,
            self._connection_lost,
            on_made=self._made,
            on_writable=self._pump,
        )

    # -- protocol callbacks -------------------------------------------------
    def _made(self, transport: asyncio.Transport) -> None:
        peer = transport.get_extra_info("peername") or ("", 0)
        cid = next(_connection_ids)
        self.conn = ConnectionState(cid, str(peer[0]), int(peer[1]), self._node_id)
        self._on_open(self.conn)
        self._spawn(self.run())

    def _frame_in(self, frame: bytes | bytearray) -> None:
        if not self._busy and not self._inbox:
            try:
                if self._forward_now(frame):
                    return
            except ProtocolError as exc:
                self._protocol_error(exc)
                return
            except UpstreamError:
                self.protocol.abort()  # the link failed; run() is winding down
                return
        self._inbox.append(frame)
        self._wake.set()
        self._throttle()

    def _connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._wake.set()

    # -- forwarding -----------------------------------------------------------
    def _forward_now(self, frame: bytes | bytearray) -> bool:
        """Forward an unclaimed frame synchronously; False if the task must handle it."""
        header, offset = self._parse(frame)
        if header.api_key in self._handlers:
            return False
        admitted = self.conn.admit(header)
        if admitted is not ErrorCode.NONE:
            self._push_ready(self._rejected(header, admitted))
        else:
            self._forward(header, frame, offset)
        return True

    @staticmethod
    def _parse(frame: bytes | bytearray) -> tuple[RequestHeader, int]:
        try:
            return parse_request_header(frame)  # type: ignore[arg-type]  # reads bytearray too
        except UnsupportedApi as exc:
            raise ProtocolError(str(exc)) from exc

    def _forward(self, header: RequestHeader, frame: bytes | bytearray, offset: int) -> None:
        assert self._link is not None
        if header.api_key == API_VERSIONS:
            self._record_software(frame)
        try:
            wanted = expects_response(header, frame, offset)
        except (IndexError, struct.error) as exc:
            raise ProtocolError(f"truncated Produce request: {exc}") from exc
        future = self._link.send(frame, expect_response=wanted)
        if future is not None:
            self._push(_Pending(future, False, rewriter_for(header, self._cluster)))

    @staticmethod
    def _rejected(header: RequestHeader, code: ErrorCode) -> bytes:
        log.info("request_rejected", reason="kip1313_instance_id", api_key=header.api_key)
        try:
            return error_response(header, code)
        except UnsupportedApi as exc:  # a forwarded api we cannot shape: close, as Kafka does
            raise ProtocolError(f"KIP-1313 violation on api key {header.api_key}") from exc

    def _push(self, pending: _Pending) -> None:
        self._pending.append(pending)
        pending.future.add_done_callback(self._pump)
        self._throttle()

    def _push_ready(self, data: bytes) -> None:
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        future.set_result(data)
        self._push(_Pending(future, True))

    def _throttle(self) -> None:
        if not self._paused and len(self._pending) + len(self._inbox) >= MAX_IN_FLIGHT:
            self._paused = True  # back-pressure: stop reading the client
            self.protocol.pause_reading()

    # -- responses, in request order ------------------------------------------
    def _pump(self, _done: object = None) -> None:
        pending = self._pending
        protocol = self.protocol
        while pending and pending[0].future.done() and protocol.writable:
            head = pending[0]
            future = head.future
            if future.cancelled() or future.exception() is not None:
                self._undeliverable(future)
                return
            data = future.result()
            if head.rewrite is not None:
                try:
                    data = head.rewrite(data)
                except ProtocolError as exc:
                    self._undeliverable(exc)
                    return
                head.rewrite = None
                if not isinstance(data, (bytes, bytearray)):  # must first learn a node
                    head.future = asyncio.ensure_future(data)
                    head.future.add_done_callback(self._pump)
                    return
            pending.popleft()
            if head.framed:
                if data and protocol.transport is not None:
                    protocol.transport.write(data)
            else:
                protocol.write_frame(data)
        if self._paused and len(pending) + len(self._inbox) < MAX_IN_FLIGHT // 2:
            self._paused = False
            protocol.resume_reading()

    def _undeliverable(self, cause: object) -> None:
        error = (
            cause.exception()
            if isinstance(cause, asyncio.Future) and not cause.cancelled()
            else cause
        )
        if not isinstance(error, UpstreamError):
            log.warning(
                "response_not_delivered", connection=self.conn.connection_id, error=repr(error)
            )
        self.protocol.abort()

    def _protocol_error(self, exc: ProtocolError) -> None:
        log.warning(
            "connection_closed_on_protocol_error",
            connection=self.conn.connection_id,
            error=str(exc),
        )
        self.protocol.abort()

    # -- the connection's task ------------------------------------------------
    async def run(self) -> None:
        """Connect upstream, then handle the frames the fast path leaves, until closed."""
        watch: asyncio.Task[None] | None = None
        cid = self.conn.connection_id
        try:
            self._link = await self._connect(await self._upstream())
            watch = asyncio.create_task(self._abort_when_closed(self._link))
            await self._handle_inbox()
        except UpstreamError as exc:
            log.info("client_closed_upstream_unavailable", connection=cid, error=str(exc))
        except ProtocolError as exc:
            self._protocol_error(exc)
        finally:
            if watch is not None:
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch
            for pending in self._pending:
                pending.future.remove_done_callback(self._pump)
                if isinstance(pending.future, asyncio.Task):
                    pending.future.cancel()
            self._pending.clear()
            if self._link is not None:
                await self._link.close()
            self.protocol.close()
            self._on_close(self.conn)

    async def _connect(self, candidates: Sequence[Address]) -> UpstreamLink:
        # Several bootstrap brokers: one being down must not stop new clients.
        failure = UpstreamError("no upstream address")
        for address in candidates:
            link = UpstreamLink(address, self._timeout, tls=self._upstream_tls)
            try:
                await link.connect()
            except UpstreamError as exc:
                failure = exc
                continue
            return link
        raise failure

    async def _abort_when_closed(self, link: UpstreamLink) -> None:
        # A broker going away closes its clients' connections, idle ones too.
        await link.closed.wait()
        self.protocol.abort()

    async def _handle_inbox(self) -> None:
        inbox = self._inbox
        while not self._lost:
            while inbox:
                await self._handle(inbox.popleft())
                if self._link is not None:
                    await self._link.drain()
            self._busy = False  # the protocol callback may forward directly again
            self._wake.clear()
            await self._wake.wait()
            self._busy = True

    async def _handle(self, frame: bytes | bytearray) -> None:
        header, offset = self._parse(frame)
        admitted = self.conn.admit(header)
        if admitted is not ErrorCode.NONE:
            self._push_ready(self._rejected(header, admitted))
            return
        handler = self._handlers.get(header.api_key)
        if handler is None:
            self._forward(header, frame, offset)
            return
        slot = await self._answer(handler, header, frame, offset)
        if isinstance(slot, bytes):
            self._push_ready(slot)
        elif isinstance(slot, asyncio.Task):
            self._push(_Pending(slot, True))
        else:
            future, rewrite = slot
            self._push(_Pending(future, False, rewrite))

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
