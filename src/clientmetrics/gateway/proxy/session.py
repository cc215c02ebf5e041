"""One client connection in proxy mode: the connection core with an upstream.

The core (``wire.server.ServerConnection``) frames, admits (KIP-1313),
authenticates and orders responses exactly as in standalone mode; here its
``Forward`` results go to the upstream broker. A proxy connection must keep a
client's pipeline full (librdkafka keeps many Produce requests in flight), so
each frame is forwarded as soon as it is complete and the core writes the
responses back in request order as they arrive.

Frames nobody claims are forwarded from the protocol callback itself, without a
task switch, and answered from the upstream's callback the same way: the common
case costs no scheduling at all. Requests the gateway answers (or splits) go
through one task per connection that handles them in order; frames behind such a
request wait for it. When the core says so (too many requests in flight, or the
request budget spent) the client is not read (back-pressure), and a client that
does not read its responses stops the responses: nothing piles up without bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any

import structlog

from clientmetrics.gateway.config import Address
from clientmetrics.gateway.connection import ConnectionState
from clientmetrics.gateway.limits import ConnectionLimits, now_ms
from clientmetrics.gateway.proxy.cluster_map import ClusterMap
from clientmetrics.gateway.proxy.configs import Slot
from clientmetrics.gateway.proxy.rewrite import Rewriter, rewriter_for, unreadable_api_versions
from clientmetrics.gateway.proxy.stream import FrameProtocol
from clientmetrics.gateway.proxy.upstream import UpstreamError, UpstreamLink
from clientmetrics.gateway.upstream_security import UpstreamTls
from clientmetrics.security.base import ANONYMOUS
from clientmetrics.wire import (
    SERVED,
    ApiKey,
    ErrorCode,
    ProtocolError,
    RequestHeader,
    UnsupportedApi,
    decode_request,
    error_response,
)
from clientmetrics.wire.auth import AuthState
from clientmetrics.wire.client_software import software_valid
from clientmetrics.wire.sasl import authenticate_error_code, expects_response
from clientmetrics.wire.server import (
    NO_RESPONSE,
    Close,
    CloseReason,
    Forward,
    Request,
    Respond,
    Result,
    Serve,
    ServerConnection,
    Verify,
)

log = structlog.get_logger("clientmetrics.gateway.proxy")

#: A proxy handler: answers a request itself and/or through the upstream link.
ProxyHandler = Callable[[ConnectionState, RequestHeader, bytes, int, UpstreamLink], Awaitable[Slot]]

# Own range: the standalone connection counter is private to gateway.connection.
_connection_ids = itertools.count(1_000_000_000)

__all__ = ["ProxyHandler", "ProxySession", "expects_response"]


class ProxySession:
    """Serves one client connection on a gateway port standing for one upstream broker."""

    def __init__(
        self,
        node_id: int,
        upstream: Callable[[], Awaitable[Sequence[Address]]],
        handlers: Mapping[int, ProxyHandler],
        cluster: ClusterMap,
        *,
        limits: ConnectionLimits,
        connect_timeout_s: float,
        upstream_tls: UpstreamTls | None = None,
        spawn: Callable[[Coroutine[Any, Any, None]], object],
        on_open: Callable[[ConnectionState], None],
        on_close: Callable[[ConnectionState], None],
        principal: str = ANONYMOUS,
    ) -> None:
        self._node_id = node_id
        self._upstream = upstream
        self._handlers = handlers
        self._cluster = cluster
        self._limits = limits
        self._timeout = connect_timeout_s
        self._upstream_tls = upstream_tls
        self._upstream_tls = upstream_tls
        self._spawn = spawn
        self._on_open = on_open
        self._on_close = on_close
        self._inbox: deque[bytes | bytearray | Serve | Verify] = deque()
        self._wake = asyncio.Event()
        self._busy = True  # until the upstream link is up, frames wait in the inbox
        self._lost = False
        self._paused = False
        self._holding = False  # a failed authentication's answer waits (see _close)
        self._accepted = False
        self._link: UpstreamLink | None = None
        self.core = ServerConnection(
            served={key: SERVED.get(key, (0, 0)) for key in handlers},
            forwarding=True,
            policy=limits.policy,
            principal=principal,
            max_request_bytes=limits.max_request_bytes,
            budget=limits.budget,
            idle_ms=limits.idle_ms,
            now_ms=now_ms(),
        )
        self.conn = ConnectionState(0, "", 0, node_id, self.core)
        self.protocol = FrameProtocol(
            limits.max_request_bytes,
            self._frame_in,
            self._connection_lost,
            on_made=self._made,
            on_writable=self._flush,
            reserve=self.core.reserve_frame,
        )
        self.core.on_readable = self.protocol.retry_reserve

    # -- protocol callbacks -------------------------------------------------
    def _made(self, transport: asyncio.Transport) -> None:
        peer = transport.get_extra_info("peername") or ("", 0)
        host = str(peer[0])
        if not self._limits.accept(host):
            self.protocol.abort()
            return
        self._accepted = True
        self.conn = ConnectionState(
            next(_connection_ids), host, int(peer[1]), self._node_id, self.core
        )
        self.conn.close = self.protocol.close
        self._on_open(self.conn)
        self._spawn(self.run())

    def _frame_in(self, frame: bytes | bytearray) -> None:
        if self.core.closed:
            return  # frames read before the close took effect
        item: bytes | bytearray | Serve | Verify = frame
        if not self._busy and not self._inbox:
            result = self.core.receive_frame(frame, now_ms())
            if type(result) is Forward:  # the hot path, before any other dispatch
                self._forward(result.request, result.sasl_verdict)
                return
            if not isinstance(result, Serve | Verify):
                self._apply(result)
                return
            item = result  # the task runs the handler or the check; frames behind it wait
        self._inbox.append(item)
        self._wake.set()
        self._throttle()

    def _connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self.core.connection_lost()
        self._wake.set()

    # -- results of the core ---------------------------------------------------
    def _apply(self, result: Result) -> None:
        """Every result but ``Serve`` and ``Verify`` (which the connection's task awaits)."""
        match result:
            case Forward(request, verdict):
                self._forward(request, verdict)
            case Respond(error=code, authenticated=authenticated):
                if authenticated:
                    self._limits.authenticated(self.conn.peer_host, self.conn.user)
                if code is ErrorCode.INVALID_REQUEST:
                    self._limits.warn(
                        self.conn.peer_host,
                        "request_rejected",
                        reason="kip1313_instance_id",
                        connection=self.conn.connection_id,
                    )
                self._flush()
            case Close():
                self._close(result)
            case Serve(request):
                raise AssertionError(f"api key {request.header.api_key} must be served")
            case Verify():
                raise AssertionError("a SASL check must be awaited")

    def _forward(self, request: Request, verdict: bool) -> None:
        link = self._link
        assert link is not None
        header = request.header
        if unreadable_api_versions(header):
            # As Kafka answers it (KIP-511): the ApiVersions range alone, so the client
            # (franz-go checks) asks again at the highest version in it.
            only: dict[int, tuple[int, int]] = {ApiKey.API_VERSIONS: SERVED[ApiKey.API_VERSIONS]}
            answer = error_response(header, ErrorCode.UNSUPPORTED_VERSION, api_keys=only)
            self.core.complete(request.id, answer)
            self._flush()
            return
        if header.api_key == ApiKey.API_VERSIONS and not self._record_software(request.frame):
            # Kafka answers this itself; answering here keeps upstreams that do not
            # validate from letting arbitrary text into the landed data.
            self.core.complete(request.id, error_response(header, ErrorCode.INVALID_REQUEST))
            self._flush()
            return
        try:
            future = link.send(request.frame, expect_response=request.id != NO_RESPONSE)
        except UpstreamError:
            self.protocol.abort()  # the link failed; run() is winding down
            return
        if future is None:
            return
        rewrite = rewriter_for(header, self._cluster)
        future.add_done_callback(
            functools.partial(self._upstream_answered, request, rewrite, verdict)
        )
        self._throttle()

    def _upstream_answered(
        self,
        request: Request,
        rewrite: Rewriter | None,
        verdict: bool,
        future: asyncio.Future[bytes],
    ) -> None:
        if future.cancelled() or future.exception() is not None:
            self._undeliverable(future)
            return
        data = future.result()
        close = None
        try:
            if verdict:
                code = authenticate_error_code(request.header.api_version, data)
                close = self.core.upstream_authenticated(code)
                if close is None and self.core.state is AuthState.READY:
                    self._limits.authenticated(self.conn.peer_host, self.conn.user)
            if rewrite is not None:
                rewritten = rewrite(data)
                if not isinstance(rewritten, bytes | bytearray):  # must first learn a node
                    task = asyncio.ensure_future(rewritten)
                    task.add_done_callback(functools.partial(self._rewritten, request))
                    return
                data = rewritten
        except ProtocolError as exc:
            self._undeliverable(exc)
            return
        self.core.complete(request.id, data, framed=False)
        if close is not None:
            self._close(close)  # writes the answer, after the failure delay
            return
        self._flush()

    def _rewritten(self, request: Request, task: asyncio.Future[bytes]) -> None:
        if task.cancelled() or task.exception() is not None:
            self._undeliverable(task)
            return
        self.core.complete(request.id, task.result(), framed=False)
        self._flush()

    def _throttle(self) -> None:
        if not self._paused and (self.core.should_pause() or len(self._inbox) >= 1024):
            self._paused = True  # back-pressure: stop reading the client
            self.protocol.pause_reading()

    # -- responses, in request order ------------------------------------------
    def _flush(self) -> None:
        protocol = self.protocol
        transport = protocol.transport
        if self._holding or not protocol.writable or transport is None or transport.is_closing():
            return  # resume_writing calls back: the client reads its responses slowly
        chunks = self.core.data_to_send()
        if chunks:
            transport.writelines(chunks)
        if self._paused and self.core.may_resume() and len(self._inbox) < 512:
            self._paused = False
            protocol.resume_reading()

    def _undeliverable(self, cause: object) -> None:
        error = (
            cause.exception()
            if isinstance(cause, asyncio.Future) and not cause.cancelled()
            else cause
        )
        if not isinstance(error, UpstreamError):
            self._limits.warn(
                self.conn.peer_host,
                "response_not_delivered",
                connection=self.conn.connection_id,
                error=repr(error),
            )
        self.protocol.abort()

    def _close(self, close: Close, *, held: bool = False) -> None:
        """Write what is ready and close. A failed authentication is answered only
        after the source's delay (growing with repeated failures), without blocking
        anything else; the client is not read meanwhile."""
        if close.reason is CloseReason.AUTHENTICATION_FAILED and not held:
            claimed = self.conn.core.sasl.claimed
            delay = self._limits.authentication_failed(self.conn.peer_host, claimed)
            if delay > 0:
                self._holding = True
                self.protocol.pause_reading()
                asyncio.get_running_loop().call_later(delay, self._release_close, close)
                return
        self._flush()
        conn = self.conn
        fields: dict[str, Any] = {"connection": conn.connection_id, "reason": close.reason.value}
        if close.reason is CloseReason.AUTHENTICATION_FAILED:
            fields["user"] = conn.core.sasl.claimed  # the audit trail: the user tried
        if close.reason in (CloseReason.AUTHENTICATION_FAILED, CloseReason.IDLE):
            log.info("connection_closed", peer=conn.peer_host, error=close.detail, **fields)
            self.protocol.close()
        else:
            self._limits.warn(
                conn.peer_host, "connection_closed_on_protocol_error", error=close.detail, **fields
            )
            self.protocol.abort()

    def _release_close(self, close: Close) -> None:
        self._holding = False
        self._close(close, held=True)

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
        finally:
            if watch is not None:
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch
            if self._link is not None:
                await self._link.close()
            self.core.connection_lost()
            self.protocol.close()
            if self._accepted:
                self._limits.release(self.conn.peer_host)
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
        if not self._holding:  # else the held answer is written, then the client closed
            self.protocol.abort()

    async def _handle_inbox(self) -> None:
        inbox = self._inbox
        while not self._lost:
            while inbox and not self.core.closed:
                item = inbox.popleft()
                if isinstance(item, Serve | Verify):
                    await self._handle(item)
                else:
                    await self._handle(self.core.receive_frame(item, now_ms()))
                if self._link is not None:
                    await self._link.drain()
            inbox.clear()
            self._busy = False  # the protocol callback may forward directly again
            self._wake.clear()
            await self._wake.wait()
            self._busy = True

    async def _handle(self, result: Result) -> None:
        match result:
            case Serve(request):
                await self._serve(request)
            case Verify(derive=derive):
                # Frames behind the login wait in the inbox; the client is not read.
                self._throttle()
                derived = await self._limits.verifier.run(derive, self.conn.peer_host)
                for held in self.core.verified(derived, now_ms()):
                    await self._handle(held)
            case _:
                self._apply(result)

    async def _serve(self, request: Request) -> None:
        """Run the gateway's own handler for ``request``; its answer joins the order."""
        assert self._link is not None
        header = request.header
        handler = self._handlers[header.api_key]
        # Large frames arrive as bytearray (zero-copy receive); decoders want bytes.
        frame = request.frame if isinstance(request.frame, bytes) else bytes(request.frame)
        try:
            slot = await handler(self.conn, header, frame, request.offset, self._link)
        except UpstreamError:
            raise
        except Exception as exc:  # the core's policy decides; a bug must not end the gateway
            if not isinstance(exc, ProtocolError | UnsupportedApi):
                self._limits.warn(
                    self.conn.peer_host,
                    "handler_failed",
                    level="error",
                    api_key=header.api_key,
                    version=header.api_version,
                    exc_info=exc,
                )
            self._apply(self.core.fail(request, exc))
            return
        if isinstance(slot, bytes):
            self.core.complete(request.id, slot)
            self._flush()
        elif isinstance(slot, asyncio.Task):
            slot.add_done_callback(functools.partial(self._local_answered, request))
        else:
            future, rewrite = slot
            future.add_done_callback(
                functools.partial(self._upstream_answered, request, rewrite, False)
            )

    def _local_answered(self, request: Request, task: asyncio.Task[bytes]) -> None:
        if task.cancelled():
            return
        error = task.exception()
        if error is None:
            self.core.complete(request.id, task.result())
            self._flush()
        elif isinstance(error, UpstreamError):
            self.protocol.abort()
        else:
            self._apply(self.core.fail(request, error))

    def _record_software(self, frame: bytes | bytearray) -> bool:
        """Record ApiVersions v3+ software name and version; False if Kafka rejects them."""
        try:
            _, body = decode_request(bytes(frame))
        except (ProtocolError, UnsupportedApi):
            return True  # upstream answers what it cannot decode either
        name = getattr(body, "client_software_name", None)
        version = getattr(body, "client_software_version", None)
        if not software_valid(name, version):
            return False
        if name is not None:
            self.conn.set_software(str(name), str(version or ""))
        return True
