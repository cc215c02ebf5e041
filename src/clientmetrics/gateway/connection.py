"""One standalone client connection: the asyncio shell around ``wire.server``.

The core (``ServerConnection``) frames, admits, authenticates and orders; this
shell reads, runs handlers and writes. Requests start in arrival order and
responses leave in request order, as from a Kafka broker. Telemetry requests
may overlap: a push waiting for its durable group commit does not hold up the
pushes behind it on a pipelining connection. Any other request (the config
RPCs) waits until everything before it is answered, and nothing after it
starts until it is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import structlog

from clientmetrics.gateway.limits import ConnectionLimits, now_ms
from clientmetrics.gateway.verify import Verifier
from clientmetrics.security.base import ANONYMOUS, Operation
from clientmetrics.telemetry.model import UNKNOWN, ClientContext
from clientmetrics.wire import (
    SERVED,
    ApiKey,
    ErrorCode,
    ProtocolError,
    RequestHeader,
    UnsupportedApi,
)
from clientmetrics.wire.server import (
    Close,
    CloseReason,
    Forward,
    ListenerPolicy,
    Request,
    Respond,
    Result,
    Serve,
    ServerConnection,
    Verify,
)

log = structlog.get_logger("clientmetrics.gateway")

_connection_ids = itertools.count(1)


def _no_close() -> None:
    return None


@dataclass(slots=True)
class ConnectionState:
    """What the gateway remembers about one client connection.

    Identity (principal, client id, KIP-1313 instance id) is the core's: the
    principal is whatever the core's authentication proved (anonymous by default).
    """

    connection_id: int
    peer_host: str
    peer_port: int
    node_id: int
    core: ServerConnection = field(default_factory=ServerConnection)
    #: The listener the client connected on (its name) and its security protocol.
    listener: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    software_name: str = UNKNOWN
    software_version: str = UNKNOWN
    #: Closes the transport (the idle / session sweep calls it).
    close: Callable[[], None] = field(default=_no_close, repr=False)
    #: Proxy passthrough: operations the cluster was
    #: asked about for this connection's principal -> whether it refused them.
    cluster_refuses: dict[Operation, bool] = field(default_factory=dict, repr=False)
    _context: ClientContext | None = field(default=None, repr=False)

    @property
    def principal(self) -> str:
        return self.core.principal

    @principal.setter
    def principal(self, principal: str) -> None:
        """The transport's identity (a TLS client certificate), before any request."""
        self.core.set_transport_principal(principal)

    @property
    def user(self) -> str:
        """Whose failed logins a successful authentication forgets (the failure
        throttle): the user the client claimed, else the principal it proved."""
        return self.core.sasl.claimed or self.core.principal

    @property
    def authenticated_by_cluster(self) -> bool:
        """Proxy passthrough: the upstream cluster authenticated this connection's client."""
        sasl = self.core.sasl
        return sasl.policy.passthrough and sasl.proven and sasl.mechanism is not None

    @property
    def client_id(self) -> str | None:
        return self.core.client_id

    @property
    def header_instance_id(self) -> uuid.UUID | None:
        return self.core.header_instance_id

    def in_flight(self) -> int:
        """Requests received on this connection and not yet answered."""
        return self.core.in_flight

    def context(self) -> ClientContext:
        """The telemetry view of this connection (cached; shared by its instances)."""
        context = self._context
        if context is None or context.principal != self.core.principal:
            context = self._context = ClientContext(
                connection_id=self.connection_id,
                client_id=self.core.client_id or "",
                client_software_name=self.software_name,
                client_software_version=self.software_version,
                client_source_address=self.peer_host,
                client_source_port=self.peer_port,
                principal=self.core.principal,
                node_id=self.node_id,
                listener=self.listener,
                security_protocol=self.security_protocol,
            )
        return context

    def set_software(self, name: str, version: str) -> None:
        """Record ApiVersions v3+ client software name and version."""
        self.software_name = name or UNKNOWN
        self.software_version = version or UNKNOWN
        self._context = None


#: A request handler: gets the connection, the parsed header and the whole frame
#: (the body starts at the offset), returns a framed response or None (no response).
Handler = Callable[[ConnectionState, RequestHeader, bytes, int], Awaitable[bytes | None]]

#: Requests whose handlers finish their state work before their first ``await``:
#: they may overlap on one connection (a push waiting for its group commit does not
#: hold up the next one) without changing what any of them sees, because tasks start
#: in arrival order. Every other request waits until those before it are answered.
OVERLAPPING = frozenset(
    {
        ApiKey.API_VERSIONS,
        ApiKey.METADATA,
        ApiKey.GET_TELEMETRY_SUBSCRIPTIONS,
        ApiKey.PUSH_TELEMETRY,
    }
)


