"""The one connection driver, for both modes: a ``wire.server`` core over a framed transport.

The core decides (framing, KIP-1313, authentication, response order); the
driver acts on its results. Proxy mode gives it an ``Upstream`` (the broker the
client's port stands for); standalone gives it none, and the core then never
says ``Forward``.

* ``Forward``: written to the upstream from the transport's callback, without a
  task switch (the proxy's hot path); the answer is rewritten where it names
  brokers and handed to the core from the upstream's callback.
* ``Serve``: the handler runs on the connection's task, one request at a time
  in arrival order (frames behind it wait); its ``Reply`` is an answer now or
  later, a forward or a close.
* ``Verify``: SASL's costly check runs on the verifier's threads; the client is
  not read meanwhile.

Every connection policy lives here, once: the per-address limits (open
connections, new connections a second) and the TLS identity at accept,
back-pressure (the core says when to stop reading; a client that does not read
its responses stops them), the delay before a failed login is answered,
rate-limited logs of rejected requests, failed handlers and closes, and one
connection id counter.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections import deque
from collections.abc import Awaitable
from typing import Any

import structlog

from clientmetrics.gateway.config import Listener
from clientmetrics.gateway.handlers import ConnectionState, Services, Upstream
from clientmetrics.gateway.lifecycle import Event, Phase, advance
from clientmetrics.gateway.limits import now_ms
from clientmetrics.gateway.listeners import identify
from clientmetrics.gateway.transport import FrameProtocol
from clientmetrics.gateway.upstream import Rewriter, UpstreamError, UpstreamLoginFailed
from clientmetrics.security.throttle import claimed_name
from clientmetrics.wire import ProtocolError, UnsupportedApi
from clientmetrics.wire.auth import AuthState
from clientmetrics.wire.results import (
    NO_RESPONSE,
    Answer,
    AnswerLater,
    Close,
    CloseReason,
    Forward,
    Reply,
    Request,
    Respond,
    Result,
    Serve,
    Verify,
)
from clientmetrics.wire.sasl import ListenerPolicy, authenticate_error_code
from clientmetrics.wire.server import ServerConnection

__all__ = ["Connection"]

log = structlog.get_logger("clientmetrics.gateway")

_connection_ids = itertools.count(1)
#: Frames read ahead of the connection's task before the client is paused / resumed.
_INBOX_HIGH, _INBOX_LOW = 1024, 512
#: How long a closing connection may take to write the answers already under way.
_CLOSE_GRACE_S = 5.0
#: Closes that end a normal life, logged as information; the rest are rate-limited warnings.
_ORDINARY = frozenset(
    {CloseReason.AUTHENTICATION_FAILED, CloseReason.IDLE, CloseReason.SESSION_EXPIRED}
)


class Connection:
    """Drives one client connection; ``protocol`` is what the event loop's server runs."""

    def __init__(
        self,
        services: Services,
        listener: Listener,
        policy: ListenerPolicy,
        *,
        node_id: int,
        upstream: Upstream | None = None,
    ) -> None:
        limits = services.limits
        self._services = services
        self._limits = limits
        self._listener = listener
        self._upstream = upstream
        self.core = ServerConnection(
            served=services.served,
            forwarding=upstream is not None,
            advertised=services.advertised,
            policy=policy,
            max_request_bytes=limits.max_request_bytes,
            budget=limits.budget,
            idle_ms=limits.idle_ms,
            now_ms=now_ms(),
        )
        self.conn = ConnectionState(0, "", 0, node_id, self.core)
        self.protocol = FrameProtocol(
            self.core.framer,
            self._frame_in,
            self._lost,
            on_made=self._made,
            on_writable=self._flush,
        )
        #: Frames (and the core's results for them) waiting for the connection's task.
        self._inbox: deque[bytes | bytearray | Serve | Verify] = deque()
        self._wake = asyncio.Event()
        #: The one lifecycle state (gateway/lifecycle.py has its table).
        self._phase = Phase.STARTING
        #: Back-pressure: reading stopped until the core's pipeline and the inbox drain.
        self._paused = False
        #: Why the connection closes, once it does.
        self._closed: Close | None = None
        #: Answers under way (see ``_pending``): forwarded requests the upstream has not
        #: answered yet, by request id, and answers awaited (``AnswerLater``, rewrites).
        self._owed: set[int] = set()
        self._later: set[asyncio.Future[bytes]] = set()
        #: Aborts a closing connection that its grace (or the failed-login delay) outlived.
        self._deadline: asyncio.TimerHandle | None = None

    # -- transport callbacks ----------------------------------------------------
    def _made(self, transport: asyncio.Transport) -> None:
        peer = transport.get_extra_info("peername") or ("", 0)
        host = str(peer[0])
        identity = identify(self._listener, transport, self._services.tls)
        if identity is None or not self._limits.accept(host):
            transport.abort()
            return
        hold_s = self._limits.throttle(host)
        if hold_s > 0:  # too many new connections from there: unread, then closed
            self._on(Event.THROTTLED)
            self.conn = ConnectionState(0, host, 0, self.conn.node_id, self.core)
            self.protocol.pause_reading()
            asyncio.get_running_loop().call_later(hold_s, self.protocol.abort)
            return
        conn = ConnectionState(
            next(_connection_ids),
            host,
            int(peer[1]),
            self.conn.node_id,
            self.core,
            close=self.close,
        )
        identity.apply(conn)
        self.conn = conn
        self._services.on_open(conn)
        self._services.spawn(self._run())

    def _frame_in(self, frame: bytes | bytearray) -> None:
        if self.core.closed:
            return  # read before the close took effect
        item: bytes | bytearray | Serve | Verify = frame
        if self._phase is Phase.IDLE and not self._inbox:
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

    def _lost(self, exc: Exception | None) -> None:
        if self._phase is Phase.THROTTLED:  # throttled at accept: no task, nothing read
            self._on(Event.LOST)
            self._limits.release(self.conn.peer_host)
            return
        if isinstance(exc, ProtocolError):  # the framer refused the stream
            self.close(self.core.framing_failed(exc))
        self._on(Event.LOST)
        self.core.connection_lost()
        self._wake.set()

    def _on(self, event: Event) -> None:
        self._phase = advance(self._phase, event)

    @property
    def _pending(self) -> int:
        """Answers under way (upstream responses, ``AnswerLater``s): a close waits for them."""
        return len(self._owed) + len(self._later)

    def _upstream_failed(self) -> None:
        """The upstream link failed: its clients go at once (the task winds down; the
        client reconnects and finds the broker, or not)."""
        self.protocol.abort()

    # -- the core's results -----------------------------------------------------
    def _apply(self, result: Result | Reply) -> None:
        """Every result but ``Serve`` and ``Verify`` (which the connection's task awaits)."""
        match result:
            case Forward(request, verdict):
                self._forward(request, verdict)
            case Respond(authenticated=authenticated, rejected=rejected):
                if authenticated:
                    self._limits.authenticated(self.conn.peer_host, self.conn.user)
                if rejected is not None:
                    self._warn("request_rejected", reason=rejected)
                self._flush()
            case Close():
                self.close(result)
            case _:
                raise AssertionError(f"{result} must be awaited")

    def _forward(self, request: Request, verdict: bool) -> None:
        link, upstream = self.conn.upstream, self._upstream
        if link is None or upstream is None:  # a standalone handler cannot forward
            self._failed(
                request, UnsupportedApi(request.header.api_key, request.header.api_version)
            )
            return
        refusal = upstream.refuse(self.conn, request)
        if refusal is not None:  # never forwarded (proxy mode's protected topic)
            if isinstance(refusal, Close):
                self.close(refusal)
                return
            self.core.complete(request.id, refusal.data)
            self._flush()
            return
        answered = None
        if request.id != NO_RESPONSE:
            rewrite = upstream.rewriter_for(self.conn, request)
            answered = functools.partial(self._upstream_answered, request, rewrite, verdict)
        try:
            link.forward(request.frame, answered)
        except UpstreamError:
            self._upstream_failed()
            return
        if answered is not None:
            self._owed.add(request.id)
            self._throttle()

    def _upstream_answered(
        self,
        request: Request,
        rewrite: Rewriter | None,
        verdict: bool,
        data: bytes | bytearray | UpstreamError,
    ) -> None:
        """The upstream's answer, from its link's callback (the hot path: no task switch)."""
        self._owed.discard(request.id)
        if isinstance(data, UpstreamError):
            self._upstream_failed()
            return
        try:
            if verdict:
                code = authenticate_error_code(request.header.api_version, data)
                close = self.core.upstream_authenticated(code)
                if close is not None:
                    self.core.complete(request.id, data, framed=False)
                    self.close(close)  # written after the failure delay
                    return
                if self.core.state is AuthState.READY:
                    self._limits.authenticated(self.conn.peer_host, self.conn.user)
            if rewrite is not None:
                rewritten = rewrite(data)  # type: ignore[arg-type]  # bytearray reads alike
                if not isinstance(rewritten, bytes | bytearray):  # must first learn a node
                    self._await(request, rewritten, framed=False)
                    return
                data = rewritten
        except Exception as exc:  # malformed, or a bug: this client goes, the link stays
            self._warn("response_not_delivered", error=repr(exc))
            self.protocol.abort()
            return
        self.core.complete(request.id, data, framed=False)
        self._flush()

    # -- handlers -----------------------------------------------------------------
    async def _serve(self, request: Request) -> None:
        """Run the gateway's handler for ``request``; act on its reply."""
        handler = self._services.handlers[request.header.api_key]
        try:
            reply = await handler(self.conn, request)
        except UpstreamError:
            self._upstream_failed()
            return
        except Exception as exc:  # the core's policy decides; a bug must not end the gateway
            self._failed(request, exc)
            return
        match reply:
            case Answer(data):
                self.core.complete(request.id, data)
                self._flush()
            case AnswerLater(pending):
                self._await(request, pending, framed=True)
            case Forward(forwarded):
                self._forward(forwarded, False)
            case Close():
                self.close(reply)

    def _await(self, request: Request, answer: Awaitable[bytes], *, framed: bool) -> None:
        """The answer to ``request`` once ``answer`` resolves (a handler's ``AnswerLater``,
        ``framed``; or an upstream answer whose rewrite must first open a port)."""
        future = asyncio.ensure_future(answer)
        self._later.add(future)
        future.add_done_callback(functools.partial(self._answered_later, request, framed))

    def _answered_later(
        self, request: Request, framed: bool, future: asyncio.Future[bytes]
    ) -> None:
        self._later.discard(future)
        if future.cancelled():
            return
        error = future.exception()
        if error is None:
            self.core.complete(request.id, future.result(), framed=framed)
            self._flush()
        elif isinstance(error, UpstreamError):
            self._upstream_failed()
        elif framed:  # a handler's failure: the core's policy answers it
            self._failed(request, error)
        else:
            self._warn("response_not_delivered", error=repr(error))
            self.protocol.abort()

    def _failed(self, request: Request, error: BaseException) -> None:
        """The one error policy: the core decides the answer, the driver logs the unexpected."""
        if not isinstance(error, ProtocolError | UnsupportedApi):
            header = request.header
            self._warn(
                "handler_failed",
                level="error",
                api_key=header.api_key,
                version=header.api_version,
                exc_info=error,
            )
        self._apply(self.core.fail(request, error))

    # -- writing, back-pressure, closing ------------------------------------------
    def _throttle(self) -> None:
        if not self._paused and (self.core.should_pause() or len(self._inbox) >= _INBOX_HIGH):
            self._paused = True  # back-pressure: stop reading the client
            self.protocol.pause_reading()

    def _flush(self) -> None:
        protocol = self.protocol
        transport = protocol.transport
        phase = self._phase
        if phase is Phase.HOLDING or not protocol.writable or transport is None:
            return  # resume_writing calls back: the client reads its responses slowly
        if transport.is_closing():
            return
        chunks = self.core.data_to_send()
        if chunks:
            transport.writelines(chunks)
        closing = self._closed
        if closing is not None:
            if self._pending == 0 or closing.reason is CloseReason.PROTOCOL_ERROR:
                transport.close()
        elif self._paused and self.core.may_resume() and len(self._inbox) < _INBOX_LOW:
            self._paused = False
            protocol.resume_reading()

    def close(self, close: Close) -> None:
        """Stop reading; write the answers already under way (a failed login's after the
        source's delay, growing with repeated failures), then close."""
        if self._closed is not None:
            return
        if not self.core.closed:
            close = self.core.close(close.reason, close.detail)
        self._closed = close
        self._inbox.clear()
        self.protocol.pause_reading()
        conn = self.conn
        fields: dict[str, Any] = {"reason": close.reason.value, "error": close.detail}
        delay = 0.0
        if close.reason is CloseReason.AUTHENTICATION_FAILED:
            claimed = self.core.sasl.claimed  # the audit trail: who was tried, from where
            fields["user"] = None if claimed is None else claimed_name(claimed)
            # ... and how long its answer is held (it doubles with each recent failure).
            delay = self._limits.authentication_failed(conn.peer_host, claimed)
            fields["delay_ms"] = round(delay * 1000)
        if close.reason in _ORDINARY:
            log.info(
                "connection_closed",
                connection=conn.connection_id,
                peer=f"{conn.peer_host}:{conn.peer_port}",
                **fields,
            )
        elif close.reason is not CloseReason.UPSTREAM_FAILED:
            self._warn("connection_closed_on_protocol_error", **fields)
        loop = asyncio.get_running_loop()
        # Neither a peer that stops reading nor an answer that never comes holds it open.
        self._deadline = loop.call_later(delay + _CLOSE_GRACE_S, self.protocol.abort)
        if delay > 0:
            self._on(Event.LOGIN_FAILED)
            loop.call_later(delay, self._release_hold)
            return
        self._on(Event.CLOSED)
        self._flush()

    def _release_hold(self) -> None:
        self._on(Event.HOLD_ENDED)
        self._flush()

    def _warn(self, event: str, *, level: str = "warning", **fields: Any) -> None:
        """A log line for something a client did, rate-limited per source address."""
        conn = self.conn
        self._limits.warn(
            conn.peer_host, event, level=level, connection=conn.connection_id, **fields
        )

    # -- the connection's task ----------------------------------------------------
    async def _run(self) -> None:
        """Connect upstream (proxy), then handle what the fast path leaves, until closed."""
        try:
            if self._upstream is not None:
                link = await self._upstream.connect()
                self.conn.upstream = link
                link.on_closed = self._upstream_closed
            await self._handle_inbox()
        except UpstreamLoginFailed as exc:  # a configuration error: loud, but not a flood
            self._limits.warn("*", "upstream_login_failed", level="error", error=str(exc))
        except UpstreamError as exc:
            log.info(
                "client_closed_upstream_unavailable",
                connection=self.conn.connection_id,
                error=str(exc),
            )
        finally:
            for future in self._later:
                future.cancel()
            if self.conn.upstream is not None:
                await self.conn.upstream.close()
            self.core.connection_lost()
            self.protocol.close()
            self._limits.release(self.conn.peer_host)
            self._services.on_close(self.conn)
            self._let_go()

    def _let_go(self) -> None:
        """Free this connection by reference counting alone, at once: cancel its timer
        and break the cycles between it, its state and its core (the framer breaks its
        own). Left to the cyclic collector, a closed connection's objects (~5 KB) stay
        for good once gc.freeze has moved them to the permanent generation."""
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self.conn.forget_closer()

    def _upstream_closed(self) -> None:
        # A broker going away closes its clients' connections, idle ones too;
        # a held failed-login answer is written first.
        if self._phase is not Phase.HOLDING:
            self._upstream_failed()

    async def _handle_inbox(self) -> None:
        inbox = self._inbox
        while self._phase is not Phase.GONE:
            while inbox and not self.core.closed:
                item = inbox.popleft()
                if isinstance(item, Serve | Verify):
                    await self._handle(item)
                else:
                    await self._handle(self.core.receive_frame(item, now_ms()))
                if self.conn.upstream is not None:
                    await self.conn.upstream.drain()
            inbox.clear()
            self._on(Event.DRAINED)  # the transport's callback may forward directly again
            self._flush()
            self._wake.clear()
            await self._wake.wait()
            self._on(Event.WOKEN)

    async def _handle(self, result: Result) -> None:
        match result:
            case Serve(request):
                await self._serve(request)
            case Verify(derive=derive):
                self._throttle()  # frames behind the login wait; the client is not read
                derived = await self._limits.verifier.run(derive, self.conn.peer_host)
                for held in self.core.verified(derived, now_ms()):
                    await self._handle(held)
            case _:
                self._apply(result)
