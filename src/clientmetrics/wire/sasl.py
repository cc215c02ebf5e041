"""SaslHandshake (v0-v1) and SaslAuthenticate (v0-v2) inside the connection core.

Two modes, chosen by the listener's policy:

* **terminate**: the core runs the exchange against a ``SaslServer`` (the
  ``wire.mechanism`` contract; the mechanisms live in ``clientmetrics.security``)
  and answers both requests;
* **passthrough** (proxy): both requests are forwarded; the core reads the
  identity the client claims from its token (``identity_of``) and trusts it only
  once the upstream answered the final SaslAuthenticate with success.

As Kafka does: an unknown mechanism gets UNSUPPORTED_SASL_MECHANISM with the
enabled list, a refused credential SASL_AUTHENTICATION_FAILED with the
mechanism's message, and both close the connection after the answer.
SaslHandshake v0 (raw tokens without SaslAuthenticate framing) is refused.

A mechanism with a costly step (PLAIN's PBKDF2, a ``DeferringExchange``) does
not run it here: the step comes back as ``SaslStep.derive`` for the shell to
run off its event loop, and ``verified`` finishes the exchange with the result.

Sizes are checked before anything is parsed: a SaslAuthenticate token larger
than its mechanism takes at that step (``security.base.max_message_bytes``) is
refused with SASL_AUTHENTICATION_FAILED and the connection closed, in both modes
(the server connection also bounds every frame before authentication by
``ListenerPolicy.max_receive_bytes``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from clientmetrics.wire.api import ApiKey
from clientmetrics.wire.auth import AuthEvent, AuthState, IllegalTransition, transition
from clientmetrics.wire.errors import ErrorCode, ProtocolError, UnsupportedApi
from clientmetrics.wire.framing import encode_frame
from clientmetrics.wire.headers import (
    RequestHeader,
    encode_response_header,
    parse_response_header,
    read_uvarint,
    response_header_version,
    write_uvarint,
)
from clientmetrics.wire.mechanism import (
    ANONYMOUS,
    MAX_RECEIVE_BYTES,
    AuthenticationFailed,
    DeferringExchange,
    Derivation,
    SaslExchange,
    SaslServer,
    UnsupportedMechanism,
    max_message_bytes,
)
from clientmetrics.wire.messages import decode_body

__all__ = [
    "ANONYMOUS",
    "ListenerPolicy",
    "SaslSession",
    "SaslStep",
    "authenticate_error_code",
    "expects_response",
]

#: Reads the principal (``User:<name>``) a client claims from its first SaslAuthenticate
#: token (``security.sasl.identity_of``); None if unreadable.
IdentityOf = Callable[[str, bytes], str | None]

#: SaslAuthenticate rounds after which a passthrough exchange is complete.
_PASSTHROUGH_ROUNDS = {"SCRAM-SHA-256": 2, "SCRAM-SHA-512": 2}
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class ListenerPolicy:
    """How one listener authenticates its clients.

    ``requires_sasl``: nothing but ApiVersions and the SASL requests before
    authentication. ``sasl``: terminate mode's mechanisms. ``passthrough``:
    forward the SASL requests (proxy), reading the claimed identity with
    ``identity_of`` (terminate mode reads it too, to count failures per user).
    ``reauth_ms``: KIP-368 ``connections.max.reauth.ms``; a session whose
    credential expires (an OAUTHBEARER token) ends with it even without.
    ``max_receive_bytes``: Kafka's ``sasl.server.max.receive.size``, the largest
    frame taken before authentication on a listener that requires it.
    """

    requires_sasl: bool = False
    sasl: SaslServer | None = None
    passthrough: bool = False
    identity_of: IdentityOf | None = None
    reauth_ms: int | None = None
    max_receive_bytes: int = MAX_RECEIVE_BYTES

    def __post_init__(self) -> None:
        if self.passthrough and self.sasl is not None:
            raise ValueError("a listener either terminates SASL or passes it through")
        if self.requires_sasl and not self.passthrough and self.sasl is None:
            raise ValueError("a SASL listener needs mechanisms (or passthrough)")
        if self.reauth_ms is not None and self.reauth_ms <= 0:
            raise ValueError("reauth_ms must be positive")
        if self.max_receive_bytes < 1024:
            raise ValueError("max_receive_bytes must be at least 1024")


@dataclass(frozen=True, slots=True)
class SaslStep:
    """What one SASL request led to: an answer, a close, or a forward.

    ``authenticated``: the answer completes a successful authentication.
    ``derive``: no answer yet; run this (pure, costly) and pass its result to
    ``SaslSession.verified``.
    """

    response: bytes | None = None
    close: str | None = None
    forward: bool = False
    verdict: bool = False
    authenticated: bool = False
    derive: Callable[[], bytes] | None = None


class SaslSession:
    """The authentication state of one connection; see ``wire.auth`` for the table."""

    def __init__(self, policy: ListenerPolicy, principal: str = ANONYMOUS) -> None:
        self.policy = policy
        self.principal = principal
        self.state = AuthState.AWAITING_HANDSHAKE if policy.requires_sasl else AuthState.READY
        #: Whether requests beyond ApiVersions/SASL may be served (stays true while
        #: a KIP-368 re-authentication runs: the principal was proven already).
        self.proven = not policy.requires_sasl
        self.mechanism: str | None = None
        #: Epoch ms after which the connection must have re-authenticated.
        self.deadline_ms: int | None = None
        self._exchange: SaslExchange | None = None
        #: The SaslAuthenticate whose derivation the shell is running.
        self._verifying: RequestHeader | None = None
        self._claimed: str | None = None
        self._rounds = 0
        #: SaslAuthenticate tokens received since the handshake (the step's size limit).
        self._tokens = 0
        self._authenticated_once = False

    @property
    def claimed(self) -> str | None:
        """The principal the client's first token claims, unverified: for logs, whose
        failure a refused authentication counts as (the failure throttle), and in
        passthrough the principal once the upstream accepts it."""
        return self._claimed

    def session_expired(self, now_ms: int) -> bool:
        return self.deadline_ms is not None and now_ms >= self.deadline_ms

    def fail(self) -> None:
        self.state = transition(self.state, AuthEvent.FAILED)

    def _go(self, event: AuthEvent) -> None:
        self.state = transition(self.state, event)

    # -- requests -------------------------------------------------------------
    def receive(
        self, header: RequestHeader, frame: bytes | bytearray, offset: int, now_ms: int
    ) -> SaslStep:
        """Handle a SaslHandshake or SaslAuthenticate request."""
        policy = self.policy
        if not policy.passthrough and policy.sasl is None:
            # A listener without SASL answers as a Kafka PLAINTEXT listener does.
            return SaslStep(_error(header, ErrorCode.ILLEGAL_SASL_STATE, "SASL is not enabled"))
        if header.api_key == ApiKey.SASL_AUTHENTICATE:
            refused = self._refuse_authenticate(header, frame, offset)
            if refused is not None:
                return refused
        try:
            body = decode_body(header, bytes(frame), offset)
        except UnsupportedApi:
            return SaslStep(_error(header, ErrorCode.UNSUPPORTED_VERSION), "unsupported version")
        if header.api_key == ApiKey.SASL_HANDSHAKE:
            if header.api_version < 1:
                return SaslStep(
                    _handshake(header, ErrorCode.UNSUPPORTED_VERSION, self._mechanisms()),
                    "SaslHandshake v0 is not supported",
                )
            return self._handshake(header, str(body.mechanism))
        self._tokens += 1
        return self._authenticate(header, bytes(body.auth_bytes), now_ms)

    def _refuse_authenticate(
        self, header: RequestHeader, frame: bytes | bytearray, offset: int
    ) -> SaslStep | None:
        """A SaslAuthenticate out of order, or larger than its step takes: refused
        before its body is parsed."""
        if self.state not in (AuthState.AWAITING_AUTHENTICATE, AuthState.AUTHENTICATING):
            return _illegal(header, "unexpected SaslAuthenticate")
        size = _token_size(header, frame, offset)
        limit = max_message_bytes(self.mechanism or "", self._tokens)
        if size <= limit:
            return None
        message = (
            f"Authentication failed: {self.mechanism} message of {size} bytes is larger "
            f"than the {limit} bytes taken"
        )
        answer = _authenticated(header, ErrorCode.SASL_AUTHENTICATION_FAILED, message)
        return SaslStep(answer, message)

    def _mechanisms(self) -> tuple[str, ...]:
        return self.policy.sasl.mechanisms if self.policy.sasl is not None else ()

    def _handshake(self, header: RequestHeader, mechanism: str) -> SaslStep:
        if self.state not in (AuthState.AWAITING_HANDSHAKE, AuthState.READY):
            return _illegal(header, "unexpected SaslHandshake")
        if self.mechanism is not None and mechanism != self.mechanism:
            # KIP-368: re-authentication keeps the mechanism.
            return SaslStep(
                _handshake(header, ErrorCode.UNSUPPORTED_SASL_MECHANISM, (self.mechanism,)),
                f"mechanism {mechanism} cannot replace {self.mechanism} on re-authentication",
            )
        sasl = self.policy.sasl
        self._claimed = None
        if sasl is None:  # passthrough
            self.mechanism = mechanism
            self._rounds = 0
            self._tokens = 0
            self._go(AuthEvent.HANDSHAKE_ACCEPTED)
            return SaslStep(forward=True)
        try:
            if mechanism not in sasl.mechanisms:
                raise UnsupportedMechanism(mechanism)
            self._exchange = sasl.start(mechanism)
        except UnsupportedMechanism:
            return SaslStep(
                _handshake(header, ErrorCode.UNSUPPORTED_SASL_MECHANISM, sasl.mechanisms),
                f"unsupported SASL mechanism {mechanism}",
            )
        self.mechanism = mechanism
        self._tokens = 0
        self._go(AuthEvent.HANDSHAKE_ACCEPTED)
        return SaslStep(_handshake(header, ErrorCode.NONE, sasl.mechanisms))

    def _authenticate(self, header: RequestHeader, token: bytes, now_ms: int) -> SaslStep:
        identity_of = self.policy.identity_of
        if self._claimed is None and identity_of is not None and self.mechanism is not None:
            self._claimed = identity_of(self.mechanism, token)
        if self.policy.passthrough:
            self._go(AuthEvent.FORWARDED)
            return SaslStep(forward=True, verdict=True)
        exchange = self._exchange
        assert exchange is not None  # the handshake state guarantees it
        try:
            if isinstance(exchange, DeferringExchange):
                step = exchange.begin(token, now_ms=now_ms)
                if isinstance(step, Derivation):
                    self._go(AuthEvent.DERIVATION_STARTED)
                    self._verifying = header
                    return SaslStep(derive=step.compute)
                answer = step
            else:
                answer = exchange.respond(token, now_ms=now_ms)
        except AuthenticationFailed as exc:
            return _refused(header, exc)
        return self._answered(header, exchange, answer, now_ms)

    def verified(self, derived: bytes, now_ms: int) -> SaslStep:
        """Finish the exchange with what ``SaslStep.derive`` returned."""
        header, self._verifying = self._verifying, None
        exchange = self._exchange
        if header is None or exchange is None or not isinstance(exchange, DeferringExchange):
            raise IllegalTransition("no SASL derivation is under way")
        try:
            answer = exchange.finish(derived)
        except AuthenticationFailed as exc:
            return _refused(header, exc)
        return self._answered(header, exchange, answer, now_ms)

    def _answered(
        self, header: RequestHeader, exchange: SaslExchange, answer: bytes, now_ms: int
    ) -> SaslStep:
        outcome = exchange.outcome
        if outcome is None:
            self._go(AuthEvent.TOKEN_EXCHANGED)
            return SaslStep(_authenticated(header, ErrorCode.NONE, None, answer))
        if self._authenticated_once and outcome.principal != self.principal:
            message = "Cannot change principals during re-authentication"
            return SaslStep(
                _authenticated(header, ErrorCode.SASL_AUTHENTICATION_FAILED, message), message
            )
        lifetime = self._lifetime(outcome.expires_at_ms, now_ms)
        # A v0 client cannot be told the lifetime (no SessionLifetimeMs): it cannot
        # re-authenticate, so only an expiring credential closes its connection.
        if lifetime and (header.api_version >= 1 or outcome.expires_at_ms is not None):
            self.deadline_ms = now_ms + lifetime
        else:
            self.deadline_ms = None
        self._succeeded(outcome.principal)
        return SaslStep(
            _authenticated(header, ErrorCode.NONE, None, answer, lifetime), authenticated=True
        )

    def _lifetime(self, expires_at_ms: int | None, now_ms: int) -> int:
        """The session's lifetime (0: unbounded): ``reauth_ms``, and never past the
        credential's expiry. Kafka lets a token's session outlive the token unless
        ``connections.max.reauth.ms`` is set; here it ends with it."""
        reauth = self.policy.reauth_ms
        if expires_at_ms is not None:
            left = max(expires_at_ms - now_ms, 1)
            return left if reauth is None else min(reauth, left)
        return reauth or 0

    def _succeeded(self, principal: str) -> None:
        self._go(AuthEvent.AUTHENTICATED)
        self.principal = principal
        self.proven = True
        self._authenticated_once = True
        self._exchange = None

    def upstream_verdict(self, error_code: int) -> str | None:
        """Passthrough: the upstream's SaslAuthenticate error code; a reason to close, or None."""
        if self.state is not AuthState.AWAITING_VERDICT:
            return None if self.state is AuthState.CLOSED else "unexpected SaslAuthenticate answer"
        if error_code != ErrorCode.NONE:
            return f"the upstream refused authentication (error {error_code})"
        self._rounds += 1
        if self._rounds < _PASSTHROUGH_ROUNDS.get(self.mechanism or "", 1):
            self._go(AuthEvent.UPSTREAM_CONTINUED)
            return None
        self._go(AuthEvent.UPSTREAM_SUCCEEDED)
        self.principal = self._claimed or ANONYMOUS
        self.proven = True
        self._authenticated_once = True
        return None


