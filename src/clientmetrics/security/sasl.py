"""The SASL server a listener enables: ``[sasl]`` configuration, mechanisms, identities.

``build_sasl_server`` turns the validated ``SaslConfig`` into a ``SaslServer`` whose
``start(mechanism)`` returns a fresh exchange; ``identity_of`` reads the claimed
identity from a client's first SASL message without verifying it (proxy
passthrough: trusted only once the cluster has said success).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clientmetrics.errors import ConfigurationError
from clientmetrics.security.base import AuthenticationFailed, SaslExchange, UnsupportedMechanism
from clientmetrics.security.credentials import SCRAM_MECHANISMS, CredentialLookup
from clientmetrics.security.mechanisms import (
    DummyCredentials,
    PlainExchange,
    ScramExchange,
    VerifiedPlain,
    user_principal,
)
from clientmetrics.security.oauthbearer import (
    JwtValidator,
    OAuthBearerExchange,
    parse_client_message,
)

__all__ = [
    "MECHANISMS",
    "MechanismServer",
    "OAuthBearerConfig",
    "SaslConfig",
    "build_sasl_server",
    "identity_of",
    "is_url",
    "parse_sasl",
]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


@dataclass(frozen=True, slots=True)
class OAuthBearerConfig:
    """``[sasl.oauthbearer]``: where the JWKS is, and what a token must say."""

    jwks: str
    issuer: str
    audience: str
    principal_claim: str = "sub"
    #: How often a JWKS URL is fetched again (key rotation), seconds; 0: only on SIGHUP.
    #: Kafka's ``sasl.oauthbearer.jwks.endpoint.refresh.ms`` defaults to one hour.
    jwks_refresh_s: float = 3600.0

    @property
    def jwks_is_url(self) -> bool:
        return is_url(self.jwks)


def is_url(source: str) -> bool:
    """Whether a JWKS source is fetched over HTTP(S) rather than read from a file."""
    return source.startswith(("http://", "https://"))


@dataclass(frozen=True, slots=True)
class SaslConfig:
    """``[sasl]``: the enabled mechanisms, in the order SaslHandshake lists them."""

    mechanisms: tuple[str, ...]
    oauthbearer: OAuthBearerConfig | None = None


#: The ``[sasl]`` and ``[sasl.oauthbearer]`` settings.
SASL_KEYS = frozenset({"mechanisms", "oauthbearer"})
OAUTHBEARER_KEYS = frozenset({"jwks", "issuer", "audience", "principal_claim", "jwks_refresh_s"})


def _oauthbearer(section: object) -> OAuthBearerConfig:
    if not isinstance(section, Mapping):
        raise ConfigurationError("OAUTHBEARER needs a [sasl.oauthbearer] section")
    unknown = set(section) - OAUTHBEARER_KEYS
    if unknown:
        raise ConfigurationError(
            f"unknown [sasl.oauthbearer] setting(s): {', '.join(sorted(unknown))}"
        )
    values: dict[str, str] = {}
    for key in ("jwks", "issuer", "audience"):
        value = section.get(key)
        if not isinstance(value, str) or not value.strip():
            # Kafka 4.4 refuses to start an OIDC validator without issuer and audience.
            raise ConfigurationError(f"[sasl.oauthbearer] {key} is required")
        values[key] = value.strip()
    claim = section.get("principal_claim", "sub")
    if not isinstance(claim, str) or not claim:
        raise ConfigurationError("[sasl.oauthbearer] principal_claim must be a claim name")
    refresh = section.get("jwks_refresh_s", 3600.0)
    if isinstance(refresh, bool) or not isinstance(refresh, (int, float)) or refresh < 0:
        raise ConfigurationError("[sasl.oauthbearer] jwks_refresh_s must be seconds, 0 or more")
    return OAuthBearerConfig(principal_claim=claim, jwks_refresh_s=float(refresh), **values)


def parse_sasl(section: Mapping[str, Any]) -> SaslConfig:
    """Validate the TOML ``[sasl]`` section; raises ``ConfigurationError``."""
    unknown = set(section) - SASL_KEYS
    if unknown:
        raise ConfigurationError(f"unknown [sasl] setting(s): {', '.join(sorted(unknown))}")
    raw = section.get("mechanisms")
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        raise ConfigurationError(
            f"[sasl] mechanisms must be a non-empty list of {', '.join(MECHANISMS)}"
        )
    mechanisms = tuple(str(m).upper() for m in raw)
    bad = [m for m in mechanisms if m not in MECHANISMS]
    if bad:
        raise ConfigurationError(
            f"[sasl] unsupported mechanism(s) {', '.join(bad)}; supported: {', '.join(MECHANISMS)}"
        )
    if len(set(mechanisms)) != len(mechanisms):
        raise ConfigurationError("[sasl] mechanisms lists a mechanism twice")
    oauth = section.get("oauthbearer")
    if "OAUTHBEARER" in mechanisms:
        return SaslConfig(mechanisms, _oauthbearer(oauth))
    if oauth is not None:
        raise ConfigurationError("[sasl.oauthbearer] is set but OAUTHBEARER is not enabled")
    return SaslConfig(mechanisms)


class MechanismServer:
    """``SaslServer`` over the stored credentials and, for OAUTHBEARER, a JWT validator."""

    def __init__(
        self,
        mechanisms: tuple[str, ...],
        credentials: CredentialLookup,
        dummy: DummyCredentials,
        validator: JwtValidator | None,
        oauthbearer: OAuthBearerConfig | None = None,
    ) -> None:
        self._oauthbearer = oauthbearer
        self._mechanisms = mechanisms
        self._credentials = credentials
        self._dummy = dummy
        self._validator = validator
        self._verified = VerifiedPlain(dummy.seed)

    @property
    def mechanisms(self) -> tuple[str, ...]:
        return self._mechanisms

    def use_jwks(self, jwks: Mapping[str, Any]) -> None:
        """Check OAUTHBEARER tokens against a new key set (rotation); exchanges under way
        keep the old one. Raises ``ConfigurationError`` on a bad key set."""
        if self._oauthbearer is None:
            raise ConfigurationError("OAUTHBEARER is not enabled")
        self._validator = _validator(self._oauthbearer, jwks)

    def start(self, mechanism: str) -> SaslExchange:
        if mechanism not in self._mechanisms:
            raise UnsupportedMechanism(
                f"Unsupported SASL mechanism {mechanism}; enabled: {', '.join(self._mechanisms)}"
            )
        if mechanism == "PLAIN":
            return PlainExchange(self._credentials, self._dummy, self._verified)
        if mechanism in SCRAM_MECHANISMS:
            return ScramExchange(mechanism, self._credentials, self._dummy)
        assert self._validator is not None  # build_sasl_server guarantees it
        return OAuthBearerExchange(self._validator)


def build_sasl_server(
    config: SaslConfig,
    credentials: CredentialLookup,
    *,
    seed: bytes,
    jwks: Mapping[str, Any] | None = None,
) -> MechanismServer:
    """The listener's ``SaslServer``.

    ``seed`` is a secret (16+ bytes, the same for every process of a gateway: the
    credential store keeps it) that keeps unknown users' dummy salts stable;
    ``jwks`` is the parsed key set OAUTHBEARER checks tokens against (loaded by the
    caller from the configured file or URL).
    """
    validator = None
    if config.oauthbearer is not None:
        if jwks is None:
            raise ConfigurationError("OAUTHBEARER is enabled but no JWKS was loaded")
        validator = _validator(config.oauthbearer, jwks)
    return MechanismServer(
        config.mechanisms, credentials, DummyCredentials(seed), validator, config.oauthbearer
    )


def _validator(oauth: OAuthBearerConfig, jwks: Mapping[str, Any]) -> JwtValidator:
    try:
        return JwtValidator.from_jwks(
            jwks,
            issuer=oauth.issuer,
            audience=oauth.audience,
            principal_claim=oauth.principal_claim,
        )
    except ValueError as exc:
        raise ConfigurationError(f"[sasl.oauthbearer] jwks {oauth.jwks}: {exc}") from exc


def _scram_user(message: bytes) -> str | None:
    # client-first: gs2-header ("n,," or "n,a=authzid,") then "n=user,r=nonce[,...]"
    parts = message.decode("utf-8").split(",")
    if len(parts) < 4 or (parts[0] not in ("n", "y") and not parts[0].startswith("p=")):
        return None
    for part in parts[2:]:
        if part.startswith("n="):
            return part[2:].replace("=2C", ",").replace("=3D", "=")
    return None


def _unverified_claim(token: str, claim: str) -> str | None:
    segments = token.split(".")
    if len(segments) != 3:
        return None
    payload = segments[1] + "=" * (-len(segments[1]) % 4)
    claims = json.loads(base64.urlsafe_b64decode(payload))
    value = claims.get(claim) if isinstance(claims, dict) else None
    return value if isinstance(value, str) and value else None


def identity_of(mechanism: str, client_bytes: bytes, *, principal_claim: str = "sub") -> str | None:
    """``User:<name>`` claimed by a client's first message, unverified; ``None`` if unreadable."""
    try:
        if mechanism == "PLAIN":
            parts = client_bytes.split(b"\0")
            name = parts[1].decode("utf-8") if len(parts) == 3 else None
        elif mechanism in SCRAM_MECHANISMS:
            name = _scram_user(client_bytes)
        elif mechanism == "OAUTHBEARER":
            token, _ = parse_client_message(client_bytes)
            name = _unverified_claim(token, principal_claim)
        else:
            return None
    except (ValueError, AuthenticationFailed):  # binascii and JSON errors are ValueErrors
        return None
    return user_principal(name) if name else None
