"""Kafka api keys, as on the wire (``ApiKeys.java``): the one list every module uses."""

from __future__ import annotations

import enum

__all__ = ["ApiKey"]


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
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
