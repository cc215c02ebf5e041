"""How the gateway reaches the upstream cluster: the ``[upstream]`` section.

Two kinds of connection use it. The proxy's own links (one per client
connection, and the Metadata probe) open TLS with the same files when the
protocol is SSL or SASL_SSL; with SASL, the client authenticates itself through
the link (passthrough), so those links carry no credentials of the gateway. The
gateway's librdkafka clients (the topic store) get the same settings in
librdkafka's names, and the SASL credentials when the protocol needs them.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from clientmetrics.errors import ConfigurationError
from clientmetrics.gateway.tls import ReloadingContext, TlsFiles, password_setting, path_setting
from clientmetrics.security.protocol import SecurityProtocol

__all__ = ["SASL_MECHANISMS", "UpstreamSecurity", "UpstreamTls", "upstream_from"]

#: What librdkafka can use for the gateway's own links.
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True, slots=True)
class UpstreamTls:
    """What a link needs to open TLS to a broker."""

    context: ssl.SSLContext
    #: Name checked against the broker's certificate; None: the broker's own host.
    server_hostname: str | None


@dataclass(frozen=True, slots=True)
class UpstreamSecurity:
    """``security.protocol`` and friends, for every connection to the upstream cluster."""

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    files: TlsFiles = field(default_factory=TlsFiles)
    server_hostname: str | None = None
    check_hostname: bool = True
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.files.paths and not self.protocol.tls:
            raise ConfigurationError(
                "[upstream] ca, certificate and private_key need security_protocol SSL or SASL_SSL"
            )
        if (self.server_hostname is not None or not self.check_hostname) and not self.protocol.tls:
            raise ConfigurationError("[upstream] server_hostname and check_hostname need TLS")
        sasl = (self.sasl_mechanism, self.sasl_username, self.sasl_password)
        if any(v is not None for v in sasl):
            if not self.protocol.sasl:
                raise ConfigurationError(
                    "[upstream] sasl_* settings need security_protocol SASL_PLAINTEXT or SASL_SSL"
                )
            if any(v is None for v in sasl):
                raise ConfigurationError(
                    "[upstream] sasl_mechanism, sasl_username and sasl_password go together"
                )
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise ConfigurationError(
                    f"[upstream] sasl_mechanism must be one of {', '.join(SASL_MECHANISMS)}, "
                    f"got {self.sasl_mechanism!r}"
                )

    @property
    def has_credentials(self) -> bool:
        """Whether the gateway has SASL credentials of its own for the cluster."""
        return self.sasl_mechanism is not None

    def context(self) -> ReloadingContext | None:
        """The client-side TLS context for the links (None without TLS).

        Without ``ca`` the system's trusted CAs verify the brokers.
        """
        if not self.protocol.tls:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.check_hostname = self.check_hostname
        if self.files.ca is None:
            context.load_default_certs()
        return ReloadingContext(context, self.files, name="upstream")

    def librdkafka(self) -> dict[str, str]:
        """The same settings in librdkafka's names (the topic store's clients)."""
        out = {"security.protocol": self.protocol.value.lower()}
        files = self.files
        if files.ca is not None:
            out["ssl.ca.location"] = str(files.ca)
        if files.certificate is not None and files.private_key is not None:
            out["ssl.certificate.location"] = str(files.certificate)
            out["ssl.key.location"] = str(files.private_key)
        if files.key_password is not None:
            out["ssl.key.password"] = files.key_password
        if self.protocol.tls:
            out["ssl.endpoint.identification.algorithm"] = (
                "https" if self.check_hostname else "none"
            )
        if self.sasl_mechanism is not None:
            out["sasl.mechanism"] = self.sasl_mechanism
            out["sasl.username"] = str(self.sasl_username)
            out["sasl.password"] = str(self.sasl_password)
        return out


#: The ``[upstream]`` settings.
UPSTREAM_KEYS = frozenset(
    {
        "security_protocol",
        "ca",
        "certificate",
        "private_key",
        "private_key_password",
        "server_hostname",
        "check_hostname",
        "sasl_mechanism",
        "sasl_username",
        "sasl_password",
    }
)


def upstream_from(section: Mapping[str, Any]) -> UpstreamSecurity:
    """The ``[upstream]`` section."""
    unknown = set(section) - UPSTREAM_KEYS
    if unknown:
        raise ConfigurationError(f"unknown [upstream] setting(s): {', '.join(sorted(unknown))}")
    protocol = SecurityProtocol.parse(
        str(section.get("security_protocol", "PLAINTEXT")), "[upstream] security_protocol"
    )
    check = section.get("check_hostname", True)
    if isinstance(check, str):
        check = check.strip().lower() not in ("false", "0", "no")
    files = TlsFiles(
        path_setting(section.get("certificate"), "[upstream] certificate"),
        path_setting(section.get("private_key"), "[upstream] private_key"),
        path_setting(section.get("ca"), "[upstream] ca"),
        password_setting(section.get("private_key_password")),
    )

    def text(key: str) -> str | None:
        value = section.get(key)
        return None if value is None else str(value)

    return UpstreamSecurity(
        protocol,
        files,
        text("server_hostname"),
        bool(check),
        text("sasl_mechanism"),
        text("sasl_username"),
        text("sasl_password"),
    )
