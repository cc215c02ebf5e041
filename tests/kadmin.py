"""Client-metrics config calls through kafka-python's admin client (a real, independent peer)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient


@contextmanager
def admin(bootstrap: str, **security: object) -> Iterator[KafkaAdminClient]:
    """``security``: kafka-python's own settings (security_protocol, ssl_cafile, ...)."""
    client = KafkaAdminClient(
        bootstrap_servers=bootstrap, client_id="test-admin", request_timeout_ms=10000, **security
    )
    try:
        yield client
    finally:
        client.close()


def set_subscription(
    bootstrap: str, name: str, configs: Mapping[str, str], **security: object
) -> object:
    with admin(bootstrap, **security) as client:
        resource = ConfigResource(ConfigResourceType.CLIENT_METRICS, name, configs=dict(configs))
        return client.alter_configs([resource], incremental=True, raise_on_unknown=False)


def describe_subscription(bootstrap: str, name: str) -> object:
    with admin(bootstrap) as client:
        resource = ConfigResource(ConfigResourceType.CLIENT_METRICS, name)
        return client.describe_configs([resource], config_filter="all")
