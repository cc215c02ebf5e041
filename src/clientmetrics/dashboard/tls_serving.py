"""TLS served by the dashboard itself (``--tls-cert``, ``--tls-key``).

The certificate and key are the gateway's kind of TLS files (PEM, TLS 1.2 or
newer, ``gateway.tls``: one home for loading and checking them), re-read when
they change on disk, looked at on each new connection. The handshake runs on
the connection's own thread with a deadline, never on the accepting one, so a
client that connects and says nothing holds only its own thread.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import structlog

from clientmetrics.gateway.tls import ReloadingContext, TlsConfig, TlsFiles, server_context

__all__ = ["HANDSHAKE_TIMEOUT_S", "TlsServing", "dashboard_tls"]

log = structlog.get_logger("clientmetrics.dashboard")
#: How long a new connection has to finish its TLS handshake.
HANDSHAKE_TIMEOUT_S = 10.0


def dashboard_tls(certificate: Path, private_key: Path) -> ReloadingContext:
    """The dashboard's server context; ``ConfigurationError`` (one line) if the files
    do not load or do not match."""
    return server_context(TlsConfig(TlsFiles(certificate, private_key)))


class TlsServing:
    """Mixed into a ``socketserver`` server before it: with ``tls`` set, every accepted
    connection is TLS."""

    tls: ReloadingContext | None = None

    def get_request(self) -> tuple[Any, Any]:
        sock, address = super().get_request()  # type: ignore[misc]
        if self.tls is None:
            return sock, address
        self.tls.reload_if_changed()
        wrapped = self.tls.context.wrap_socket(
            sock, server_side=True, do_handshake_on_connect=False
        )
        return wrapped, address

    def finish_request(self, request: Any, client_address: Any) -> None:
        """On the connection's thread: the handshake first, with a deadline."""
        if isinstance(request, ssl.SSLSocket):
            request.settimeout(HANDSHAKE_TIMEOUT_S)
            try:
                request.do_handshake()
            except (OSError, ssl.SSLError) as exc:
                log.info("dashboard_tls_handshake_failed", peer=client_address[0], error=str(exc))
                return
            request.settimeout(None)
        super().finish_request(request, client_address)  # type: ignore[misc]

    @property
    def scheme(self) -> str:
        return "http" if self.tls is None else "https"
