"""One client connection: framing, the KIP-1313 header rules, ordered dispatch.

Requests start in arrival order and responses leave in request order, as from a
Kafka broker. Telemetry requests may overlap: a push waiting for its durable
group commit does not hold up the pushes behind it on a pipelining connection.
Any other request (the config RPCs) waits until everything before it is answered,
and nothing after it starts until it is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import structlog

from clientmetrics.telemetry.model import UNKNOWN, ZERO_UUID, ClientContext
from clientmetrics.wire import (
    ErrorCode,
    FrameDecoder,
    ProtocolError,
    RequestHeader,
    UnsupportedApi,
    error_response,
    parse_request_header,
    peek_request,
)

log = structlog.get_logger("clientmetrics.gateway")

SASL_HANDSHAKE = 17
_connection_ids = itertools.count(1)


@dataclass(slots=True)
class ConnectionState:
    """What the gateway remembers about one client connection."""

    connection_id: int
    peer_host: str
    peer_port: int
    node_id: int
    principal: str = "User:ANONYMOUS"
    #: The listener the client connected on (its name) and its security protocol.
    listener: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    client_id: str | None = None
    software_name: str = UNKNOWN
    software_version: str = UNKNOWN
    #: KIP-1313: the instance id the connection's first (header v3) request carried.
    header_instance_id: uuid.UUID | None = None
    requests: int = 0
    _context: ClientContext | None = field(default=None, repr=False)
    _pending: deque[asyncio.Future[bytes | None]] | None = field(default=None, repr=False)

    def in_flight(self) -> int:
        """Requests received on this connection and not yet answered."""
        return len(self._pending) if self._pending is not None else 0

    def context(self) -> ClientContext:
        """The telemetry view of this connection (cached; shared by its instances)."""
        if self._context is None:
            self._context = ClientContext(
                connection_id=self.connection_id,
                client_id=self.client_id or "",
                client_software_name=self.software_name,
                client_software_version=self.software_version,
                client_source_address=self.peer_host,
                client_source_port=self.peer_port,
                principal=self.principal,
                node_id=self.node_id,
            )
        return self._context

    def set_software(self, name: str, version: str) -> None:
        """Record ApiVersions v3+ client software name and version."""
        self.software_name = name or UNKNOWN
        self.software_version = version or UNKNOWN
        self._context = None

    def admit(self, header: RequestHeader) -> ErrorCode:
        """Apply KIP-1313's per-connection rules to a request header.

        The first request fixes the client id for the whole connection. If it used
        header v3 it fixes the instance id too: every later request (SaslHandshake
        excepted) must carry the same, non-zero id.
        """
        first = self.requests == 0
        self.requests += 1
        if first:
            self.client_id = header.client_id
            self._context = None
            if header.header_version >= 3:
                if header.client_instance_id in (None, ZERO_UUID):
                    return ErrorCode.INVALID_REQUEST
                self.header_instance_id = header.client_instance_id
            return ErrorCode.NONE
        if self.header_instance_id is None or header.api_key == SASL_HANDSHAKE:
            return ErrorCode.NONE
        if header.header_version < 3 or header.client_instance_id != self.header_instance_id:
            return ErrorCode.INVALID_REQUEST
        return ErrorCode.NONE


#: A request handler: gets the connection, the parsed header and the whole frame
#: (the body starts at the offset), returns a framed response or None (no response).
Handler = Callable[[ConnectionState, RequestHeader, bytes, int], Awaitable[bytes | None]]


class Dispatcher:
    """Routes each request to the handler that claims its api key.

    ``api_keys`` is what an ApiVersions error response advertises. A request for an
    api key or version nobody serves closes the connection, as Kafka does.
    """

    def __init__(
        self,
        handlers: dict[int, Handler],
        *,
        api_keys: Mapping[int, tuple[int, int]] | None = None,
    ) -> None:
        self._handlers = handlers
        self._api_keys = api_keys

    def reject(self, header: RequestHeader, code: ErrorCode) -> bytes:
        """An error response for ``header``, or ProtocolError where none can be built."""
        try:
            return error_response(header, code, api_keys=self._api_keys)
        except UnsupportedApi as exc:
            raise ProtocolError(
                f"unsupported api key {header.api_key} version {header.api_version}"
            ) from exc

    async def dispatch(self, conn: ConnectionState, frame: bytes) -> bytes | None:
        try:
            header, offset = parse_request_header(frame)
        except UnsupportedApi as exc:
            known: RequestHeader | None = getattr(exc, "header", None)
            if known is None:
                raise ProtocolError(str(exc)) from exc
            return self.reject(known, ErrorCode.UNSUPPORTED_VERSION)
        admitted = conn.admit(header)
        if admitted is not ErrorCode.NONE:
            log.info(
                "request_rejected",
                reason="kip1313_instance_id",
                api_key=header.api_key,
                connection=conn.connection_id,
            )
            return self.reject(header, admitted)
        handler = self._handlers.get(header.api_key)
        if handler is None:
            return self.reject(header, ErrorCode.UNSUPPORTED_VERSION)
        try:
            return await handler(conn, header, frame, offset)
        except UnsupportedApi:
            return self.reject(header, ErrorCode.UNSUPPORTED_VERSION)
        except ProtocolError:
            raise
        except Exception:  # a bug in one handler must not take the gateway down
            log.exception("handler_failed", api_key=header.api_key, version=header.api_version)
            return self.reject(header, ErrorCode.UNKNOWN_SERVER_ERROR)


#: Requests whose handlers finish their state work before their first ``await``:
#: they may overlap on one connection (a push waiting for its group commit does not
#: hold up the next one) without changing what any of them sees, because tasks start
#: in arrival order. Every other request waits until those before it are answered.
OVERLAPPING = frozenset({18, 3, 71, 72})
#: Requests in flight on one connection before it stops reading (back-pressure).
MAX_IN_FLIGHT = 256


def _overlaps(frame: bytes) -> bool:
    return len(frame) >= 2 and int.from_bytes(frame[:2], "big", signed=True) in OVERLAPPING


class _Responses:
    """Responses of one connection, written in request order as they complete."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self.pending: deque[asyncio.Future[bytes | None]] = deque()
        self.failure: BaseException | None = None

    def add(self, future: asyncio.Future[bytes | None]) -> None:
        self.pending.append(future)
        future.add_done_callback(self.pump)

    def pump(self, _done: object = None) -> None:
        """Write every answered request at the head of the queue, in one write."""
        chunks = []
        while self.pending and self.pending[0].done():
            future = self.pending.popleft()
            if future.cancelled():
                continue
            error = future.exception()
            if error is not None:
                self.failure = error
                self._writer.transport.abort()
                return
            response = future.result()
            if response is not None:
                chunks.append(response)
        if chunks and not self._writer.is_closing():
            self._writer.write(b"".join(chunks))

    async def settle(self, limit: int = 0) -> None:
        """Wait until at most ``limit`` requests are unanswered."""
        while len(self.pending) > limit:
            await asyncio.wait([self.pending[0]])
            self.pump()

    def cancel(self) -> None:
        for future in self.pending:
            future.cancel()


