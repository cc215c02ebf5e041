"""Admin client settings: where to connect, the client id, the timeout, and the TLS and
SASL settings read from Kafka client properties (``clientmetrics.client.properties``).
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from clientmetrics.client.properties import (
    ClientSecurity,
    parse_bootstrap,
    parse_properties,
    read_properties,
)
from clientmetrics.client.sasl import SaslCredentials
from clientmetrics.errors import ConfigurationError

__all__ = [
    "AdminConfig",
    "ClientSecurity",
    "parse_bootstrap",
    "parse_properties",
    "read_properties",
]


@dataclass(frozen=True)
class AdminConfig:
    """Where and how to connect. Build it with ``from_properties`` or directly."""

    bootstrap_servers: tuple[tuple[str, int], ...]
    client_id: str = "kafka-client-metrics"
    timeout_s: float = 30.0
    """Bound on each connection attempt and each request round trip."""
    ssl_context: ssl.SSLContext | None = None
    """Set for ``security.protocol=SSL`` and ``SASL_SSL``; ``None`` means no TLS."""
    sasl: SaslCredentials | None = None
    """SASL credentials for ``SASL_PLAINTEXT`` / ``SASL_SSL``."""

    @classmethod
    def from_properties(
        cls, bootstrap: str, props: Mapping[str, str] | None = None, timeout_s: float = 30.0
    ) -> AdminConfig:
        """Settings from a bootstrap list and Java admin client properties."""
        props = dict(props or {})
        security = ClientSecurity.from_properties(props)
        if timeout_s <= 0:
            raise ConfigurationError(f"timeout must be positive, not {timeout_s}")
        return cls(
            bootstrap_servers=parse_bootstrap(bootstrap),
            client_id=props.get("client.id", "kafka-client-metrics"),
            timeout_s=timeout_s,
            ssl_context=security.ssl_context,
            sasl=security.sasl,
        )
