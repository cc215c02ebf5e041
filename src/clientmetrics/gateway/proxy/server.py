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
import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import structlog

from clientmetrics.gateway.config import Address, GatewayConfig
from clientmetrics.gateway.driver import Connection
from clientmetrics.gateway.handlers import ConnectionState, Services
from clientmetrics.gateway.listeners import ListenerSet
from clientmetrics.gateway.proxy.cluster_map import ClusterMap
from clientmetrics.gateway.proxy.guard import StoreTopicGuard
from clientmetrics.gateway.proxy.rewrite import rewriter_for
from clientmetrics.gateway.tasks import OwnedTasks
from clientmetrics.gateway.upstream import Rewriter, UpstreamError, UpstreamLink
from clientmetrics.gateway.upstream_security import UpstreamLogin, UpstreamTls
from clientmetrics.wire import (
    SERVED,
    ZERO_UUID,
    ApiKey,
    ProtocolError,
    RequestHeader,
    decode_response,
    encode_request,
    request_type,
)
from clientmetrics.wire.build import build
from clientmetrics.wire.headers import request_header_version
from clientmetrics.wire.results import NO_RESPONSE, Answer, Close, Request
from clientmetrics.wire.sasl import ListenerPolicy

log = structlog.get_logger("clientmetrics.gateway.proxy")

_PROBE_METADATA_VERSION = 4  # old enough for any broker since 0.11, still in Kafka 4


class UsageCounter(Protocol):
    """Counts what each client produces and consumes through the proxy."""

    def sent(self, conn: ConnectionState, request: Request) -> Callable[[bytes], None] | None:
        """``request`` is going upstream: what to tell its answer's frame (before any
        rewrite), if anything. Told too of a request never answered (acks=0)."""


class ProxyServer:
    """Accepts clients on the bootstrap and broker ports and runs a session for each."""

    def __init__(
        self,
        config: GatewayConfig,
        cluster: ClusterMap,
        services: Services,
        tasks: OwnedTasks,
        *,
        listeners: ListenerSet,
        policy: ListenerPolicy,
        upstream_tls: UpstreamTls | None = None,
        login: UpstreamLogin | None = None,
        clients_log_in: bool = False,
        guard: StoreTopicGuard | None = None,
    ) -> None:
        """``login``: the gateway's own SASL credentials for the cluster; the Metadata
        probe uses them, and with ``clients_log_in`` every client's link too (the
        gateway terminates the clients' SASL). ``guard``: keeps clients off the
        subscription store's topic (the probe learns its id)."""
        self._config = config
        self._cluster = cluster
        #: ``services.spawn`` spawns into ``tasks``: the connections this server ends.
        self._tasks = tasks
        self._services = services
        self._listener = config.listeners[0]
        self._listeners = listeners
        self._policy = policy
        self._upstream_tls = upstream_tls
        self._login = login
        self._client_login = login if clients_log_in else None
        self.guard = guard
        #: Told of every request forwarded, and of its answer (the connection records' usage).
        self.usage: UsageCounter | None = None
        self._servers: dict[int | None, asyncio.Server] = {}
        self._opening: dict[int, asyncio.Lock] = {}
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
        server = await self._listeners.open(self._listener, self._factory(None))
        self._servers[None] = server
        self.port = server.sockets[0].getsockname()[1]
        try:
            await self.probe()
        except UpstreamError as exc:
            # Not fatal: broker ports open once the upstream answers a client.
            log.warning("upstream_unavailable_at_start", error=str(exc))

    async def probe(self) -> None:
        """Ask a bootstrap broker for the cluster's brokers (opens their ports) and,
        when guarded, for the store topic's id."""
        errors = []
        for address in self._cluster.bootstrap:
            link = self._link(address, self._login)
            try:
                await link.connect()
                timeout = self._config.upstream_connect_timeout_s
                response = await asyncio.wait_for(self._ask_metadata(link), timeout)
                for broker in response.brokers:
                    await self._cluster.learn(
                        int(broker.node_id), str(broker.host), int(broker.port)
                    )
                if self.guard is not None:
                    self._learn_store_topic(self.guard, response.topics)
                return
            except (TimeoutError, UpstreamError, ProtocolError) as exc:
                errors.append(str(exc))
            finally:
                await link.close()
        raise UpstreamError("; ".join(errors) or "no upstream bootstrap brokers")

    @staticmethod
    def _learn_store_topic(guard: StoreTopicGuard, topics: Any) -> None:
        for topic in topics:
            if topic.name == guard.topic and int(topic.error_code) == 0:
                guard.learn(getattr(topic, "topic_id", ZERO_UUID))

    async def _ask_metadata(self, link: UpstreamLink) -> Any:
        """The probe's Metadata: v4 (any broker since 0.11, still in Kafka 4), or with a
        guard the newest version both know that carries topic ids (v10+), for the store
        topic; ApiVersions first says which."""
        version, topics = _PROBE_METADATA_VERSION, list[dict[str, Any]]()
        if self.guard is not None:
            versions = await _upstream_versions(link)
            top = min(versions.get(ApiKey.METADATA, (0, 0))[1], SERVED[ApiKey.METADATA][1])
            version = max(version, top)
            topics.append({"name": self.guard.topic, "topic_id": ZERO_UUID})
        return await _inject(
            link,
            ApiKey.METADATA,
            version,
            {"topics": topics, "allow_auto_topic_creation": False},
        )

    async def open_broker_port(self, node_id: int) -> None:
        """Listen on the port standing for upstream node ``node_id`` (idempotent)."""
        lock = self._opening.setdefault(node_id, asyncio.Lock())
        async with lock:
            if node_id in self._servers:
                return
            port = self._config.broker_port(node_id)
            try:
                server = await self._listeners.open(
                    self._listener, self._factory(node_id), port=port
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

    def _link(self, address: Address, login: UpstreamLogin | None) -> UpstreamLink:
        timeout = self._config.upstream_connect_timeout_s
        return UpstreamLink(address, timeout, tls=self._upstream_tls, login=login)

    def _client_link(self, address: Address) -> UpstreamLink:
        return self._link(address, self._client_login)

    def _factory(self, node_id: int | None) -> Callable[[], asyncio.BaseProtocol]:
        own_id = self._config.node_id if node_id is None else node_id
        upstream = _NodeUpstream(self, node_id)

        def make() -> asyncio.BaseProtocol:
            connection = Connection(
                self._services, self._listener, self._policy, node_id=own_id, upstream=upstream
            )
            return connection.protocol

        return make

    async def close(self, timeout: float) -> None:
        """Stop listening and end every session."""
        for server in self._servers.values():
            server.close()
        await self._tasks.cancel(timeout)
        for server in self._servers.values():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 1.0)


