"""OAUTHBEARER (RFC 7628) with JWTs checked against a JWKS, as Kafka's OIDC validator.

The client's first message is ``n,,\\x01auth=Bearer <jwt>\\x01\\x01`` (a GS2 header,
then key=value pairs separated by ^A). A token is accepted when its signature
matches a key of the JWKS (asymmetric algorithms only), ``iss`` and ``aud`` are the
configured ones, and ``exp`` is in the future at ``now_ms``; the principal is
``User:`` plus the configured claim. A refused token is answered, as RFC 7628 and
Kafka do, with a JSON error challenge; the client's ``\\x01`` reply ends the
exchange with a failure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jwt

from clientmetrics.security.base import Authenticated, AuthenticationFailed
from clientmetrics.security.mechanisms import user_principal

__all__ = ["ASYMMETRIC_ALGORITHMS", "JwtValidator", "OAuthBearerExchange", "parse_client_message"]

ASYMMETRIC_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
_SEP = b"\x01"


class InvalidToken(Exception):
    """Why a token was refused (kept in the server's log, not sent to the client)."""


def parse_client_message(message: bytes) -> tuple[str, dict[str, str]]:
    """The bearer token and the other key=value extensions of a client-first message."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AuthenticationFailed("Invalid OAUTHBEARER client first message") from exc
    gs2, sep, rest = text.partition("\x01")
    if not sep or not gs2.startswith(("n,", "y,")) or not rest.endswith("\x01\x01"):
        raise AuthenticationFailed("Invalid OAUTHBEARER client first message")
    pairs: dict[str, str] = {}
    for item in rest[:-2].split("\x01"):
        key, eq, value = item.partition("=")
        if not eq:
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message")
        pairs[key] = value
    auth = pairs.pop("auth", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthenticationFailed("Invalid OAUTHBEARER client first message")
    return token.strip(), pairs


@dataclass(frozen=True, slots=True)
class JwtValidator:
    """Checks a JWT's signature against a JWKS and its ``iss``, ``aud`` and ``exp``."""

    keys: jwt.PyJWKSet
    issuer: str
    audience: str
    principal_claim: str = "sub"
    clock_skew_ms: int = 30_000

    @classmethod
    def from_jwks(
        cls, jwks: Mapping[str, Any], *, issuer: str, audience: str, principal_claim: str = "sub"
    ) -> JwtValidator:
        """Build from a parsed JWKS document; raises ``ValueError`` on a bad one."""
        if not issuer or not audience:
            raise ValueError("OAUTHBEARER needs both an issuer and an audience")
        try:
            keys = jwt.PyJWKSet.from_dict(dict(jwks))
        except (jwt.PyJWKSetError, jwt.InvalidKeyError, TypeError) as exc:
            raise ValueError(f"invalid JWKS: {exc}") from exc
        return cls(keys, issuer, audience, principal_claim)

    def _key(self, token: str) -> jwt.PyJWK:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError as exc:
            raise InvalidToken(f"malformed token: {exc}") from exc
        kid = header.get("kid")
        if kid is None:
            if len(self.keys.keys) != 1:
                raise InvalidToken("token has no kid and the JWKS has several keys")
            return self.keys.keys[0]
        try:
            return self.keys[str(kid)]
        except KeyError as exc:
            raise InvalidToken(f"no key {kid!r} in the JWKS") from exc

    def validate(self, token: str, now_ms: int) -> Authenticated:
        """The token's principal and expiry; raises ``InvalidToken``."""
        key = self._key(token)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=list(ASYMMETRIC_ALGORITHMS),
                audience=self.audience,
                issuer=self.issuer,
                # Time is a parameter here: exp and nbf are checked below against now_ms.
                options={
                    "verify_exp": False,
                    "verify_nbf": False,
                    "verify_iat": False,
                    "require": ["exp", "iss", "aud"],
                },
            )
        except jwt.PyJWTError as exc:
            raise InvalidToken(str(exc)) from exc
        exp = claims["exp"]
        if not isinstance(exp, (int, float)) or exp * 1000 <= now_ms - self.clock_skew_ms:
            raise InvalidToken("token has expired")
        nbf = claims.get("nbf")
        if isinstance(nbf, (int, float)) and nbf * 1000 > now_ms + self.clock_skew_ms:
            raise InvalidToken("token is not yet valid")
        name = claims.get(self.principal_claim)
        if not isinstance(name, str) or not name:
            raise InvalidToken(f"token has no {self.principal_claim!r} claim")
        return Authenticated(user_principal(name), expires_at_ms=int(exp * 1000))


class OAuthBearerExchange:
    """One OAUTHBEARER authentication."""

    mechanism = "OAUTHBEARER"

    def __init__(self, validator: JwtValidator) -> None:
        self._validator = validator
        self._outcome: Authenticated | None = None
        self._error: str | None = None
        self._step = 0
        #: Why the token was refused, for the server's log.
        self.refusal: str | None = None

    @property
    def outcome(self) -> Authenticated | None:
        return self._outcome

    def respond(self, client_message: bytes, *, now_ms: int) -> bytes:
        step, self._step = self._step, self._step + 1
        if step == 1 and self._error is not None and client_message == _SEP:
            raise AuthenticationFailed(self._error)
        if step != 0:
            raise AuthenticationFailed("Authentication failed: unexpected OAUTHBEARER message")
        token, _extensions = parse_client_message(client_message)
        try:
            self._outcome = self._validator.validate(token, now_ms)
        except InvalidToken as exc:
            self.refusal = str(exc)
            # Kafka's jsonErrorResponse: the status only, never the reason.
            self._error = json.dumps({"status": "invalid_token"}, separators=(",", ":"))
            return self._error.encode()
        return b""
