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
from clientmetrics.gateway.limits import ConnectionLimits
from clientmetrics.gateway.listeners import ListenerSet
from clientmetrics.gateway.proxy.cluster_map import ClusterMap
from clientmetrics.gateway.proxy.configs import Slot, SplitConfigs
from clientmetrics.gateway.proxy.rewrite import merged_versions
from clientmetrics.gateway.proxy.server import ProxyServer
from clientmetrics.gateway.proxy.session import ProxyHandler, ProxySession
from clientmetrics.gateway.proxy.upstream import UpstreamError, UpstreamLink
from clientmetrics.gateway.subscriptions import Subscriptions
from clientmetrics.gateway.upstream_security import UpstreamTls
from clientmetrics.wire import ApiKey, RequestHeader
from clientmetrics.wire.sasl import expects_response

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

CONFIG_APIS = (ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS)


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
    limits: ConnectionLimits,
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
    handlers[ApiKey.LIST_CONFIG_RESOURCES] = list_resources
    return ProxyServer(
        config,
        cluster,
        handlers,
        listeners=listeners,
        upstream_tls=upstream_tls,
        limits=limits,
        on_open=on_open,
        on_close=on_close,
    )