class _NodeUpstream:
    """How a client on the port standing for ``node_id`` (None: bootstrap) reaches it."""

    def __init__(self, server: ProxyServer, node_id: int | None) -> None:
        self._server = server
        self._node_id = node_id

    async def connect(self) -> UpstreamLink:
        return await _first_reachable(
            await self._server._upstream_for(self._node_id), self._server._client_link
        )

    def refuse(self, conn: ConnectionState, request: Request) -> Answer | Close | None:
        guard, usage = self._server.guard, self._server.usage
        refusal = None if guard is None else guard.refuse(conn, request)
        if refusal is None and usage is not None and request.id == NO_RESPONSE:
            usage.sent(conn, request)  # forwarded, never answered (the rest: rewriter_for)
        return refusal

    def rewriter_for(self, conn: ConnectionState, request: Request) -> Rewriter | None:
        server, guard = self._server, self._server.guard
        screen = None if guard is None else functools.partial(guard.screen_metadata, request)
        rewrite = rewriter_for(request.header, server._cluster, server._services.served, screen)
        told = None if server.usage is None else server.usage.sent(conn, request)
        return rewrite if told is None else functools.partial(_counted, told, rewrite)


def _counted(
    told: Callable[[bytes], None], rewrite: Rewriter | None, frame: bytes
) -> bytes | Awaitable[bytes]:
    """An answer counted as it came (the hot path: a walk of its headers), then
    rewritten if it must be."""
    told(frame)
    return frame if rewrite is None else rewrite(frame)


async def _inject(link: UpstreamLink, api_key: int, version: int, values: dict[str, Any]) -> Any:
    """One request of the gateway's own on ``link``, and the decoded answer."""
    header = RequestHeader(
        api_key, version, 0, "clientmetrics-proxy", None, request_header_version(api_key, version)
    )
    frame = encode_request(header, build(request_type(api_key, version), values, blank=True))
    _, response = decode_response(api_key, version, await link.inject(frame[4:]))
    return response


async def _upstream_versions(link: UpstreamLink) -> dict[int, tuple[int, int]]:
    # v0: every broker answers it, in any version range.
    response = await _inject(link, ApiKey.API_VERSIONS, 0, {})
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}


async def _first_reachable(
    candidates: Sequence[Address], make: Callable[[Address], UpstreamLink]
) -> UpstreamLink:
    # Several bootstrap brokers: one being down must not stop new clients.
    failure = UpstreamError("no upstream address")
    for address in candidates:
        link = make(address)
        try:
            await link.connect()
        except UpstreamError as exc:
            failure = exc
            continue
        return link
    raise failure


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