async def serve_connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    dispatcher: Dispatcher,
    *,
    node_id: int,
    max_request_bytes: int,
    on_open: Callable[[ConnectionState], None],
    on_close: Callable[[ConnectionState], None],
) -> None:
    """Read frames until EOF or a protocol error; answer each, in request order."""
    peer = writer.get_extra_info("peername") or ("", 0)
    conn = ConnectionState(next(_connection_ids), str(peer[0]), int(peer[1]), node_id)
    decoder = FrameDecoder(max_request_bytes)
    responses = _Responses(writer)
    conn._pending = responses.pending
    on_open(conn)
    try:
        while data := await reader.read(65536):
            for frame in decoder.feed(data):
                if not _overlaps(frame):
                    await responses.settle()
                responses.add(asyncio.ensure_future(dispatcher.dispatch(conn, frame)))
                if not _overlaps(frame):
                    await responses.settle()
                await responses.settle(MAX_IN_FLIGHT - 1)
                if responses.failure is not None:
                    raise responses.failure
            await writer.drain()
            if responses.failure is not None:
                raise responses.failure
        await responses.settle()
        await writer.drain()
    except ProtocolError as exc:
        log.warning(
            "connection_closed_on_protocol_error",
            connection=conn.connection_id,
            peer=f"{conn.peer_host}:{conn.peer_port}",
            error=str(exc),
        )
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        responses.cancel()
        on_close(conn)
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()


__all__ = ["ConnectionState", "Dispatcher", "Handler", "peek_request", "serve_connection"]
