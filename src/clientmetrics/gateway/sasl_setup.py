"""Build the gateway's SASL server at start: credentials, JWKS, the failure throttle.

The mechanisms themselves are sans-IO (``security``); this is where their inputs
are read: the JWKS is fetched once, from a file or an http(s) URL, with a clear
error when it cannot be, so a misconfigured OAUTHBEARER stops the start.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import structlog

from clientmetrics.errors import ClientMetricsError, ConfigurationError
from clientmetrics.gateway.config import GatewayConfig
from clientmetrics.security.credentials import CredentialError
from clientmetrics.security.sasl import MechanismServer, SaslConfig, build_sasl_server, is_url
from clientmetrics.store.credentials import CredentialFile

__all__ = ["MAX_JWKS_BYTES", "keep_jwks_fresh", "load_jwks", "reload_jwks", "sasl_server_for"]

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