class Dispatcher:
    """The handlers of a standalone listener, and the cores its connections run.

    ``api_keys`` is what an ApiVersions error response advertises. A request for an
    api key nobody serves closes the connection, as Kafka does.
    """

    def __init__(
        self,
        handlers: Mapping[int, Handler],
        *,
        api_keys: Mapping[int, tuple[int, int]] | None = None,
        limits: ConnectionLimits | None = None,
    ) -> None:
        self._handlers = dict(handlers)
        self._api_keys = api_keys
        self._served = MappingProxyType({key: SERVED.get(key, (0, 0)) for key in handlers})
        self.limits = limits
        self.verifier = limits.verifier if limits is not None else Verifier()

    def new_core(
        self,
        *,
        max_request_bytes: int,
        principal: str = ANONYMOUS,
        policy: ListenerPolicy | None = None,
    ) -> ServerConnection:
        """A connection core (``principal``: from a TLS certificate; ``policy``: the
        listener's authentication, default the limits' one)."""
        limits = self.limits
        if limits is None:
            return ServerConnection(
                served=self._served,
                advertised=self._api_keys,
                policy=policy,
                principal=principal,
                max_request_bytes=max_request_bytes,
                now_ms=now_ms(),
            )
        return ServerConnection(
            served=self._served,
            advertised=self._api_keys,
            policy=policy or limits.policy,
            principal=principal,
            max_request_bytes=max_request_bytes,
            budget=limits.budget,
            idle_ms=limits.idle_ms,
            now_ms=now_ms(),
        )

    async def run(self, conn: ConnectionState, request: Request) -> bytes | None:
        handler = self._handlers[request.header.api_key]
        frame = request.frame if isinstance(request.frame, bytes) else bytes(request.frame)
        return await handler(conn, request.header, frame, request.offset)


