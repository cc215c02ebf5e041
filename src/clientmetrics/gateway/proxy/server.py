"""The proxy's listeners: the bootstrap port, and one port per upstream broker.

A client bootstrapping on the listen port is connected to the upstream bootstrap
brokers; a client on port ``broker_port_base + N`` to upstream node N. Every port
speaks the protocol of the (one) listener, TLS included. Broker
ports open as nodes are learned (at start from a Metadata probe, later from any
response naming a new node) and before any client is told about them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping

import structlog

from clientmetrics.gateway.config import Address, GatewayConfig
from clientmetrics.gateway.connection import ConnectionState
from clientmetrics.gateway.limits import ConnectionLimits
from clientmetrics.gateway.listeners import TLS_HANDSHAKE_TIMEOUT_S, ListenerSet, identify
from clientmetrics.gateway.proxy.cluster_map import ClusterMap
from clientmetrics.gateway.proxy.session import ProxyHandler, ProxySession
from clientmetrics.gateway.proxy.stream import FrameProtocol
from clientmetrics.gateway.proxy.upstream import UpstreamError, UpstreamLink
from clientmetrics.gateway.tasks import OwnedTasks
from clientmetrics.gateway.upstream_security import UpstreamTls
from clientmetrics.wire import ApiKey, RequestHeader, decode_response, encode_request, request_type

log = structlog.get_logger("clientmetrics.gateway.proxy")

_PROBE_METADATA_VERSION = 4  # old enough for any broker since 0.11, still in Kafka 4


class ProxyServer:
    """Accepts clients on the bootstrap and broker ports and runs a session for each."""

    def __init__(
        self,
        config: GatewayConfig,
        cluster: ClusterMap,
        handlers: Mapping[int, ProxyHandler],
        *,
        listeners: ListenerSet,
        upstream_tls: UpstreamTls | None = None,
        limits: ConnectionLimits,
        on_open: Callable[[ConnectionState], None],
        on_close: Callable[[ConnectionState], None],
    ) -> None:
        self._config = config
        self._cluster = cluster
        self._handlers = handlers
        self._listener = config.listeners[0]
        self._ssl = listeners.ssl_for(self._listener)
        self._handshake_timeout = TLS_HANDSHAKE_TIMEOUT_S if self._ssl is not None else None
        self._upstream_tls = upstream_tls
        self._limits = limits
        self._on_open = on_open
        self._on_close = on_close
        self._servers: dict[int | None, asyncio.Server] = {}
        self._opening: dict[int, asyncio.Lock] = {}
        self._tasks = OwnedTasks()
        self.port = 0
        cluster.set_listener(self.open_broker_port)

    @property
    def broker_ports(self) -> dict[int, int]:
        """Upstream node id -> gateway port, for the brokers listened for so far."""
        return {
            node: server.sockets[0].getsockname()[1]
            for node, server in self._servers.items()
            if node is not None
        }

    async def start(self) -> None:
        """Listen on the bootstrap port and on a port per broker the upstream names."""
        cfg = self._config
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            self._factory(None),
            cfg.listen.host,
            cfg.listen.port,
            ssl=self._ssl,
            ssl_handshake_timeout=self._handshake_timeout,
            backlog=4096,
        )
        self._servers[None] = server
        self.port = server.sockets[0].getsockname()[1]
        try:
            await self.probe()
        except UpstreamError as exc:
            # Not fatal: broker ports open once the upstream answers a client.
            log.warning("upstream_unavailable_at_start", error=str(exc))

    async def probe(self) -> None:
        """Ask a bootstrap broker for the cluster's brokers (opens their ports)."""
        errors = []
        for address in self._cluster.bootstrap:
            link = UpstreamLink(
                address, self._config.upstream_connect_timeout_s, tls=self._upstream_tls
            )
            try:
                await link.connect()
                header = RequestHeader(
                    ApiKey.METADATA, _PROBE_METADATA_VERSION, 0, "clientmetrics-proxy", None, 1
                )
                body = request_type(ApiKey.METADATA, _PROBE_METADATA_VERSION)(
                    topics=(), allow_auto_topic_creation=False
                )
                frame = await asyncio.wait_for(
                    link.inject(encode_request(header, body)[4:]),
                    self._config.upstream_connect_timeout_s,
                )
                _, response = decode_response(ApiKey.METADATA, _PROBE_METADATA_VERSION, frame)
                for broker in response.brokers:
                    await self._cluster.learn(
                        int(broker.node_id), str(broker.host), int(broker.port)
                    )
                return
            except (TimeoutError, UpstreamError) as exc:
                errors.append(str(exc))
            finally:
                await link.close()
        raise UpstreamError("; ".join(errors) or "no upstream bootstrap brokers")

    async def open_broker_port(self, node_id: int) -> None:
        """Listen on the port standing for upstream node ``node_id`` (idempotent)."""
        lock = self._opening.setdefault(node_id, asyncio.Lock())
        async with lock:
            if node_id in self._servers:
                return
            port = self._config.broker_port(node_id)
            try:
                server = await asyncio.get_running_loop().create_server(
                    self._factory(node_id),
                    self._config.listen.host,
                    port,
                    ssl=self._ssl,
                    ssl_handshake_timeout=self._handshake_timeout,
                    backlog=4096,
                )
            except OSError as exc:
                log.error("broker_port_unavailable", node_id=node_id, port=port, error=exc.strerror)
                return
            self._servers[node_id] = server
            log.info("broker_port_open", node_id=node_id, port=port)

    async def _upstream_for(self, node_id: int | None) -> tuple[Address, ...]:
        if node_id is None:
            return self._cluster.bootstrap
        address = self._cluster.address(node_id)
        if address is None:  # e.g. this gateway restarted and a client came straight back
            await self.probe()
            address = self._cluster.address(node_id)
        if address is None:
            raise UpstreamError(f"upstream node {node_id} is not in the cluster")
        return (address,)

    def _factory(self, node_id: int | None) -> Callable[[], FrameProtocol]:
        cfg = self._config
        own_id = cfg.node_id if node_id is None else node_id

        def make() -> FrameProtocol:
            def opened(conn: ConnectionState) -> None:
                # Called from connection_made: the TLS handshake is complete.
                transport = session.protocol.transport
                assert transport is not None
                identity = identify(self._listener, transport, cfg.tls)
                if identity is None:
                    transport.abort()
                else:
                    identity.apply(conn)
                self._on_open(conn)

            session = ProxySession(
                own_id,
                lambda: self._upstream_for(node_id),
                self._handlers,
                self._cluster,
                limits=self._limits,
                connect_timeout_s=cfg.upstream_connect_timeout_s,
                upstream_tls=self._upstream_tls,
                spawn=self._tasks.spawn,
                on_open=opened,
                on_close=self._on_close,
            )
            return session.protocol

        return make

    async def close(self, timeout: float) -> None:
        """Stop listening and end every session."""
        for server in self._servers.values():
            server.close()
        await self._tasks.cancel(timeout)
        for server in self._servers.values():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 1.0)


async def reach_upstream(
    bootstrap: tuple[Address, ...], timeout_s: float, tls: UpstreamTls | None = None
) -> None:
    """Connect to a bootstrap broker and hang up; ``UpstreamError`` naming each address
    tried if none accepts (TLS included: a refused handshake is unreachable too)."""
    errors = []
    for address in bootstrap:
        link = UpstreamLink(address, timeout_s, tls=tls)
        try:
            await link.connect()
            return
        except (TimeoutError, UpstreamError) as exc:
            errors.append(str(exc))
        finally:
            await link.close()
    raise UpstreamError("; ".join(errors) or "no upstream bootstrap brokers")
