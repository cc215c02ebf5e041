"""SCRAM credentials as Kafka stores them: salt, StoredKey, ServerKey, iterations.

No clear-text password is ever kept. A credential is derived once (PBKDF2 with the
mechanism's hash, RFC 5802 section 3) and stored per user and mechanism; PLAIN is
checked against the same credential by deriving again with the stored salt. The
text form of one credential is Kafka's own (``ScramCredentialUtils``):
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from clientmetrics.errors import ClientMetricsError

__all__ = [
    "DEFAULT_ITERATIONS",
    "MAX_ITERATIONS",
    "MIN_ITERATIONS",
    "SCRAM_MECHANISMS",
    "CredentialError",
    "CredentialLookup",
    "CredentialShape",
    "Credentials",
    "ScramCredential",
    "derive",
    "dumps_credentials",
    "keys_from_salted_password",
    "loads_credentials",
    "salted_keys",
    "typical_shape",
    "validate_user_name",
]

#: SCRAM mechanism name -> hashlib name, as Kafka's ScramMechanism enum.
SCRAM_MECHANISMS: Mapping[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: Kafka's bounds on the iteration count (ScramMechanism.minIterations / maxIterations).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 8192
FORMAT_VERSION = 1


class CredentialError(ClientMetricsError):
    """A credential, user name or credential file that is not acceptable."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """One user's credential for one SCRAM mechanism."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations})"

    def to_text(self) -> str:
        """Kafka's ``ScramCredentialUtils.credentialToString`` form."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        """Parse ``to_text``'s form; raises ``CredentialError``."""
        try:
            fields = dict(part.split("=", 1) for part in text.split(","))
            return cls(
                salt=base64.b64decode(fields["salt"], validate=True),
                stored_key=base64.b64decode(fields["stored_key"], validate=True),
                server_key=base64.b64decode(fields["server_key"], validate=True),
                iterations=int(fields["iterations"]),
            )
        except (ValueError, KeyError, binascii.Error) as exc:
            raise CredentialError(f"malformed SCRAM credential: {exc}") from exc


def salted_keys(mechanism: str, password: str, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
    """(StoredKey, ServerKey) of RFC 5802: SaltedPassword = Hi(password, salt, i)."""
    digest = _digest(mechanism)
    # RFC 5802 asks for SASLprep; Kafka's clients send the password's UTF-8 as is.
    salted = hashlib.pbkdf2_hmac(digest, password.encode("utf-8"), salt, iterations)
    return keys_from_salted_password(mechanism, salted)


def _digest(mechanism: str) -> str:
    digest = SCRAM_MECHANISMS.get(mechanism)
    if digest is None:
        raise CredentialError(f"unknown SCRAM mechanism {mechanism!r}")
    return digest


def keys_from_salted_password(mechanism: str, salted: bytes) -> tuple[bytes, bytes]:
    """(StoredKey, ServerKey) from SaltedPassword (what AlterUserScramCredentials carries)."""
    digest = _digest(mechanism)
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    return stored_key, server_key


def derive(mechanism: str, password: str, *, salt: bytes, iterations: int) -> ScramCredential:
    """A new credential; the salt (random, from the caller) and the iteration count are kept."""
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise CredentialError(
            f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, got {iterations}"
        )
    if len(salt) < 16:
        raise CredentialError("the salt must be at least 16 bytes")
    if not password:
        raise CredentialError("the password must not be empty")
    stored_key, server_key = salted_keys(mechanism, password, salt, iterations)
    return ScramCredential(salt, stored_key, server_key, iterations)


def validate_user_name(name: str) -> str:
    """A user name as Kafka accepts it for SCRAM (non-empty, no control characters)."""
    if not name or name != name.strip() or any(ord(c) < 32 for c in name):
        raise CredentialError(f"invalid user name {name!r}")
    return name


#: user -> mechanism -> credential
Credentials = Mapping[str, Mapping[str, ScramCredential]]


@dataclass(frozen=True, slots=True)
class CredentialShape:
    """What a stored credential looks like from outside: its salt's length and
    alphabet, its iteration count. Unknown users get the shape most users have."""

    salt_length: int = 32
    #: The salt's bytes are base-36 text (Kafka's Java tools make such salts),
    #: not random bytes (``clientmetrics users``, librdkafka).
    text_salt: bool = False
    iterations: int = DEFAULT_ITERATIONS


def typical_shape(credentials: Credentials, mechanism: str) -> CredentialShape:
    """The most common shape among the stored credentials of ``mechanism`` (the
    default shape when there are none)."""
    counts: dict[CredentialShape, int] = {}
    for mechs in credentials.values():
        cred = mechs.get(mechanism)
        if cred is not None:
            shape = CredentialShape(
                len(cred.salt), cred.salt.isascii() and cred.salt.isalnum(), cred.iterations
            )
            counts[shape] = counts.get(shape, 0) + 1
    return max(counts, key=counts.__getitem__) if counts else CredentialShape()


class CredentialLookup(Protocol):
    """Where mechanisms find the stored credential of a user (the store implements it)."""

    def scram(self, user: str, mechanism: str) -> ScramCredential | None: ...

    def typical_shape(self, mechanism: str) -> CredentialShape:
        """The shape most stored credentials of ``mechanism`` have (``typical_shape``)."""
        ...


def dumps_credentials(credentials: Credentials) -> str:
    """The credential file's text: JSON, one Kafka-form string per user and mechanism."""
    users = {
        user: {mech: cred.to_text() for mech, cred in sorted(mechs.items())}
        for user, mechs in sorted(credentials.items())
        if mechs
    }
    return json.dumps({"version": FORMAT_VERSION, "users": users}, indent=2) + "\n"


def loads_credentials(text: str) -> dict[str, dict[str, ScramCredential]]:
    """Parse ``dumps_credentials``'s form; raises ``CredentialError``."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise CredentialError(f"credential file is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
        raise CredentialError(f"credential file must be a version {FORMAT_VERSION} document")
    users = doc.get("users")
    if not isinstance(users, dict):
        raise CredentialError("credential file has no 'users' object")
    out: dict[str, dict[str, ScramCredential]] = {}
    for user, mechs in users.items():
        if not isinstance(mechs, dict):
            raise CredentialError(f"credentials of user {user!r} must be an object")
        for mech, text_form in mechs.items():
            if mech not in SCRAM_MECHANISMS or not isinstance(text_form, str):
                raise CredentialError(f"user {user!r}: unknown mechanism {mech!r}")
            out.setdefault(user, {})[mech] = ScramCredential.from_text(text_form)
    return out
