"""The gateway's authorizer: ``[authorization]`` enforced, reloaded on SIGHUP.

Without an ``[authorization]`` section everything is allowed, as on a Kafka broker
without an authorizer. A reload that fails (bad TOML, bad ACL) keeps the ACLs in
force and logs why, so a typo cannot open or close the gateway by accident.
"""

from __future__ import annotations

from pathlib import Path

import structlog

from clientmetrics.addresses import is_loopback
from clientmetrics.errors import ConfigurationError
from clientmetrics.gateway.config import GatewayConfig
from clientmetrics.gateway.config_load import load_authorization
from clientmetrics.gateway.handlers import ConnectionState
from clientmetrics.security.authorizer import AclAuthorizer, AuthorizationConfig
from clientmetrics.security.base import Operation

__all__ = ["CLUSTER_AUTHORIZATION_FAILED_MESSAGE", "AuthorizationHolder", "open_listeners"]

log = structlog.get_logger("clientmetrics.gateway")

#: The message of Kafka's ClusterAuthorizationException for a bare error code.
CLUSTER_AUTHORIZATION_FAILED_MESSAGE = "Cluster authorization failed."


class AuthorizationHolder:
    """The authorizer in force; ``reload`` swaps it for the file's current ACLs."""

    def __init__(self, config: AuthorizationConfig | None, source: Path | None = None) -> None:
        self._source = source
        self._authorizer = AclAuthorizer(config) if config is not None else None

    @property
    def enforced(self) -> bool:
        return self._authorizer is not None

    def allowed(self, conn: ConnectionState, operation: Operation) -> bool:
        """Whether the connection's principal, from its host, may perform ``operation``."""
        if self._authorizer is None:
            return True
        return self._authorizer.authorize(conn.principal, conn.peer_host, operation)

    def reload(self) -> bool:
        """Re-read ``[authorization]`` from the config file; False (and logged) on error."""
        if self._source is None:
            return False
        try:
            config = load_authorization(self._source)
        except ConfigurationError as exc:
            log.error("authorization_reload_failed", source=str(self._source), error=str(exc))
            return False
        self._authorizer = AclAuthorizer(config) if config is not None else None
        log.info(
            "authorization_reloaded",
            source=str(self._source),
            enforced=config is not None,
            acls=len(config.acls) if config is not None else 0,
            super_users=len(config.super_users) if config is not None else 0,
        )
        return True


def open_listeners(config: GatewayConfig) -> list[str]:
    """Listeners anyone who reaches them may use to change subscriptions.

    That is: no ``[authorization]``, a non-loopback address, and no authentication
    (neither SASL nor a required client certificate). The gateway warns about them.
    """
    if config.authorization is not None:
        return []
    client_auth = config.tls.client_auth.value if config.tls is not None else "none"
    return [
        str(listener)
        for listener in config.listeners
        if not is_loopback(listener.address.host)
        and not listener.protocol.sasl
        and not (listener.protocol.tls and client_auth == "required")
    ]
