"""The PLAIN and SCRAM server mechanisms, over the stored SCRAM credentials.

Unknown users cost the same as known ones and fail with the same message: PLAIN
derives against a dummy credential, SCRAM answers with a dummy salt that is
stable per user name (so repeated attempts look like a real user's) and fails
at the proof, as a wrong password does. The dummy has the shape most stored
credentials have (salt length and alphabet, iteration count), so an unknown
name cannot be told from a known one by its salt or its count either.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import scramp

from clientmetrics.security.base import Authenticated, AuthenticationFailed, Derivation
from clientmetrics.security.credentials import (
    SCRAM_MECHANISMS,
    CredentialLookup,
    CredentialShape,
    ScramCredential,
    salted_keys,
)

__all__ = [
    "DummyCredentials",
    "PlainExchange",
    "ScramExchange",
    "VerifiedPlain",
    "plain_stored_key",
    "user_principal",
]

#: What Kafka's broker answers a refused login: PlainSaslServer's own message; for SCRAM,
#: whose server fails with a SaslException, SaslServerAuthenticator's (seen on 4.4.0).
PLAIN_FAILED = "Authentication failed: Invalid username or password"
SCRAM_FAILED = (
    "Authentication failed during authentication due to invalid credentials "
    "with SASL mechanism {mechanism}"
)
_PLAIN_CHECK_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def user_principal(name: str) -> str:
    """Kafka's principal for an authenticated user name."""
    return f"User:{name}"


class DummyCredentials:
    """Credentials that stand in for users who do not exist.

    ``seed`` is a secret kept with the credentials (the same for every process and
    restart of a gateway, so an unknown user's salt is as stable as a real one's);
    the salt of an unknown user is derived from it and the user's name.
    """

    def __init__(self, seed: bytes) -> None:
        if len(seed) < 16:
            raise ValueError("the dummy credential seed must be at least 16 bytes")
        self._seed = seed

    @property
    def seed(self) -> bytes:
        """The secret (also keys ``VerifiedPlain``)."""
        return self._seed

    def salt(self, mechanism: str, user: str, shape: CredentialShape | None = None) -> bytes:
        shape = shape or CredentialShape()
        stream = b""
        counter = 0
        while len(stream) < shape.salt_length:
            message = f"{mechanism}\0{user}\0{counter}".encode()
            stream += hmac.new(self._seed, message, "sha256").digest()
            counter += 1
        raw = stream[: shape.salt_length]
        if shape.text_salt:
            return bytes(_BASE36[b % 36] for b in raw)
        return raw

    def scram(
        self, mechanism: str, user: str, shape: CredentialShape | None = None
    ) -> ScramCredential:
        shape = shape or CredentialShape()
        salt = self.salt(mechanism, user, shape)
        size = hashlib.new(SCRAM_MECHANISMS[mechanism]).digest_size
        # Keys nobody can match: derived from the secret seed, never from a password.
        key = hmac.new(self._seed, salt, SCRAM_MECHANISMS[mechanism]).digest()[:size]
        return ScramCredential(salt, key, key, shape.iterations)


_BASE36 = b"0123456789abcdefghijklmnopqrstuvwxyz"


def _dummy(
    dummy: DummyCredentials, credentials: CredentialLookup, mechanism: str, user: str
) -> ScramCredential:
    """An unknown user's credential, shaped as the stored ones mostly are."""
    return dummy.scram(mechanism, user, credentials.typical_shape(mechanism))


class VerifiedPlain:
    """Passwords PLAIN has already checked, so a reconnecting client costs no PBKDF2.

    A PBKDF2 derivation takes milliseconds (that is its point); a fleet reconnecting
    with PLAIN would spend seconds of CPU on passwords it has just verified. Only
    successes are remembered, as a keyed hash (the key is the process's secret
    seed) of user, password and the StoredKey they matched, so a changed
    credential is never matched from here. Failures always pay the full price.
    The set is bounded: the oldest entries go first.
    """

    def __init__(self, seed: bytes, max_entries: int = 10_000) -> None:
        self._key = hmac.new(seed, b"verified-plain", "sha256").digest()
        self._max = max_entries
        self._seen: OrderedDict[bytes, None] = OrderedDict()

    def _tag(self, user: str, password: str, stored_key: bytes) -> bytes:
        message = b"\0".join((user.encode(), password.encode(), stored_key))
        return hmac.new(self._key, message, "sha256").digest()

    def known(self, user: str, password: str, stored_key: bytes) -> bool:
        tag = self._tag(user, password, stored_key)
        if tag not in self._seen:
            return False
        self._seen.move_to_end(tag)
        return True

    def remember(self, user: str, password: str, stored_key: bytes) -> None:
        self._seen[self._tag(user, password, stored_key)] = None
        while len(self._seen) > self._max:
            self._seen.popitem(last=False)


