"""Proxy mode: KIP-714 in front of any Kafka-compatible cluster (see docs/proxy.md).

Every request the gateway does not serve is forwarded, undecoded, to the right
upstream broker; broker addresses in responses are rewritten to gateway ports;
telemetry (71, 72) and client-metrics configs (32, 33, 44, 74) are answered here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from clientmetrics.gateway.authz import AuthorizationHolder
from clientmetrics.gateway.config import GatewayConfig
from clientmetrics.gateway.config_rpcs import ConfigHandlers
from clientmetrics.gateway.handlers import ConnectionState, Handler, Services, served_versions
from clientmetrics.gateway.limits import ConnectionLimits
from clientmetrics.gateway.listeners import ListenerSet
from clientmetrics.gateway.proxy.cluster_map import ClusterMap
from clientmetrics.gateway.proxy.configs import SplitConfigs
from clientmetrics.gateway.proxy.guard import StoreTopicGuard
from clientmetrics.gateway.proxy.rewrite import merged_versions
from clientmetrics.gateway.proxy.server import ProxyServer
from clientmetrics.gateway.subscriptions import Subscriptions
from clientmetrics.gateway.tasks import OwnedTasks
from clientmetrics.gateway.upstream_security import UpstreamLogin, UpstreamTls
from clientmetrics.wire import ApiKey
from clientmetrics.wire.sasl import ListenerPolicy

__all__ = [
    "ClusterMap",
    "ProxyServer",
    "SplitConfigs",
    "StoreTopicGuard",
    "build_proxy",
    "merged_versions",
]

CONFIG_APIS = (ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS)


def build_proxy(
    config: GatewayConfig,
    *,
    listeners: ListenerSet,
    policy: ListenerPolicy,
    limits: ConnectionLimits,
    on_open: Callable[[ConnectionState], None],
    on_close: Callable[[ConnectionState], None],
    telemetry: Mapping[int, Handler],
    subscriptions: Subscriptions | None,
    authorization: AuthorizationHolder | None = None,
    upstream_tls: UpstreamTls | None = None,
    login: UpstreamLogin | None = None,
) -> ProxyServer:
    """The proxy listeners, with the gateway's own handlers for 71, 72 and the configs.

    Without ``subscriptions`` the cluster keeps them (``[proxy] telemetry = "cluster"``):
    the config RPCs, like every request without a handler, are forwarded.
    """
    cluster = ClusterMap(config.upstream, config.advertised.host, config.broker_port)
    handlers: dict[int, Handler] = dict(telemetry)
    guard = None
    if subscriptions is not None and config.store_kind == "topic":
        # Clients never touch the store's topic, whoever carries them upstream.
        guard = StoreTopicGuard(config.subscriptions_topic)
    if subscriptions is not None:
        configs = ConfigHandlers(
            subscriptions, authorization, max_subscriptions=config.max_subscriptions
        )
        split = SplitConfigs(configs, cluster, guard)
        handlers.update(dict.fromkeys(CONFIG_APIS, split.config_request))
        handlers[ApiKey.LIST_CONFIG_RESOURCES] = split.list_config_resources
    tasks = OwnedTasks()
    services = Services(
        handlers,
        served_versions(handlers),
        limits,
        tasks.spawn,
        on_open,
        on_close,
        tls=config.tls,
    )
    return ProxyServer(
        config,
        cluster,
        services,
        tasks,
        listeners=listeners,
        policy=policy,
        upstream_tls=upstream_tls,
        login=login,
        clients_log_in=config.proxy_sasl_terminates,
        guard=guard,
    )
