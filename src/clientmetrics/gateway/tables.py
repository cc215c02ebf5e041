"""The standalone gateway's handler table: which API key each request goes to."""

from __future__ import annotations

from collections.abc import Mapping

from clientmetrics.gateway.cluster import ClusterHandlers
from clientmetrics.gateway.config import GatewayConfig
from clientmetrics.gateway.config_rpcs import ConfigHandlers
from clientmetrics.gateway.handlers import Handler
from clientmetrics.gateway.scram_rpcs import ScramHandlers
from clientmetrics.wire import ApiKey


def standalone_handlers(
    cfg: GatewayConfig,
    ports: Mapping[str, int],
    telemetry: Mapping[int, Handler],
    configs: ConfigHandlers,
    scram: ScramHandlers,
) -> dict[int, Handler]:
    """Every request a standalone gateway serves: the cluster's view of itself (one
    broker, on the listeners bound at ``ports``), ``telemetry``'s KIP-714 requests, the
    client-metrics configs and SCRAM credentials."""
    cluster = ClusterHandlers(
        node_id=cfg.node_id,
        host=cfg.advertised.host,
        port=ports[cfg.listeners[0].name],
        cluster_id=cfg.cluster_id,
        listener_endpoints={
            listener.name: (cfg.advertised_for(listener).host, ports[listener.name])
            for listener in cfg.listeners
        },
    )
    return {
        ApiKey.API_VERSIONS: cluster.api_versions,
        ApiKey.METADATA: cluster.metadata,
        **telemetry,
        ApiKey.DESCRIBE_CONFIGS: configs.describe_configs,
        ApiKey.ALTER_CONFIGS: configs.alter_configs,
        ApiKey.INCREMENTAL_ALTER_CONFIGS: configs.incremental_alter_configs,
        ApiKey.LIST_CONFIG_RESOURCES: configs.list_config_resources,
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: scram.describe_user_scram_credentials,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: scram.alter_user_scram_credentials,
    }