def plain_stored_key(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """The StoredKey a PLAIN password gives under a SCRAM credential's salt and count.

    This is the costly PBKDF2 (milliseconds, by design); it reads nothing shared,
    so it may run on any thread.
    """
    return salted_keys(mechanism, password, salt, iterations)[0]


@dataclass(frozen=True, slots=True)
class _Pending:
    """A PLAIN check waiting for its derivation."""

    user: str
    password: str
    reference: ScramCredential
    #: False when ``reference`` is the dummy of an unknown user: never a match.
    known: bool


class PlainExchange:
    """RFC 4616 PLAIN: ``[authzid] NUL authcid NUL passwd``, one message.

    ``begin`` parses and looks the user up; unless the password was verified
    before (``VerifiedPlain``), it returns the PBKDF2 derivation as a
    ``Derivation`` for the caller to run, and ``finish`` compares its result in
    constant time. Unknown users derive against the dummy credential, at the same
    cost as a wrong password.
    """

    mechanism = "PLAIN"

    def __init__(
        self,
        credentials: CredentialLookup,
        dummy: DummyCredentials,
        verified: VerifiedPlain | None = None,
    ) -> None:
        self._credentials = credentials
        self._dummy = dummy
        self._verified = verified
        self._outcome: Authenticated | None = None
        self._done = False
        self._pending: _Pending | None = None

    @property
    def outcome(self) -> Authenticated | None:
        return self._outcome

    def respond(self, client_message: bytes, *, now_ms: int) -> bytes:
        step = self.begin(client_message, now_ms=now_ms)
        return self.finish(step.compute()) if isinstance(step, Derivation) else step

    def begin(self, client_message: bytes, *, now_ms: int) -> bytes | Derivation:
        if self._done:
            raise AuthenticationFailed("Authentication failed: unexpected PLAIN message")
        self._done = True
        user, password = _plain_fields(client_message)
        for mechanism in _PLAIN_CHECK_MECHANISMS:
            stored = self._credentials.scram(user, mechanism)
            if stored is not None:
                break
        else:
            mechanism = _PLAIN_CHECK_MECHANISMS[0]
            stored = None
        verified = self._verified
        if stored is not None and verified and verified.known(user, password, stored.stored_key):
            self._outcome = Authenticated(user_principal(user))
            return b""
        reference = stored or _dummy(self._dummy, self._credentials, mechanism, user)
        self._pending = _Pending(user, password, reference, known=stored is not None)
        return Derivation(
            functools.partial(
                plain_stored_key, mechanism, password, reference.salt, reference.iterations
            )
        )

    def finish(self, derived: bytes) -> bytes:
        pending, self._pending = self._pending, None
        if pending is None:
            raise AuthenticationFailed("Authentication failed: unexpected PLAIN message")
        matched = hmac.compare_digest(derived, pending.reference.stored_key) and pending.known
        if not matched:
            raise AuthenticationFailed(PLAIN_FAILED)
        if self._verified is not None:
            self._verified.remember(pending.user, pending.password, pending.reference.stored_key)
        self._outcome = Authenticated(user_principal(pending.user))
        return b""


def _plain_fields(client_message: bytes) -> tuple[str, str]:
    """(user, password) of a PLAIN message; raises ``AuthenticationFailed`` as Kafka words it."""
    parts = client_message.split(b"\0")
    if len(parts) != 3:
        raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
    try:
        authzid, user, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError as exc:
        raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from exc
    if not user:
        raise AuthenticationFailed("Authentication failed: username not specified")
    if not password:
        raise AuthenticationFailed("Authentication failed: password not specified")
    if authzid and authzid != user:
        raise AuthenticationFailed(
            "Authentication failed: Client requested an authorization id that is "
            "different from username"
        )
    return user, password


class ScramExchange:
    """SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) over scramp's server side."""

    def __init__(
        self,
        mechanism: str,
        credentials: CredentialLookup,
        dummy: DummyCredentials,
        *,
        nonce: str | None = None,
    ) -> None:
        self.mechanism = mechanism
        self._user: str | None = None
        self._outcome: Authenticated | None = None
        self._server = scramp.ScramMechanism(mechanism).make_server(
            self._auth_info(mechanism, credentials, dummy), s_nonce=nonce
        )
        self._step = 0

    def _auth_info(
        self, mechanism: str, credentials: CredentialLookup, dummy: DummyCredentials
    ) -> Callable[[str], tuple[bytes, bytes, bytes, int]]:
        def auth_info(user: str) -> tuple[bytes, bytes, bytes, int]:
            self._user = user
            stored = credentials.scram(user, mechanism) or _dummy(
                dummy, credentials, mechanism, user
            )
            return stored.salt, stored.stored_key, stored.server_key, stored.iterations

        return auth_info

    @property
    def outcome(self) -> Authenticated | None:
        return self._outcome

    def respond(self, client_message: bytes, *, now_ms: int) -> bytes:
        step, self._step = self._step, self._step + 1
        try:
            text = client_message.decode("utf-8")
            if step == 0:
                self._server.set_client_first(text)
                return str(self._server.get_server_first()).encode()
            if step == 1:
                self._server.set_client_final(text)
                final = str(self._server.get_server_final()).encode()
                assert self._user is not None
                self._outcome = Authenticated(user_principal(self._user))
                return final
        except (scramp.ScramException, UnicodeDecodeError) as exc:
            raise AuthenticationFailed(SCRAM_FAILED.format(mechanism=self.mechanism)) from exc
        raise AuthenticationFailed(f"Authentication failed: unexpected {self.mechanism} message")