def _token_size(header: RequestHeader, frame: bytes | bytearray, offset: int) -> int:
    """The length of a SaslAuthenticate's ``auth_bytes``, read off its length prefix
    (a negative or unreadable one counts as the whole rest of the frame)."""
    rest = len(frame) - offset
    try:
        if header.api_version >= 2:  # compact bytes: uvarint length + 1
            length, _ = read_uvarint(frame, offset)
            return max(length - 1, 0)
        (length,) = _INT32.unpack_from(frame, offset)
    except (ProtocolError, struct.error):
        return rest
    return length if 0 <= length <= rest else rest


def _refused(header: RequestHeader, exc: AuthenticationFailed) -> SaslStep:
    message = str(exc) or "Authentication failed"
    return SaslStep(_authenticated(header, ErrorCode.SASL_AUTHENTICATION_FAILED, message), message)


def _illegal(header: RequestHeader, message: str) -> SaslStep:
    return SaslStep(_error(header, ErrorCode.ILLEGAL_SASL_STATE, message), message)


def _error(header: RequestHeader, code: ErrorCode, message: str | None = None) -> bytes:
    if header.api_key == ApiKey.SASL_HANDSHAKE:
        return _handshake(header, code, ())
    return _authenticated(header, code, message)


def _response(header: RequestHeader, body: bytes) -> bytes:
    version = response_header_version(header.api_key, header.api_version)
    return encode_frame(encode_response_header(header.correlation_id, version) + body)


