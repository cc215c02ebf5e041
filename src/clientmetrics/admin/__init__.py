"""clientmetrics.admin: the ``kafka-client-metrics`` tool and a Python admin API.

Manage KIP-714 client-metrics subscriptions (config resources of type 16) on any
broker speaking the standard protocol: this project's gateway or Apache Kafka 3.7+.

    from clientmetrics.admin import alter, describe, subscription_configs

    alter("127.0.0.1:9092", "prod", subscription_configs(metrics=["org.apache.kafka."]))
    print(describe("127.0.0.1:9092", "prod").as_dict())

``AsyncAdmin`` offers the same operations as coroutines.
"""

from clientmetrics.admin.api import (
    CLIENT_METRICS,
    AsyncAdmin,
    ClientMetricsResource,
    ConfigEntry,
    generate_name,
    subscription_configs,
)
from clientmetrics.admin.connection import BrokerConnection, Channel, TcpTransport, Transport
from clientmetrics.admin.errors import (
    AdminAuthenticationError,
    AdminConnectionError,
    AdminError,
    AdminTimeoutError,
)
from clientmetrics.admin.properties import AdminConfig, parse_properties, read_properties
from clientmetrics.admin.sync import (
    Admin,
    alter,
    delete,
    describe,
    describe_all,
    list_client_metrics_resources,
)
from clientmetrics.client.sasl import SaslOAuthBearer, SaslPlain, SaslScram

__all__ = [
    "CLIENT_METRICS",
    "Admin",
    "AdminAuthenticationError",
    "AdminConfig",
    "AdminConnectionError",
    "AdminError",
    "AdminTimeoutError",
    "AsyncAdmin",
    "BrokerConnection",
    "Channel",
    "ClientMetricsResource",
    "ConfigEntry",
    "SaslOAuthBearer",
    "SaslPlain",
    "SaslScram",
    "TcpTransport",
    "Transport",
    "alter",
    "delete",
    "describe",
    "describe_all",
    "generate_name",
    "list_client_metrics_resources",
    "parse_properties",
    "read_properties",
    "subscription_configs",
]
