"""The gateway's listeners: one server per ``PROTOCOL://HOST:PORT``, TLS where it says so.

Each accepted connection learns which listener it came in on (its name and
security protocol, labels for the exporters) and, on an SSL listener, its
principal from the client certificate, before its first request is read.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from clientmetrics.errors import ClientMetricsError
from clientmetrics.gateway.config import Listener
from clientmetrics.gateway.connection import ConnectionState
from clientmetrics.gateway.tls import ReloadingContext, TlsConfig, server_context, tls_principal
from clientmetrics.security.principal import ANONYMOUS
from clientmetrics.security.protocol import SecurityProtocol

__all__ = ["TLS_HANDSHAKE_TIMEOUT_S", "ConnectionIdentity", "ListenerSet", "identify"]

#: A client that has not finished its TLS handshake by then is dropped (asyncio's
#: default, 60 s, lets half-open handshakes hold sockets for a minute).
TLS_HANDSHAKE_TIMEOUT_S = 10.0

log = structlog.get_logger("clientmetrics.gateway")


@dataclass(frozen=True, slots=True)
class ConnectionIdentity:
    """What the transport tells about a new connection."""

    listener: str
    security_protocol: str
    principal: str = ANONYMOUS

    def apply(self, conn: ConnectionState) -> None:
        """Record it on the connection (before its first request)."""
        conn.listener = self.listener
        conn.security_protocol = self.security_protocol
        conn.principal = self.principal


def identify(
    listener: Listener, transport: asyncio.BaseTransport, tls: TlsConfig | None
) -> ConnectionIdentity | None:
    """The identity of a connection accepted on ``listener``; None to refuse it.

    On an SSL listener the principal comes from the client certificate (Kafka's
    default builder and mapping rules). On SASL_SSL the SASL exchange sets it.
    """
    principal = ANONYMOUS
    if listener.protocol is SecurityProtocol.SSL and tls is not None:
        ssl_object = transport.get_extra_info("ssl_object")
        try:
            principal = tls_principal(ssl_object, tls.mapper)
        except ClientMetricsError as exc:  # no mapping rule applies, or a broken certificate
            peer = transport.get_extra_info("peername") or ("", 0)
            log.warning(
                "tls_principal_refused", listener=listener.name, peer=str(peer[0]), error=str(exc)
            )
            return None
    return ConnectionIdentity(listener.name, listener.protocol.value, principal)


#: How much decrypted data a TLS connection buffers ahead of its reader.
TLS_READ_AHEAD_BYTES = 64 * 1024
#: A connection's stream buffers up to twice this ahead of the gateway's reads (also
#: while it is paused, its budget spent): asyncio's default is 64 KiB.
STREAM_READ_AHEAD_BYTES = 16 * 1024


class ListenerSet:
    """The TLS context the listeners share, reloaded on SIGHUP and when files change."""

    def __init__(self, listeners: Sequence[Listener], tls: TlsConfig | None) -> None:
        self.listeners = tuple(listeners)
        self.tls = tls
        needs_tls = any(listener.protocol.tls for listener in listeners)
        self.context: ReloadingContext | None = (
            server_context(tls) if tls is not None and needs_tls else None
        )

    def ssl_for(self, listener: Listener) -> ssl.SSLContext | None:
        """The context to accept ``listener``'s connections with (None: plaintext)."""
        if not listener.protocol.tls:
            return None
        assert self.context is not None, "a TLS listener without [tls] passed validation"
        return self.context.context

    async def open(
        self,
        listener: Listener,
        on_client: Callable[[Listener, asyncio.StreamReader, asyncio.StreamWriter], Any],
        *,
        reuse_port: bool,
    ) -> asyncio.Server:
        """Start a stream server for ``listener``."""

        async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if listener.protocol.tls:
                # The TLS layer reads ahead of the connection, up to 256 KiB decrypted by
                # default even while the connection is paused (its budget spent).
                limits = getattr(writer.transport, "set_read_buffer_limits", None)
                if limits is not None:  # asyncio's and uvloop's TLS transports have it
                    limits(high=TLS_READ_AHEAD_BYTES)
            await on_client(listener, reader, writer)

        return await asyncio.start_server(
            accepted,
            listener.address.host,
            listener.address.port,
            ssl=self.ssl_for(listener),
            ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S if listener.protocol.tls else None,
            reuse_port=reuse_port or None,
            backlog=4096,
            limit=STREAM_READ_AHEAD_BYTES,
        )