class _Shell:
    """Drives one core over a stream: reads, runs handlers, writes in order."""

    def __init__(
        self, conn: ConnectionState, writer: asyncio.StreamWriter, dispatcher: Dispatcher
    ) -> None:
        self.conn = conn
        self.core = conn.core
        self._writer = writer
        self._dispatcher = dispatcher
        self._tasks: set[asyncio.Task[bytes | None]] = set()
        self._wake = asyncio.Event()
        self.closing: Close | None = None
        #: A failed authentication's answer is held back (see ``hold_failure``).
        self.holding = False
        self.core.on_readable = self._wake.set

    def flush(self) -> None:
        if self.holding:
            return
        chunks = self.core.data_to_send()
        if chunks and not self._writer.is_closing():
            self._writer.writelines(chunks)

    async def wait_readable(self) -> None:
        """Back-pressure: wait while too much is in flight or the budget is spent."""
        if not self.core.should_pause():
            return
        while not self.core.may_resume() and not self.core.closed:
            self._wake.clear()
            await self._wake.wait()

    async def handle(self, result: Result) -> None:
        match result:
            case Serve(request):
                if request.header.api_key in OVERLAPPING:
                    task = asyncio.ensure_future(self._dispatcher.run(self.conn, request))
                    self._tasks.add(task)
                    task.add_done_callback(functools.partial(self._finished, request))
                else:
                    await self.settle()
                    try:
                        data = await self._dispatcher.run(self.conn, request)
                    except Exception as exc:
                        self._failed(request, exc)
                    else:
                        self.core.complete(request.id, data)
            case Respond(error=ErrorCode.INVALID_REQUEST):
                self._rejected(result)
            case Respond(authenticated=True):
                if self._dispatcher.limits is not None:
                    self._dispatcher.limits.authenticated(self.conn.peer_host, self.conn.user)
            case Respond():
                pass
            case Close(reason=CloseReason.AUTHENTICATION_FAILED):
                self.closing = result
                self.holding = self._dispatcher.limits is not None
            case Close():
                self.closing = result
            case Verify(derive=derive):
                # Not read meanwhile (this is the reading loop); others go on.
                derived = await self._dispatcher.verifier.run(derive, self.conn.peer_host)
                for held in self.core.verified(derived, now_ms()):
                    await self.handle(held)
                    if self.closing is not None:
                        break
            case Forward(request):  # no upstream in standalone mode: the core never forwards
                raise AssertionError(f"forward of api key {request.header.api_key}")

    async def hold_failure(self) -> None:
        """Answer a failed authentication only after the source's delay (other
        connections and the loop go on meanwhile), as Kafka's
        ``connection.failed.authentication.delay.ms`` does, growing with repeats."""
        limits = self._dispatcher.limits
        if self.holding and limits is not None:
            delay = limits.authentication_failed(self.conn.peer_host, self.conn.core.sasl.claimed)
            await asyncio.sleep(delay)
        self.holding = False

    def _rejected(self, respond: Respond) -> None:
        conn, limits = self.conn, self._dispatcher.limits
        fields: dict[str, Any] = {"reason": "kip1313_instance_id", "connection": conn.connection_id}
        if limits is not None:
            limits.warn(conn.peer_host, "request_rejected", **fields)
        else:
            log.info("request_rejected", **fields)

    def _finished(self, request: Request, task: asyncio.Task[bytes | None]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            self._failed(request, error)
        else:
            self.core.complete(request.id, task.result())
        self.flush()
        self._wake.set()
        if self.closing is not None:
            self._writer.close()  # the reading loop may be waiting for bytes

    def _failed(self, request: Request, error: BaseException) -> None:
        """The one error policy: the core decides, the shell logs the unexpected."""
        if not isinstance(error, ProtocolError | UnsupportedApi):
            header = request.header
            fields: dict[str, Any] = {
                "api_key": header.api_key,
                "version": header.api_version,
                "exc_info": error,
            }
            limits = self._dispatcher.limits
            if limits is not None:  # a bug hit by every request must not flood the log
                limits.warn(self.conn.peer_host, "handler_failed", level="error", **fields)
            else:
                log.error("handler_failed", **fields)
        match self.core.fail(request, error):
            case Close() as close if self.closing is None:
                self.closing = close
            case _:
                pass

    async def settle(self) -> None:
        """Wait until every overlapping request started so far is answered."""
        while self._tasks:
            await asyncio.wait(list(self._tasks))
        self.flush()

    def cancel(self) -> None:
        for task in self._tasks:
            task.cancel()


async def serve_connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    dispatcher: Dispatcher,
    *,
    node_id: int,
    max_request_bytes: int,
    on_open: Callable[[ConnectionState], None],
    on_close: Callable[[ConnectionState], None],
    principal: str = ANONYMOUS,
    policy: ListenerPolicy | None = None,
) -> None:
    """Read until EOF or the core closes; answer each request, in request order.

    ``principal``: the identity the transport proved (a TLS client certificate);
    ``policy``: how the listener authenticates its clients.
    """
    peer = writer.get_extra_info("peername") or ("", 0)
    core = dispatcher.new_core(
        max_request_bytes=max_request_bytes, principal=principal, policy=policy
    )
    conn = ConnectionState(next(_connection_ids), str(peer[0]), int(peer[1]), node_id, core)
    conn.close = writer.close
    shell = _Shell(conn, writer, dispatcher)
    on_open(conn)
    try:
        while shell.closing is None:
            await shell.wait_readable()
            data = await reader.read(65536)
            if not data:
                break
            for result in core.receive_data(data, now_ms()):
                await shell.handle(result)
                if shell.closing is not None:
                    break
            shell.flush()
            await writer.drain()
        await shell.hold_failure()
        if shell.closing is None or shell.closing.reason is not CloseReason.PROTOCOL_ERROR:
            await shell.settle()
        shell.flush()
        await writer.drain()
        if shell.closing is not None:
            _log_close(conn, shell.closing, dispatcher.limits)
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        shell.cancel()
        core.connection_lost()
        on_close(conn)
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()
        _drop_traceback(reader.exception())


def _drop_traceback(exc: BaseException | None) -> None:
    """Cut the cycle a lost connection leaves: the reader keeps the exception, whose
    traceback holds this coroutine's frame, which holds the reader, its buffers, the
    transport and the last chunk read. Only a full collection would free that (and
    none ever does once ``gc.freeze`` has moved it out of the collector's reach):
    900 reset connections kept ~700 MiB."""
    if exc is not None:
        exc.__traceback__ = None


def _log_close(conn: ConnectionState, close: Close, limits: ConnectionLimits | None) -> None:
    """A protocol violation is a warning (rate-limited per source), the rest info."""
    fields: dict[str, Any] = {
        "connection": conn.connection_id,
        "reason": close.reason.value,
        "error": close.detail,
    }
    if close.reason is CloseReason.AUTHENTICATION_FAILED:
        # The audit trail: the user tried (claimed, never verified), and from where.
        fields["user"] = conn.core.sasl.claimed
    if close.reason in (CloseReason.AUTHENTICATION_FAILED, CloseReason.IDLE):
        log.info("connection_closed", peer=f"{conn.peer_host}:{conn.peer_port}", **fields)
    elif limits is not None:
        limits.warn(conn.peer_host, "connection_closed_on_protocol_error", **fields)
    else:
        log.warning(
            "connection_closed_on_protocol_error",
            peer=f"{conn.peer_host}:{conn.peer_port}",
            **fields,
        )


__all__ = ["OVERLAPPING", "ConnectionState", "Dispatcher", "Handler", "serve_connection"]
