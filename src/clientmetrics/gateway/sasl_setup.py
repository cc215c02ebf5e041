"""Build the gateway's SASL server at start: credentials, JWKS, the failure throttle;
and how each listener authenticates (``listener_policy``).

The mechanisms themselves are sans-IO (``security``); this is where their inputs
are read: the JWKS is fetched once, from a file or an http(s) URL, with a clear
error when it cannot be, so a misconfigured OAUTHBEARER stops the start.
"""

from __future__ import annotations

import asyncio
import functools
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import structlog

from clientmetrics.errors import ClientMetricsError, ConfigurationError
from clientmetrics.gateway.authz import open_listeners
from clientmetrics.gateway.config import GatewayConfig, Listener
from clientmetrics.security import sasl as sasl_mechanisms
from clientmetrics.security.base import SaslServer
from clientmetrics.security.credentials import CredentialError
from clientmetrics.security.sasl import MechanismServer, SaslConfig, build_sasl_server, is_url
from clientmetrics.store.credentials import CredentialFile
from clientmetrics.wire.sasl import IdentityOf
from clientmetrics.wire.server import ListenerPolicy

__all__ = [
    "MAX_JWKS_BYTES",
    "claims_reader",
    "keep_jwks_fresh",
    "listener_policy",
    "load_jwks",
    "reload_jwks",
    "sasl_server_for",
    "warn_unprotected",
]

log = structlog.get_logger("clientmetrics.gateway")

MAX_JWKS_BYTES = 1024 * 1024


def _fetch(url: str, timeout_s: float) -> bytes:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            data: bytes = response.read(MAX_JWKS_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise ConfigurationError(f"cannot fetch JWKS from {url}: HTTP {exc.code}") from exc
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigurationError(f"cannot fetch JWKS from {url}: {reason}") from exc
    return data


def load_jwks(source: str, *, timeout_s: float = 10.0) -> dict[str, Any]:
    """The JWKS document at ``source`` (a file path or an http(s) URL), parsed."""
    if is_url(source):
        data = _fetch(source, timeout_s)
    else:
        try:
            with Path(source).open("rb") as handle:
                data = handle.read(MAX_JWKS_BYTES + 1)
        except OSError as exc:
            raise ConfigurationError(f"cannot read JWKS file {source}: {exc.strerror}") from exc
    if len(data) > MAX_JWKS_BYTES:
        raise ConfigurationError(f"JWKS at {source} is larger than {MAX_JWKS_BYTES} bytes")
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise ConfigurationError(f"JWKS at {source} is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise ConfigurationError(f"JWKS at {source} has no 'keys' list")
    return doc


def sasl_server_for(
    config: GatewayConfig, credentials: CredentialFile | None = None
) -> MechanismServer | None:
    """The ``SaslServer`` for ``[sasl]``, or None when SASL is not configured."""
    if config.sasl is None:
        return None
    jwks = load_jwks(config.sasl.oauthbearer.jwks) if config.sasl.oauthbearer else None
    credentials = credentials or CredentialFile.in_data_dir(config.data_dir)
    try:
        seed = credentials.secret()
    except CredentialError as exc:
        raise ConfigurationError(str(exc)) from exc
    return build_sasl_server(config.sasl, credentials, seed=seed, jwks=jwks)


async def reload_jwks(server: MechanismServer, config: SaslConfig) -> None:
    """Load the OAUTHBEARER JWKS again (SIGHUP, or the refresh); a failure keeps the old."""
    oauth = config.oauthbearer
    if oauth is None:
        return
    try:  # a URL may take a while: not on the event loop
        server.use_jwks(await asyncio.to_thread(load_jwks, oauth.jwks))
    except ClientMetricsError as exc:
        log.error("jwks_reload_failed", source=oauth.jwks, error=str(exc))
    else:
        log.info("jwks_reloaded", source=oauth.jwks)


async def keep_jwks_fresh(server: MechanismServer, config: SaslConfig) -> None:
    """Fetch a JWKS URL again every ``jwks_refresh_s``: identity providers rotate keys."""
    oauth = config.oauthbearer
    if oauth is None or not oauth.jwks_is_url or oauth.jwks_refresh_s <= 0:
        return
    while True:
        await asyncio.sleep(oauth.jwks_refresh_s)
        await reload_jwks(server, config)


def listener_policy(
    config: GatewayConfig,
    listener: Listener,
    sasl: SaslServer | None,
    identity_of: IdentityOf | None,
) -> ListenerPolicy:
    """How clients on ``listener`` authenticate.

    A SASL listener requires authentication: terminated here with ``sasl``, or
    (proxy mode without ``sasl``) passed through to the cluster. Other listeners
    serve SASL requests only in passthrough (proxy) mode, where a client may
    still authenticate with the cluster; standalone answers ILLEGAL_SASL_STATE.
    """
    reauth = config.connections_max_reauth_ms or None
    requires = listener.protocol.sasl
    if sasl is not None and requires:
        return ListenerPolicy(
            requires_sasl=True,
            sasl=sasl,
            reauth_ms=reauth,
            # To name the user a failure tried (the failure throttle counts per user).
            identity_of=identity_of,
        )
    if config.proxy:
        return ListenerPolicy(requires_sasl=requires, passthrough=True, identity_of=identity_of)
    if requires:
        raise ConfigurationError(f"listener {listener} needs SASL mechanisms")
    return ListenerPolicy()


def claims_reader(config: GatewayConfig) -> IdentityOf:
    """The reader of the principal a client claims (unverified), with the configured
    OAUTHBEARER principal claim."""
    sasl = config.sasl
    claim = sasl.oauthbearer.principal_claim if sasl and sasl.oauthbearer else "sub"
    return functools.partial(sasl_mechanisms.identity_of, principal_claim=claim)


def warn_unprotected(config: GatewayConfig) -> None:
    """Say loudly at start who may change subscriptions and credentials unchecked."""
    if exposed := open_listeners(config):
        log.warning(
            "listeners_unauthenticated",
            listeners=exposed,
            hint="no [authorization] and no authentication: anyone who reaches these "
            "listeners may create, change and delete subscriptions",
        )
    if config.sasl is not None and config.authorization is None and not config.proxy:
        log.warning(
            "sasl_without_authorization",
            hint="[sasl] without [authorization]: AlterUserScramCredentials and "
            "DescribeUserScramCredentials are refused to every client (use `clientmetrics "
            "users`, or add [authorization] with super_users), and any authenticated "
            "user may create, change and delete subscriptions",
        )
