"""What a request handler is given and returns, in both gateway modes.

A handler gets the connection's state and one request (its frame as ``bytes``)
and returns a named ``Reply`` (``wire.results``): ``Answer``, ``AnswerLater``,
``Forward`` (proxy mode: pass the request upstream untouched) or ``Close``.
Handlers run one at a time per connection, in arrival order; the next request
starts when a handler returns, so a wait that must not hold up a pipelining
client goes into an ``AnswerLater``.

Which APIs the gateway answers, and at which versions, is read off the table of
handlers (``served_versions``), never listed again.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from clientmetrics.security.base import Operation
from clientmetrics.telemetry.model import UNKNOWN, ClientContext
from clientmetrics.wire import SERVED, ApiKey
from clientmetrics.wire.results import Answer, Close, Reply, Request
from clientmetrics.wire.server import ServerConnection

if TYPE_CHECKING:
    from clientmetrics.gateway.limits import ConnectionLimits
    from clientmetrics.gateway.tls import TlsConfig
    from clientmetrics.gateway.upstream import Rewriter, UpstreamLink

__all__ = [
    "ConnectionState",
    "Handler",
    "Services",
    "Upstream",
    "advertised_versions",
    "audit_identity",
    "served_versions",
]


def _no_close(_close: Close) -> None:
    return None


@dataclass(slots=True)
class ConnectionState:
    """What the gateway remembers about one client connection.

    Identity (principal, client id, KIP-1313 instance id, client software) is the
    core's: the principal is whatever the core's authentication proved
    (anonymous by default).
    """

    connection_id: int
    peer_host: str
    peer_port: int
    node_id: int
    core: ServerConnection = field(default_factory=ServerConnection)
    #: The listener the client connected on (its name) and its security protocol.
    listener: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    #: Closes the connection for a reason found outside it (the idle / session sweep).
    close: Callable[[Close], None] = field(default=_no_close, repr=False)
    #: Proxy mode: this connection's link to the upstream broker its port stands for.
    upstream: UpstreamLink | None = field(default=None, repr=False)
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

    def forget_closer(self) -> None:
        """The connection is gone: drop ``close`` (its driver's bound method, which
        holds this state: a cycle the cyclic collector alone would free)."""
        self.close = _no_close

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

    @property
    def software(self) -> tuple[str, str]:
        """ApiVersions v3+ client software name and version (``unknown`` until sent)."""
        name, version = self.core.software or ("", "")
        return name or UNKNOWN, version or UNKNOWN

    def in_flight(self) -> int:
        """Requests received on this connection and not yet answered."""
        return self.core.in_flight

    def context(self) -> ClientContext:
        """The telemetry view of this connection (cached; shared by its instances)."""
        context = self._context
        name, version = self.software
        if (
            context is None
            or context.principal != self.core.principal
            or context.client_software_name != name
            or context.client_software_version != version
        ):
            context = self._context = ClientContext(
                connection_id=self.connection_id,
                client_id=self.core.client_id or "",
                client_software_name=name,
                client_software_version=version,
                client_source_address=self.peer_host,
                client_source_port=self.peer_port,
                principal=self.core.principal,
                node_id=self.node_id,
                listener=self.listener,
                security_protocol=self.security_protocol,
            )
        return context


def audit_identity(conn: ConnectionState | None) -> dict[str, str]:
    """Who did it, from where: the fields every audit line of the gateway starts with."""
    if conn is None:
        return {}
    return {"principal": conn.principal, "source": f"{conn.peer_host}:{conn.peer_port}"}


#: A request handler: the connection and the request in, a named reply out.
Handler = Callable[[ConnectionState, Request], Awaitable[Reply]]


class Upstream(Protocol):
    """Proxy mode: how one client connection reaches its broker."""

    async def connect(self) -> UpstreamLink:
        """A link to the broker, logged in where the gateway logs in; ``UpstreamError``."""
        ...

    def refuse(self, conn: ConnectionState, request: Request) -> Answer | Close | None:
        """The answer refusing ``request`` without forwarding it (None: forward it)."""
        ...

    def rewriter_for(self, conn: ConnectionState, request: Request) -> Rewriter | None:
        """What the answer to ``request`` needs changed or counted (None: nothing)."""
        ...


@dataclass(frozen=True, slots=True)
class Services:
    """What every connection of one server shares."""

    handlers: Mapping[int, Handler]
    #: api key -> versions the handlers serve (read off ``handlers``).
    served: Mapping[int, tuple[int, int]]
    limits: ConnectionLimits
    spawn: Callable[[Coroutine[Any, Any, None]], object]
    on_open: Callable[[ConnectionState], None]
    on_close: Callable[[ConnectionState], None]
    tls: TlsConfig | None = None
    #: The api list an ApiVersions error carries (standalone); None: none.
    advertised: Mapping[int, tuple[int, int]] | None = None


def served_versions(
    keys: Iterable[int], versions: Mapping[int, tuple[int, int]] = SERVED
) -> Mapping[int, tuple[int, int]]:
    """api key -> (min, max) version for the keys of a handler table."""
    return MappingProxyType({int(key): versions[key] for key in sorted(keys)})


def advertised_versions(
    served: Mapping[int, tuple[int, int]], *, sasl: bool
) -> Mapping[int, tuple[int, int]]:
    """What a standalone gateway advertises: its handlers' versions, and SaslHandshake
    (from v1: v0's raw tokens are not served) and SaslAuthenticate where the core
    terminates SASL."""
    if not sasl:
        return served
    return MappingProxyType(
        {
            **served,
            ApiKey.SASL_HANDSHAKE: (1, SERVED[ApiKey.SASL_HANDSHAKE][1]),
            ApiKey.SASL_AUTHENTICATE: SERVED[ApiKey.SASL_AUTHENTICATE],
        }
    )
