"""One client connection: framing, the KIP-1313 header rules, ordered dispatch.

Requests on a connection are handled one at a time, in order, as a Kafka broker
does (it mutes a channel until its response is sent): responses therefore leave in
request order without any re-sequencing.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
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
    client_id: str | None = None
    software_name: str = UNKNOWN
    software_version: str = UNKNOWN
    #: KIP-1313: the instance id the connection's first (header v3) request carried.
    header_instance_id: uuid.UUID | None = None
    requests: int = 0
    _context: ClientContext | None = field(default=None, repr=False)

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
        fallback: Handler | None = None,
        *,
        api_keys: Mapping[int, tuple[int, int]] | None = None,
    ) -> None:
        self._handlers = handlers
        self._fallback = fallback
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
        handler = self._handlers.get(header.api_key, self._fallback)
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
    """Read frames until EOF or a protocol error; answer each in order."""
    peer = writer.get_extra_info("peername") or ("", 0)
    conn = ConnectionState(next(_connection_ids), str(peer[0]), int(peer[1]), node_id)
    decoder = FrameDecoder(max_request_bytes)
    on_open(conn)
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            for frame in decoder.feed(data):
                response = await dispatcher.dispatch(conn, frame)
                if response is not None:
                    writer.write(response)
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
        on_close(conn)
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()


__all__ = ["ConnectionState", "Dispatcher", "Handler", "peek_request", "serve_connection"]
