"""Gateway configuration: what a gateway is told, checked as it is built, then frozen.

``config_load`` builds it from TOML, the environment and the command line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from clientmetrics.addresses import parse_host_port
from clientmetrics.client.properties import CONNECT_TIMEOUT_S
from clientmetrics.errors import ConfigurationError
from clientmetrics.gateway.tls import TlsConfig
from clientmetrics.gateway.upstream_security import UpstreamSecurity
from clientmetrics.security.authorizer import AuthorizationConfig
from clientmetrics.security.protocol import SecurityProtocol
from clientmetrics.security.sasl import SaslConfig
from clientmetrics.telemetry.manager import TelemetryConfig
from clientmetrics.wire import DEFAULT_MAX_FRAME_BYTES

#: Standalone mode's default maximum request size (pushes are 1 MiB by default).
STANDALONE_MAX_REQUEST_BYTES = 2 * 1024 * 1024
COMPRESSION_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
#: ``[proxy] sasl``: who authenticates clients in proxy mode.
PROXY_SASL_MODES = ("passthrough", "terminate")
#: ``[proxy] telemetry``: who answers GetTelemetrySubscriptions and PushTelemetry.
PROXY_TELEMETRY_MODES = ("gateway", "cluster")


@dataclass(frozen=True, slots=True)
class Address:
    """A host and port to bind or advertise."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str, what: str) -> Address:
        return cls(*parse_host_port(text, what))

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Listener:
    """One address the gateway accepts clients on, and the protocol it speaks there.

    Written ``PROTOCOL://HOST:PORT`` as in Kafka's ``listeners``; a bare ``HOST:PORT``
    is PLAINTEXT. The listener's name is its protocol, so a gateway has at most one
    listener per protocol.
    """

    protocol: SecurityProtocol
    address: Address

    @classmethod
    def parse(cls, text: str, what: str = "listen") -> Listener:
        scheme, sep, rest = text.strip().partition("://")
        if not sep:
            return cls(SecurityProtocol.PLAINTEXT, Address.parse(text.strip(), what))
        return cls(SecurityProtocol.parse(scheme, what), Address.parse(rest, what))

    @property
    def name(self) -> str:
        """The listener name (label ``listener``): its security protocol."""
        return self.protocol.value

    def __str__(self) -> str:
        return f"{self.protocol.value}://{self.address}"


