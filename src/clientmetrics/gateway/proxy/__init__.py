"""Proxy mode: KIP-714 in front of any Kafka-compatible cluster (see docs/proxy.md).

Every request the gateway does not serve is forwarded, undecoded, to the right
upstream broker; broker addresses in responses are rewritten to gateway ports;
telemetry (71, 72) and client-metrics configs (32, 33, 44, 74) are answered here.
"""

from __future__ import annotations

from collections.abc import Callable

from clientmetrics.gateway.authz import AuthorizationHolder
from clientmetrics.gateway.config import GatewayConfig
from clientmetrics.gateway.config_rpcs import ConfigHandlers
from clientmetrics.gateway.connection import ConnectionState, Handler
from clientmetrics.gateway.listeners import ListenerSet
from clientmetrics.gateway.proxy.cluster_map import ClusterMap
from clientmetrics.gateway.proxy.configs import Slot, SplitConfigs
from clientmetrics.gateway.proxy.rewrite import merged_versions
from clientmetrics.gateway.proxy.server import ProxyServer
from clientmetrics.gateway.proxy.session import ProxyHandler, ProxySession, expects_response
from clientmetrics.gateway.proxy.upstream import UpstreamError, UpstreamLink
from clientmetrics.gateway.subscriptions import Subscriptions
from clientmetrics.gateway.upstream_security import UpstreamTls
from clientmetrics.wire import RequestHeader

__all__ = [
    "ClusterMap",
    "ProxyHandler",
    "ProxyServer",
    "ProxySession",
    "Slot",
    "SplitConfigs",
    "UpstreamError",
    "UpstreamLink",
    "build_proxy",
    "expects_response",
    "merged_versions",
]

GET_TELEMETRY_SUBSCRIPTIONS, PUSH_TELEMETRY = 71, 72
CONFIG_APIS = (32, 33, 44)
LIST_CONFIG_RESOURCES = 74


def _local(handler: Handler) -> ProxyHandler:
    """A standalone handler as a proxy handler: answered here, never forwarded."""

    async def run(
        conn: ConnectionState, header: RequestHeader, frame: bytes, offset: int, link: UpstreamLink
    ) -> Slot:
        return (await handler(conn, header, frame, offset)) or b""

    return run


def build_proxy(
    config: GatewayConfig,
    *,
    listeners: ListenerSet,
    upstream_tls: UpstreamTls | None = None,
    telemetry: dict[int, Handler],
    subscriptions: Subscriptions,
    on_open: Callable[[ConnectionState], None],
    on_close: Callable[[ConnectionState], None],
    authorization: AuthorizationHolder | None = None,
) -> ProxyServer:
    """The proxy listeners, with the gateway's own handlers for 71, 72 and the configs."""
    cluster = ClusterMap(config.upstream, config.advertised.host, config.broker_port)
    configs = ConfigHandlers(
        subscriptions, authorization, max_subscriptions=config.max_subscriptions
    )
    split = SplitConfigs(configs, cluster)

    async def config_request(
        conn: ConnectionState, header: RequestHeader, frame: bytes, offset: int, link: UpstreamLink
    ) -> Slot:
        return await split.config_request(conn, header, frame, link)

    async def list_resources(
        conn: ConnectionState, header: RequestHeader, frame: bytes, offset: int, link: UpstreamLink
    ) -> Slot:
        async def local() -> bytes:
            return await configs.list_config_resources(conn, header, frame, offset)

        return await split.list_config_resources(conn, header, frame, link, local)

    handlers: dict[int, ProxyHandler] = {key: _local(h) for key, h in telemetry.items()}
    handlers.update(dict.fromkeys(CONFIG_APIS, config_request))
    handlers[LIST_CONFIG_RESOURCES] = list_resources
    return ProxyServer(
        config,
        cluster,
        handlers,
        listeners=listeners,
        upstream_tls=upstream_tls,
        on_open=on_open,
        on_close=on_close,
    )
