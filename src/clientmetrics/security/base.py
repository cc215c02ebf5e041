"""What the gateway asks before serving a config RPC: the ``Authorizer`` contract.

Sans-IO. The SASL mechanisms' contract (``SaslServer``, ``SaslExchange``,
``Authenticated``, ...) is ``wire.mechanism``'s, below the connection core; it is
re-exported here for the mechanisms that import it from this module.
"""

from __future__ import annotations

import enum
from typing import Protocol

from clientmetrics.wire.mechanism import (
    ANONYMOUS,
    MAX_RECEIVE_BYTES,
    Authenticated,
    AuthenticationFailed,
    DeferringExchange,
    Derivation,
    SaslExchange,
    SaslServer,
    UnsupportedMechanism,
    max_message_bytes,
)

__all__ = [
    "ANONYMOUS",
    "MAX_RECEIVE_BYTES",
    "Authenticated",
    "AuthenticationFailed",
    "Authorizer",
    "DeferringExchange",
    "Derivation",
    "Operation",
    "SaslExchange",
    "SaslServer",
    "UnsupportedMechanism",
    "max_message_bytes",
]


class Operation(enum.Enum):
    """The operations on the CLUSTER resource the gateway checks.

    Client-metrics configs need the ``*_CONFIGS`` ones (KIP-714); the SCRAM credential
    RPCs need ``DESCRIBE`` / ``ALTER``, as in Kafka.
    """

    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"
    ALTER_CONFIGS = "ALTER_CONFIGS"
    #: DescribeUserScramCredentials (Kafka: DESCRIBE on CLUSTER).
    DESCRIBE = "DESCRIBE"
    #: AlterUserScramCredentials (Kafka: ALTER on CLUSTER).
    ALTER = "ALTER"


class Authorizer(Protocol):
    """Decides whether a principal, connecting from a host, may perform an operation."""

    def authorize(self, principal: str, host: str, operation: Operation) -> bool: ...