def _handshake(header: RequestHeader, code: ErrorCode, mechanisms: tuple[str, ...]) -> bytes:
    """A SaslHandshake response (v0 and v1 share the layout; never flexible)."""
    parts = [_INT16.pack(int(code)), _INT32.pack(len(mechanisms))]
    for name in mechanisms:
        raw = name.encode()
        parts += [_INT16.pack(len(raw)), raw]
    return _response(header, b"".join(parts))


def _authenticated(
    header: RequestHeader,
    code: ErrorCode,
    message: str | None,
    token: bytes = b"",
    lifetime_ms: int = 0,
) -> bytes:
    """A SaslAuthenticate response; v2 is flexible, v1+ carries SessionLifetimeMs."""
    version = header.api_version
    raw = None if message is None else message.encode()
    parts = [_INT16.pack(int(code))]
    if version >= 2:
        parts.append(write_uvarint(0) if raw is None else write_uvarint(len(raw) + 1) + raw)
        parts.append(write_uvarint(len(token) + 1) + token)
    else:
        parts.append(_INT16.pack(-1) if raw is None else _INT16.pack(len(raw)) + raw)
        parts.append(_INT32.pack(len(token)) + token)
    if version >= 1:
        parts.append(_INT64.pack(lifetime_ms))
    if version >= 2:
        parts.append(b"\x00")
    return _response(header, b"".join(parts))


def authenticate_error_code(api_version: int, frame: bytes | bytearray) -> int:
    """The ErrorCode of a SaslAuthenticate response frame (no size prefix)."""
    version = response_header_version(ApiKey.SASL_AUTHENTICATE, api_version)
    _, offset = parse_response_header(bytes(frame[:64]), version)
    try:
        (code,) = _INT16.unpack_from(frame, offset)
    except struct.error as exc:
        raise ProtocolError("truncated SaslAuthenticate response") from exc
    return int(code)


def expects_response(header: RequestHeader, frame: bytes | bytearray, offset: int) -> bool:
    """False only for Produce with acks=0, which Kafka never answers."""
    if header.api_key != ApiKey.PRODUCE:
        return True
    try:
        if header.api_version >= 3:  # transactional_id comes first
            if header.api_version >= 9:  # compact nullable string: uvarint length + 1
                length, offset = read_uvarint(frame, offset)
                offset += max(length - 1, 0)
            else:
                (length,) = _INT16.unpack_from(frame, offset)
                offset += 2 + max(length, 0)
        (acks,) = _INT16.unpack_from(frame, offset)
    except struct.error as exc:
        raise ProtocolError(f"truncated Produce request: {exc}") from exc
    return bool(acks != 0)
