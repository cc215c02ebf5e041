"""The gateway process: one asyncio server wiring connections, handlers, store and exporters."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import structlog

from clientmetrics.errors import ConfigurationError, ListenError
from clientmetrics.exporters.base import Exporter, HealthReporting
from clientmetrics.exporters.child import with_exporter_process
from clientmetrics.exporters.path import ExportPath
from clientmetrics.exporters.queued import ExporterStats
from clientmetrics.exporters.registry import load_exporters
from clientmetrics.gateway.authz import AuthorizationHolder
from clientmetrics.gateway.config import Address, GatewayConfig, Listener
from clientmetrics.gateway.config_rpcs import ConfigHandlers
from clientmetrics.gateway.connection_log import connection_log
from clientmetrics.gateway.driver import Connection
from clientmetrics.gateway.fairshare import FairShare
from clientmetrics.gateway.handlers import (
    ConnectionState,
    Handler,
    Services,
    advertised_versions,
    served_versions,
)
from clientmetrics.gateway.housekeeping import Housekeeping, freeze_long_lived
from clientmetrics.gateway.limits import ConnectionLimits, open_fds, raise_fd_limit
from clientmetrics.gateway.listeners import ListenerSet
from clientmetrics.gateway.looplag import LoopLag
from clientmetrics.gateway.metrics_http import MetricsServer
from clientmetrics.gateway.sasl_setup import (
    claims_reader,
    keep_jwks_fresh,
    listener_policy,
    reload_jwks,
    sasl_server_for,
    warn_unprotected,
)
from clientmetrics.gateway.scram_rpcs import ScramHandlers
from clientmetrics.gateway.subscriptions import Subscriptions, store_signer
from clientmetrics.gateway.tables import standalone_handlers
from clientmetrics.gateway.tasks import OwnedTasks
from clientmetrics.gateway.telemetry_rpcs import TelemetryHandlers
from clientmetrics.gateway.tls import ReloadingContext
from clientmetrics.gateway.turns import OffLoop
from clientmetrics.gateway.upstream_security import UpstreamTls
from clientmetrics.security.base import SaslServer
from clientmetrics.security.sasl import MechanismServer
from clientmetrics.store.base import SubscriptionStore
from clientmetrics.store.credentials import CredentialFile
from clientmetrics.store.sqlite import SqliteSubscriptionStore
from clientmetrics.telemetry.manager import ClientMetricsManager
from clientmetrics.wire import ApiKey
from clientmetrics.wire.results import Reply, Request
from clientmetrics.wire.sasl import IdentityOf
from clientmetrics.wire.server import ListenerPolicy

if TYPE_CHECKING:
    from clientmetrics.gateway.proxy import ProxyServer

log = structlog.get_logger("clientmetrics.gateway")


class Gateway:
    """A KIP-714 telemetry endpoint that Kafka clients treat as a broker."""

    def __init__(
        self,
        config: GatewayConfig,
        *,
        store: SubscriptionStore | None = None,
        exporters: Sequence[Exporter] | None = None,
        reuse_port: bool = False,
        sasl: SaslServer | None = None,
        identity_of: IdentityOf | None = None,
        policy: ListenerPolicy | None = None,
    ) -> None:
        """How clients authenticate, per listener (see ``policy_for``).

        ``sasl``: the mechanisms SASL listeners terminate. ``identity_of``: proxy
        passthrough's reader of the identity a client claims. ``policy``: one policy
        for every listener instead (embedding, tests).
        """
        self.config = config
        self._sasl = sasl
        self._identity_of = identity_of
        self._policy = policy
        self.limits = ConnectionLimits(
            max_request_bytes=config.request_size_limit,
            queued_max_request_bytes=config.queued_max_request_bytes,
            idle_ms=config.connections_max_idle_ms,
            max_connections_per_ip=config.max_connections_per_ip,
            connection_creation_rate_per_ip=config.connection_creation_rate_per_ip,
        )
        self.manager = ClientMetricsManager(config.telemetry, rng=random.SystemRandom())
        #: The authorizer in force; ``reload_security`` (SIGHUP) swaps its ACLs.
        self.authorization = AuthorizationHolder(config.authorization, config.source)
        self.credentials = CredentialFile.in_data_dir(config.data_dir)
        #: The SASL mechanisms of ``[sasl]`` (None without it), built at start.
        self.sasl: MechanismServer | None = None
        self._store = store
        self._exporters = list(exporters) if exporters is not None else None
        self._export_path: ExportPath | None = None
        self._reuse_port = reuse_port
        self._servers: list[asyncio.Server] = []
        self._listeners = ListenerSet(config.listeners, config.tls)
        self._upstream_tls: ReloadingContext | None = None
        self._metrics: MetricsServer | None = None
        self._subscriptions: Subscriptions | None = None
        self._tasks = OwnedTasks()
        self._connections: dict[int, ConnectionState] = {}
        self._services: Services | None = None
        self._proxy: ProxyServer | None = None
        self._stats = {"push": 0, "get_subscriptions": 0, "connections_closed": 0}
        #: Decompresses and parses large pushes off the event loop (see telemetry_rpcs),
        #: in turns by source address, as the SASL verifier runs its checks.
        self._decoder = OffLoop(2, name="push-decode")
        #: Telemetry requests' turns on the event loop, shared fairly between sources.
        self._share = FairShare()
        self.port = 0
        #: Listener name -> the port it is bound to.
        self.ports: dict[str, int] = {}
        self.metrics_port: int | None = None
        self._closing = False
        self._started = False
        self._housekeeping = Housekeeping(
            self.manager, self.limits, self._connections, config.expiry_check_ms, config.node_id
        )
        self._connection_log = connection_log(config, self.manager, self._connections)
        #: The event loop's delays: a gauge on /metrics, a log line per stall.
        self.loop_lag = LoopLag(
            stall_s=config.loop_stall_log_ms / 1000, on_stall=self._housekeeping.stalled
        )

    @property
    def exporters(self) -> list[Exporter]:
        return list(self._exporters or [])

    async def start(self) -> None:
        """Open the store and exporters, then listen. Raises on a bad configuration.

        A failed start closes whatever it had opened before raising.
        """
        try:
            await self._start()
        except BaseException:
            await self.close()
            raise
        self._started = True
        cfg = self.config
        log.info(
            "gateway_started",
            listen=f"{cfg.listen.host}:{self.port}",
            listeners={
                listener.name: f"{listener.address.host}:{self.ports.get(listener.name)}"
                for listener in cfg.listeners
            },
            node_id=cfg.node_id,
            data_dir=str(cfg.data_dir),
            metrics_port=self.metrics_port,
            exporters=[e.name for e in self._exporters or []],
            upstream=[str(a) for a in cfg.upstream] or None,
            broker_ports=self._proxy.broker_ports if self._proxy is not None else None,
        )

    async def _start(self) -> None:
        cfg = self.config
        if cfg.proxy:
            # Whatever the store, an unreachable upstream stops the start here, in one line.
            from clientmetrics.gateway.proxy.server import reach_upstream

            tls = self._upstream_tls_context()
            await reach_upstream(cfg.upstream, cfg.upstream_connect_timeout_s, tls)
        if cfg.data_dir.exists() and not cfg.data_dir.is_dir():
            raise ConfigurationError(f"data directory {cfg.data_dir} is a file, not a directory")
        try:
            cfg.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigurationError(f"data directory {cfg.data_dir}: {exc.strerror}") from exc
        self.limits.fd_limit = raise_fd_limit()
        self.limits.base_fds = open_fds()
        asyncio.get_running_loop().set_exception_handler(self._housekeeping.loop_exception)
        self._tasks.spawn(self.loop_lag.run())
        self._start_security()
        self.limits.policy = self.policy_for(cfg.listeners[0])
        if self._store is None and cfg.gateway_telemetry:
            self._store = self._default_store()
        if self._exporters is None:
            specs = [(spec.name, spec.options) for spec in cfg.exporters]
            self._exporters = with_exporter_process(
                load_exporters(specs, cfg.data_dir), specs, cfg.data_dir
            )
        self._export_path = ExportPath(self._exporters)
        if not self._export_path.gating:
            log.warning(
                "no_durable_exporter",
                hint="no exporter gates the answer (landing disabled, none required): pushes "
                "are acknowledged before any exporter has them and may be dropped",
            )
        for exporter in self._exporters:
            await exporter.start()
        if self._store is not None:
            self._subscriptions = Subscriptions(self._store, self.manager)
            await self._subscriptions.start()
            self._housekeeping.subscriptions = self._subscriptions
        if cfg.proxy:
            await self._start_proxy()
        else:
            for listener in cfg.listeners:
                with _listen_error(listener.address):
                    server = await self._listeners.open(
                        listener, self._connection_factory(listener), reuse_port=self._reuse_port
                    )
                self._servers.append(server)
                self.ports[listener.name] = server.sockets[0].getsockname()[1]
            self.port = self.ports[cfg.listeners[0].name]
            self._services = self._standalone_services()
        self._tasks.spawn(self._housekeeping.run())
        if self._connection_log is not None:
            self._tasks.spawn(self._connection_log.run())
        self._watch_tls()
        if cfg.admin_listen is not None:
            self._metrics = MetricsServer(
                self.metrics_snapshot, self.exporter_stats, not_ready=self.not_ready
            )
            with _listen_error(cfg.admin_listen, " (--admin-listen)"):
                self.metrics_port = await self._metrics.start(
                    cfg.admin_listen.host, cfg.admin_listen.port
                )
        # Everything start-up made (the imported modules' functions, classes and tables:
        # about 90,000 objects) out of the collector's reach before the first client is
        # served, not FREEZE_EVERY_S later: until then each full collection scanned them
        # all, 48-70 ms of the loop measured under load.
        freeze_long_lived()

    def policy_for(self, listener: Listener) -> ListenerPolicy:
        """How clients on ``listener`` authenticate (``sasl_setup.listener_policy``)."""
        if self._policy is not None:
            return self._policy
        return listener_policy(self.config, listener, self._sasl, self._identity_of)

    def _start_security(self) -> None:
        """Build ``[sasl]`` (a JWKS URL is fetched again periodically) and warn about
        listeners anyone may use to change subscriptions."""
        cfg = self.config
        self.sasl = sasl_server_for(cfg, self.credentials)
        if self._sasl is None:
            self._sasl = self.sasl
        if self._identity_of is None and (cfg.proxy or self._sasl is not None):
            # Passthrough's principal; terminate mode names the user a failure tried.
            self._identity_of = claims_reader(cfg)
        if self.sasl is not None and cfg.sasl is not None:
            self._tasks.spawn(keep_jwks_fresh(self.sasl, cfg.sasl))
        warn_unprotected(cfg)

    def _default_store(self) -> SubscriptionStore:
        cfg = self.config
        if cfg.store_kind == "topic":
            from clientmetrics.store.topic import TopicSubscriptionStore

            bootstrap = ",".join(str(a) for a in cfg.store_bootstrap)
            return TopicSubscriptionStore(
                bootstrap,
                cfg.subscriptions_topic,
                client_config=cfg.upstream_security.librdkafka(),
                fetch_wait_ms=cfg.subscriptions_fetch_wait_ms,
                signer=store_signer(cfg),
                max_subscriptions=cfg.max_subscriptions,
            )
        return SqliteSubscriptionStore(cfg.data_dir / "subscriptions.db")

    def _upstream_tls_context(self) -> UpstreamTls | None:
        """TLS towards the cluster, if configured (one reloading context, made once)."""
        security = self.config.upstream_security
        if self._upstream_tls is None:
            self._upstream_tls = security.context()
        if self._upstream_tls is None:
            return None
        return UpstreamTls(self._upstream_tls.context, security.server_hostname)

    async def _start_proxy(self) -> None:
        """Proxy mode: forward to the upstream cluster, answer telemetry and configs here
        (unless ``[proxy] telemetry = "cluster"``: then nothing is answered here)."""
        from clientmetrics.gateway.proxy import build_proxy

        own = self._telemetry_handlers()
        upstream_tls = self._upstream_tls_context()
        self._proxy = build_proxy(
            self.config,
            listeners=self._listeners,
            policy=self.limits.policy,
            limits=self.limits,
            on_open=self._opened,
            on_close=self._closed,
            telemetry=own if self._subscriptions is not None else {},
            subscriptions=self._subscriptions,
            authorization=self.authorization,
            upstream_tls=upstream_tls,
            login=self.config.upstream_security.login,
        )
        if self._connection_log is not None:
            self._proxy.usage = self._connection_log
        await self._proxy.start()
        self.port = self._proxy.port
        self.ports[self.config.listeners[0].name] = self.port

    def _telemetry_handlers(self) -> dict[int, Handler]:
        """KIP-714's two requests, answered here in both modes."""
        assert self._export_path is not None
        telemetry = TelemetryHandlers(self.manager, self._export_path, self._decoder, self._share)
        return {
            ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: self._counted(
                "get_subscriptions", telemetry.get_subscriptions
            ),
            ApiKey.PUSH_TELEMETRY: self._counted("push", telemetry.push),
        }

    def _standalone_services(self) -> Services:
        """The standalone handler table; what is served and advertised is read off it."""
        assert self._subscriptions is not None
        cfg = self.config
        sasl = any(self.policy_for(listener).sasl is not None for listener in cfg.listeners)
        handlers = standalone_handlers(
            cfg,
            self.ports,
            self._telemetry_handlers(),
            ConfigHandlers(
                self._subscriptions, self.authorization, max_subscriptions=cfg.max_subscriptions
            ),
            ScramHandlers(self.credentials, self.authorization, sasl=sasl),
        )
        served = served_versions(handlers)
        return Services(
            handlers,
            served,
            self.limits,
            self._tasks.spawn,
            self._opened,
            self._closed,
            tls=cfg.tls,
            advertised=advertised_versions(served, sasl=sasl),
        )

    def _connection_factory(self, listener: Listener) -> Callable[[], asyncio.BaseProtocol]:
        policy = self.policy_for(listener)

        def make() -> asyncio.BaseProtocol:
            assert self._services is not None, "connections are accepted once started"
            return Connection(
                self._services, listener, policy, node_id=self.config.node_id
            ).protocol

        return make

    def _counted(self, name: str, handler: Handler) -> Handler:
        async def counted(conn: ConnectionState, request: Request) -> Reply:
            self._stats[name] += 1
            return await handler(conn, request)

        return counted

    def _tls_contexts(self) -> list[ReloadingContext]:
        return [c for c in (self._listeners.context, self._upstream_tls) if c is not None]

    def _watch_tls(self) -> None:
        tls = self.config.tls
        every = tls.reload_check_s if tls is not None else 5.0
        if every > 0:
            for context in self._tls_contexts():
                self._tasks.spawn(context.watch(every))

    def reload_tls(self) -> None:
        """Re-read the certificates, keys and CAs now (SIGHUP)."""
        for context in self._tls_contexts():
            context.reload()

    def _opened(self, conn: ConnectionState) -> None:
        self._connections[conn.connection_id] = conn
        if self._connection_log is not None:
            self._connection_log.opened(conn)

    def _closed(self, conn: ConnectionState) -> None:
        self._connections.pop(conn.connection_id, None)
        self._stats["connections_closed"] += 1
        self._housekeeping.connection_closed(conn)
        if self._connection_log is not None:
            self._connection_log.closed(conn)

    def not_ready(self) -> str | None:
        """None when a push can be accepted and landed now; else why not (``/readyz``)."""
        if self._closing:
            return "shutting down"
        if not self._servers and self._proxy is None:
            return "not listening"
        for exporter in self._exporters or []:
            if isinstance(exporter, HealthReporting):
                reason = exporter.health()
                if reason is not None:
                    return f"{exporter.name}: {reason}"
        if isinstance(self._store, HealthReporting):
            return self._store.health()  # a topic store with no live follower
        return None

    def metrics_snapshot(self) -> dict[str, float]:
        """Counters for ``/metrics`` and the dashboard."""
        stats = self.manager.stats
        values: dict[str, float] = {
            "instance_count": stats.instance_count,
            "unknown_subscription_request": stats.unknown_subscription_requests,
            "throttle": stats.throttles,
            "plugin_export": stats.exports,
            "plugin_export_time_seconds": stats.export_time_ms_sum / 1000,
            "plugin_export_time_max_seconds": stats.export_time_ms_max / 1000,
            "plugin_error": stats.export_errors,
            "accepted_pushes": stats.accepted_pushes,
            "empty_pushes": stats.empty_pushes,
            "instances_expired": stats.instances_expired,
            "instances_evicted": stats.instances_evicted,
        }
        values.update({k: float(v) for k, v in self._stats.items()})
        values["connections"] = float(len(self._connections))
        values["request_budget_used_bytes"] = float(self.limits.budget.used)
        values["connections_throttled"] = float(self.limits.throttled)
        if self._proxy is not None and self._proxy.guard is not None:
            values["store_topic_refused"] = float(self._proxy.guard.refused)
        values.update(self.loop_lag.snapshot())
        if self._connection_log is not None:
            values.update(self._connection_log.counters())
        for exporter in self._exporters or []:
            if isinstance(exporter, HealthReporting):
                values.update(exporter.counters())
        if isinstance(self._store, HealthReporting):
            values.update(self._store.counters())
        values["ready"] = 0.0 if self.not_ready() else 1.0
        return values

    def exporter_stats(self) -> list[ExporterStats]:
        """Each exporter's counters (received, exported, dropped, failed, queue, latency)."""
        return self._export_path.stats() if self._export_path is not None else []

    async def close(self) -> None:
        """Stop listening, finish or cancel in-flight work, flush the exporters."""
        timeout = self.config.shutdown_timeout_s
        self._closing = True
        for server in self._servers:
            server.close()
        if self._proxy is not None:
            await self._proxy.close(timeout)
        # /readyz answers 503 while in-flight pushes drain.
        await self._drain(timeout)
        if self._metrics is not None:
            await self._metrics.close()
        await self._tasks.cancel(timeout)
        if self._connection_log is not None:
            await self._connection_log.flush()  # the connections still open, the last interval
        for exporter in self._exporters or []:
            try:
                await exporter.close(timeout)
            except Exception:  # one exporter failing to close must not stop the others
                log.exception("exporter_close_failed", exporter=exporter.name)
        if self._subscriptions is not None:
            await self._subscriptions.close()
        self._decoder.close()
        self.limits.verifier.close()
        if self._started:
            log.info("gateway_stopped")

    async def _drain(self, timeout: float) -> None:
        """Let requests already being handled (pushes awaiting their group commit) be
        answered before the connections are closed; new ones are no longer accepted."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline and any(
            conn.in_flight() for conn in self._connections.values()
        ):
            await asyncio.sleep(0.01)

    def reload(self) -> None:
        """SIGHUP: certificates and keys, ``[authorization]``, the OAUTHBEARER JWKS."""
        self.reload_tls()
        self.reload_security()

    def reload_security(self) -> None:
        """SIGHUP: re-read ``[authorization]`` and the OAUTHBEARER JWKS (key rotation).

        Credentials need no signal: they are re-read when their file changes.
        """
        self.authorization.reload()
        if self.sasl is not None and self.config.sasl is not None:
            self._tasks.spawn(reload_jwks(self.sasl, self.config.sasl))

    async def run_until_signalled(self) -> None:
        """Serve until SIGTERM or SIGINT, then drain and return."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        loop.add_signal_handler(signal.SIGHUP, self.reload)
        await self.start()
        try:
            await stop.wait()
        finally:
            with contextlib.suppress(NotImplementedError):
                for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                    loop.remove_signal_handler(sig)
            await self.close()


@contextlib.contextmanager
def _listen_error(address: Address, what: str = "") -> Iterator[None]:
    """A failed bind as one line naming the address (``OSError`` stays inside)."""
    try:
        yield
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        raise ListenError(f"cannot listen on {address}{what}: {reason}") from exc
