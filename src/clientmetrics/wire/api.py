"""Kafka's numbered names, as on the wire: api keys (``ApiKeys.java``), config resource types
and IncrementalAlterConfigs operations; the one list of each that every module uses."""

from __future__ import annotations

import enum

__all__ = ["AlterOp", "ApiKey", "ConfigResourceType"]


class ApiKey(enum.IntEnum):
    """The api keys this project names. Unknown keys stay plain ints."""

    PRODUCE = 0
    FETCH = 1
    METADATA = 3
    CONTROLLED_SHUTDOWN = 7
    FIND_COORDINATOR = 10
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    SASL_AUTHENTICATE = 36
    INCREMENTAL_ALTER_CONFIGS = 44
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    LIST_CONFIG_RESOURCES = 74


class ConfigResourceType(enum.IntEnum):
    """``ConfigResource.Type`` ids of the config RPCs (DescribeConfigs, AlterConfigs, ...)."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class AlterOp(enum.IntEnum):
    """IncrementalAlterConfigs ``ConfigOperation`` ids."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3