@dataclass(frozen=True, slots=True)
class ExporterSpec:
    """One exporter plugin to load, with its options."""

    name: str
    options: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """Everything the gateway process needs, validated."""

    data_dir: Path
    listeners: tuple[Listener, ...] = (
        Listener(SecurityProtocol.PLAINTEXT, Address("127.0.0.1", 9092)),
    )
    advertised_host: str | None = None
    node_id: int = 0
    cluster_id: str = "clientmetrics"
    #: Larger requests close the connection; ``None``: by mode (see ``request_size_limit``).
    max_request_bytes: int | None = None
    #: Bytes buffered for large requests still arriving, across all connections
    #: (Kafka's ``queued.max.request.bytes``): when spent, connections stop being read.
    queued_max_request_bytes: int = 256 * 1024 * 1024
    #: Kafka's ``connections.max.idle.ms``: a connection without a request for this
    #: long is closed (also ends slowloris connections).
    connections_max_idle_ms: int = 600_000
    #: Kafka's ``max.connections.per.ip``: the next connection from that address is refused.
    max_connections_per_ip: int = 1000
    #: Kafka's per-IP ``connection_creation_rate`` quota (KIP-612): new connections a
    #: second from one address; one over it is held unread for up to a second, then
    #: closed. 0: no limit (Kafka's default).
    connection_creation_rate_per_ip: int = 0
    #: KIP-368 ``connections.max.reauth.ms`` for SASL listeners; 0: no re-authentication
    #: (an OAUTHBEARER session still ends when its token expires).
    connections_max_reauth_ms: int = 0
    #: A single event-loop delay at least this long is logged (``loop_stalled``).
    loop_stall_log_ms: int = 100
    admin_listen: Address | None = None
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    exporters: tuple[ExporterSpec, ...] = (ExporterSpec("landing"),)
    expiry_check_ms: int = 1000
    #: Connection records (every client served, docs/record-format.md): one record
    #: per client key per interval, at most ``connection_records_max_keys`` an
    #: interval (the rest counted as dropped). 0: no connection records.
    connection_records_interval_ms: int = 60_000
    connection_records_max_keys: int = 10_000
    shutdown_timeout_s: float = 10.0
    workers: int = 1
    #: Proxy mode: the upstream cluster's bootstrap brokers (empty: standalone mode).
    upstream: tuple[Address, ...] = ()
    #: Proxy mode: upstream node N is served on port ``broker_port_base + N``
    #: (deterministic, so replicas agree without talking); default listen port + 1.
    broker_port_base: int | None = None
    #: ``sqlite`` or ``topic``; ``auto`` is the topic store when a cluster is known
    #: (proxy mode, or ``subscriptions_bootstrap_servers``), else SQLite.
    store: str = "auto"
    subscriptions_topic: str = "__client_metrics_subscriptions"
    #: The topic store's cluster (standalone gateways sharing subscriptions); proxy
    #: mode defaults to the upstream.
    subscriptions_bootstrap_servers: tuple[Address, ...] = ()
    #: How long the broker may hold the topic store's fetch when nothing changed.
    subscriptions_fetch_wait_ms: int = 30_000
    #: The key file the gateways sharing a topic store sign its records with; None:
    #: records are not signed, and anyone who can write the topic changes the fleet.
    subscriptions_key_file: Path | None = None
    upstream_connect_timeout_s: float = CONNECT_TIMEOUT_S
    #: ``[tls]``: the certificate SSL and SASL_SSL listeners present.
    tls: TlsConfig | None = None
    #: ``[upstream]``: how proxy mode and the topic store reach the cluster.
    upstream_security: UpstreamSecurity = field(default_factory=UpstreamSecurity)
    #: ``[sasl]``: the mechanisms SASL listeners enable (None: no SASL).
    sasl: SaslConfig | None = None
    #: ``[authorization]``: enforced when set; everything is allowed when None.
    authorization: AuthorizationConfig | None = None
    #: ``[proxy] sasl``: ``passthrough`` (the cluster authenticates clients) or
    #: ``terminate`` (the gateway does, with ``[sasl]``); None: terminate iff ``[sasl]``.
    proxy_sasl: str | None = None
    #: ``[proxy] telemetry``: ``gateway`` (the proxy answers 71/72 and the client-metrics
    #: configs itself) or ``cluster`` (forwarded: a cluster with its own receiver).
    proxy_telemetry: str = "gateway"
    #: The cap on client-metrics subscriptions an alter may create.
    max_subscriptions: int = 1000
    #: The TOML file this was loaded from, re-read on SIGHUP.
    source: Path | None = None

    def __post_init__(self) -> None:
        self._check_listeners()
        if not 0 <= self.node_id <= 2**31 - 1:
            raise ConfigurationError(f"node_id must be a non-negative int32, got {self.node_id}")
        if self.request_size_limit < 1024:
            raise ConfigurationError("max_request_bytes must be at least 1024")
        if self.queued_max_request_bytes < self.request_size_limit:
            raise ConfigurationError(
                "queued_max_request_bytes must be at least max_request_bytes "
                f"({self.request_size_limit})"
            )
        if self.connections_max_idle_ms < 1:
            raise ConfigurationError("connections_max_idle_ms must be positive")
        if self.max_connections_per_ip < 1:
            raise ConfigurationError("max_connections_per_ip must be at least 1")
        if self.connection_creation_rate_per_ip < 0:
            raise ConfigurationError("connection_creation_rate_per_ip must not be negative")
        if self.connections_max_reauth_ms < 0:
            raise ConfigurationError("connections_max_reauth_ms must not be negative")
        if self.loop_stall_log_ms < 1:
            raise ConfigurationError("loop_stall_log_ms must be positive")
        if self.workers < 1:
            raise ConfigurationError("workers must be at least 1")
        if self.connection_records_interval_ms < 0:
            raise ConfigurationError("connection_records_interval_ms must be 0 (off) or positive")
        if self.connection_records_max_keys < 1:
            raise ConfigurationError("connection_records_max_keys must be at least 1")
        if not self.exporters:
            raise ConfigurationError("at least one exporter is required")
        if self.store not in ("auto", "sqlite", "topic"):
            raise ConfigurationError(f"store must be auto, sqlite or topic, got {self.store!r}")
        if self.store == "topic" and not self.store_bootstrap:
            raise ConfigurationError(
                "the topic store needs a cluster: --upstream (proxy mode) or "
                "subscriptions_bootstrap_servers"
            )
        if self.store == "sqlite" and self.subscriptions_bootstrap_servers:
            raise ConfigurationError(
                "subscriptions_bootstrap_servers is the topic store's cluster; "
                'it does not go with store = "sqlite"'
            )
        if self.subscriptions_key_file is not None and self.store_kind != "topic":
            raise ConfigurationError("subscriptions_key_file signs the topic store's records; "
                                     "this gateway keeps subscriptions in SQLite")  # fmt: skip
        if not 100 <= self.subscriptions_fetch_wait_ms <= 300_000:
            raise ConfigurationError("subscriptions_fetch_wait_ms must be 100 to 300000")
        if self.broker_port_base is not None and not 0 < self.broker_port_base <= 65535:
            raise ConfigurationError("broker_port_base must be a port number")
        if self.upstream and self.workers != 1:
            raise ConfigurationError("proxy mode runs one worker per gateway process")
        security = self.upstream_security
        if (
            self.gateway_telemetry
            and self.store_kind == "topic"
            and security.protocol.sasl
            and not security.has_credentials
        ):
            raise ConfigurationError(
                "the topic store on a SASL upstream needs [upstream] sasl_mechanism, "
                "sasl_username and sasl_password"
            )
        if self.max_subscriptions < 1:
            raise ConfigurationError("max_subscriptions must be at least 1")

    def _check_listeners(self) -> None:
        if not self.listeners:
            raise ConfigurationError("at least one listener is required")
        names = [listener.name for listener in self.listeners]
        for name in set(names):
            if names.count(name) > 1:
                raise ConfigurationError(f"more than one {name} listener (one per protocol)")
        for listener in self.listeners:
            if listener.protocol.tls and self.tls is None:
                raise ConfigurationError(f"listener {listener} needs a [tls] section")
            if listener.protocol.sasl and not self.upstream and self.sasl is None:
                raise ConfigurationError(
                    f"listener {listener} needs a [sasl] section naming its mechanisms"
                )
        self._check_proxy_sasl()
        if self.upstream and len(self.listeners) > 1:
            raise ConfigurationError("proxy mode serves exactly one listener")

    def _check_proxy_sasl(self) -> None:
        mode = self.proxy_sasl
        if mode is not None and mode not in PROXY_SASL_MODES:
            raise ConfigurationError(
                f'[proxy] sasl must be "passthrough" or "terminate", got {mode!r}'
            )
        if mode is not None and not self.upstream:
            raise ConfigurationError("[proxy] needs proxy mode (an upstream cluster)")
        if mode == "terminate" and self.sasl is None:
            raise ConfigurationError(
                '[proxy] sasl = "terminate" needs a [sasl] section naming the mechanisms'
            )
        if mode == "passthrough" and self.sasl is not None:
            raise ConfigurationError(
                '[proxy] sasl = "passthrough" leaves client authentication to the cluster; '
                'remove [sasl] (it is for sasl = "terminate")'
            )
        security = self.upstream_security
        if self.proxy_sasl_terminates and security.protocol.sasl and not security.has_credentials:
            # Each client's upstream link then logs in as the gateway itself.
            protocol = security.protocol.value
            raise ConfigurationError(
                f'[proxy] sasl = "terminate" towards a SASL cluster ([upstream] '
                f"security_protocol is {protocol}) needs the gateway's own login: [upstream] "
                'sasl_mechanism, sasl_username and sasl_password (or sasl = "passthrough" '
                "and no [sasl], so clients authenticate with the cluster through the gateway)"
            )
        if self.proxy_telemetry not in PROXY_TELEMETRY_MODES:
            raise ConfigurationError(
                f'[proxy] telemetry must be "gateway" or "cluster", got {self.proxy_telemetry!r}'
            )
        if self.proxy_telemetry != "gateway" and not self.upstream:
            raise ConfigurationError("[proxy] needs proxy mode (an upstream cluster)")

    @property
    def proxy_sasl_terminates(self) -> bool:
        """Proxy mode: the gateway authenticates clients itself (else the cluster does)."""
        if not self.upstream:
            return False
        if self.proxy_sasl is None:
            return self.sasl is not None
        return self.proxy_sasl == "terminate"

    @property
    def gateway_telemetry(self) -> bool:
        """Whether the gateway answers telemetry and client-metrics configs itself (and so
        keeps subscriptions); False when a proxy leaves them to the cluster."""
        return not (self.upstream and self.proxy_telemetry == "cluster")

    @property
    def listen(self) -> Address:
        """The first listener's address (proxy mode's bootstrap address)."""
        return self.listeners[0].address

    @property
    def proxy(self) -> bool:
        """Whether the gateway fronts an upstream cluster (proxy mode)."""
        return bool(self.upstream)

    @property
    def request_size_limit(self) -> int:
        """The maximum request size in force: ``max_request_bytes``, else by mode.

        Proxy mode keeps Kafka's ``socket.request.max.bytes`` (100 MiB): the cluster
        decides. Standalone serves telemetry only: a push and some headroom.
        """
        if self.max_request_bytes is not None:
            return self.max_request_bytes
        if self.proxy:
            return DEFAULT_MAX_FRAME_BYTES
        return max(STANDALONE_MAX_REQUEST_BYTES, self.telemetry.max_bytes + 64 * 1024)

    @property
    def store_bootstrap(self) -> tuple[Address, ...]:
        """The topic store's cluster: ``subscriptions_bootstrap_servers``, else the upstream."""
        return self.subscriptions_bootstrap_servers or self.upstream

    @property
    def store_kind(self) -> str:
        """The subscription store actually used: ``topic`` or ``sqlite``."""
        if self.store == "auto":
            return "topic" if self.store_bootstrap else "sqlite"
        return self.store

    def broker_port(self, node_id: int) -> int:
        """The gateway port that stands for upstream broker ``node_id``."""
        base = self.broker_port_base
        if base is None:
            if self.listen.port == 0:
                raise ConfigurationError("proxy mode with --listen port 0 needs --broker-port-base")
            base = self.listen.port + 1
        port = base + node_id
        if not 0 < port <= 65535:
            raise ConfigurationError(f"node {node_id} maps to port {port}, outside 1-65535")
        return port

    @property
    def advertised(self) -> Address:
        """The address the gateway names for itself in Metadata (first listener)."""
        return self.advertised_for(self.listeners[0])

    def advertised_for(self, listener: Listener, port: int | None = None) -> Address:
        """What Metadata names for a client connected on ``listener`` (bound to ``port``)."""
        host = self.advertised_host or listener.address.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return Address(host, listener.address.port if port is None else port)
