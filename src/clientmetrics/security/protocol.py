"""Kafka's security protocols: what a listener or a link to a broker speaks."""

from __future__ import annotations

import enum

from clientmetrics.errors import ConfigurationError

__all__ = ["SecurityProtocol"]


class SecurityProtocol(enum.Enum):
    """``security.protocol`` / a listener's protocol, with Kafka's names."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def tls(self) -> bool:
        """Whether the connection is encrypted with TLS."""
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def sasl(self) -> bool:
        """Whether the client authenticates with SASL."""
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)

    @classmethod
    def parse(cls, text: str, what: str) -> SecurityProtocol:
        """Kafka's spelling, any case; a clear error for anything else."""
        try:
            return cls(text.strip().upper())
        except ValueError:
            names = ", ".join(p.value for p in cls)
            raise ConfigurationError(
                f"{what}: unknown security protocol {text!r} ({names})"
            ) from None
