"""SASL in the connection core, against a small fake SaslServer (the real mechanisms
live in ``clientmetrics.security`` and follow the same contract)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import pytest

from clientmetrics.security.base import Authenticated, AuthenticationFailed, SaslExchange
from clientmetrics.wire import (
    ApiKey,
    ErrorCode,
    RequestHeader,
    decode_response,
    encode_request,
    request_type,
)
from clientmetrics.wire.auth import AuthEvent, AuthState, IllegalTransition, transition
from clientmetrics.wire.server import (
    ANONYMOUS,
    Close,
    CloseReason,
    Forward,
    ListenerPolicy,
    Respond,
    Serve,
    ServerConnection,
)
from tests.wire.shell import receive

SERVED = {ApiKey.API_VERSIONS: (0, 4), ApiKey.METADATA: (0, 12)}


@dataclass
class FakeExchange:
    mechanism: str
    rounds: int
    expires_at_ms: int | None
    seen: list[bytes] = field(default_factory=list)
    outcome: Authenticated | None = None

    def respond(self, client_message: bytes, *, now_ms: int) -> bytes:
        self.seen.append(client_message)
        _, user, password = client_message.split(b"\x00")
        if password != b"secret":
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        if len(self.seen) < self.rounds:
            return b"challenge"
        self.outcome = Authenticated(f"User:{user.decode()}", self.expires_at_ms)
        return b"final"


@dataclass
class FakeSasl:
    expires_at_ms: int | None = None
    started: list[FakeExchange] = field(default_factory=list)

    @property
    def mechanisms(self) -> tuple[str, ...]:
        return ("PLAIN", "TWO-ROUNDS")

    def start(self, mechanism: str) -> SaslExchange:
        exchange = FakeExchange(
            mechanism, 2 if mechanism == "TWO-ROUNDS" else 1, self.expires_at_ms
        )
        self.started.append(exchange)
        return exchange


class Client:
    """Builds requests, feeds them to the core, and reads its answers back."""

    def __init__(self, core: ServerConnection) -> None:
        self.core = core
        self.correlation = 0

    def send(self, api_key: int, version: int, now_ms: int = 0, **body: Any) -> Any:
        self.correlation += 1
        header_version = 2 if request_type(api_key, version).__flexible__ else 1
        header = RequestHeader(api_key, version, self.correlation, "c", None, header_version)
        frame = encode_request(header, request_type(api_key, version)(**body))
        (result,) = receive(self.core, frame, now_ms)
        return result

    def answer(self, api_key: int, version: int) -> Any:
        data = b"".join(self.core.data_to_send())
        (size,) = struct.unpack_from(">i", data)
        assert len(data) == size + 4, "exactly one response expected"
        correlation, body = decode_response(api_key, version, data[4:])
        assert correlation == self.correlation
        return body

    def handshake(self, mechanism: str = "PLAIN", version: int = 1) -> Any:
        return self.send(ApiKey.SASL_HANDSHAKE, version, mechanism=mechanism)

    def authenticate(self, token: bytes, version: int = 2, now_ms: int = 0) -> Any:
        return self.send(ApiKey.SASL_AUTHENTICATE, version, now_ms, auth_bytes=token)


def sasl_core(sasl: FakeSasl | None = None, reauth_ms: int | None = None) -> ServerConnection:
    policy = ListenerPolicy(requires_sasl=True, sasl=sasl or FakeSasl(), reauth_ms=reauth_ms)
    return ServerConnection(served=SERVED, policy=policy)


def test_only_api_versions_and_sasl_are_served_before_authentication() -> None:
    client = Client(sasl_core())
    assert isinstance(
        client.send(18, 3, client_software_name="x", client_software_version="1"), Serve
    )
    client.core.complete(0, None)
    result = client.send(
        3,
        12,
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    assert isinstance(result, Close)
    assert result.reason is CloseReason.UNAUTHENTICATED
    assert client.core.state is AuthState.CLOSED


def test_plain_success_records_the_principal_and_serves_requests() -> None:
    client = Client(sasl_core())
    assert client.core.principal == ANONYMOUS
    assert client.handshake() == Respond(0)
    answer = client.answer(17, 1)
    assert int(answer.error_code) == 0
    assert list(answer.mechanisms) == ["PLAIN", "TWO-ROUNDS"]
    assert client.core.state is AuthState.AWAITING_AUTHENTICATE
    assert client.authenticate(b"\x00alice\x00secret") == Respond(1, authenticated=True)
    answer = client.answer(36, 2)
    assert int(answer.error_code) == 0
    assert answer.auth_bytes == b"final"
    assert answer.session_lifetime.total_seconds() == 0  # no re-authentication configured
    assert client.core.principal == "User:alice"
    assert client.core.state is AuthState.READY
    assert isinstance(
        client.send(
            3,
            12,
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
        Serve,
    )


@pytest.mark.parametrize("version", [0, 1, 2])
def test_wrong_password_answers_58_with_the_message_then_closes(version: int) -> None:
    client = Client(sasl_core())
    client.handshake()
    client.answer(17, 1)
    result = client.authenticate(b"\x00alice\x00wrong", version=version)
    assert result == Close(
        CloseReason.AUTHENTICATION_FAILED, "Authentication failed: Invalid username or password"
    )
    answer = client.answer(36, version)
    assert int(answer.error_code) == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert answer.error_message == "Authentication failed: Invalid username or password"
    assert client.core.principal == ANONYMOUS
    assert client.core.closed


def test_unknown_mechanism_gets_33_and_the_enabled_list_then_closes() -> None:
    client = Client(sasl_core())
    result = client.handshake("GSSAPI")
    assert isinstance(result, Close)
    answer = client.answer(17, 1)
    assert int(answer.error_code) == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert list(answer.mechanisms) == ["PLAIN", "TWO-ROUNDS"]


def test_handshake_v0_is_refused_cleanly() -> None:
    client = Client(sasl_core())
    result = client.handshake(version=0)
    assert isinstance(result, Close)
    assert int(client.answer(17, 0).error_code) == ErrorCode.UNSUPPORTED_VERSION


def test_authenticate_without_handshake_is_an_illegal_state() -> None:
    client = Client(sasl_core())
    result = client.authenticate(b"\x00alice\x00secret")
    assert isinstance(result, Close)
    assert int(client.answer(36, 2).error_code) == ErrorCode.ILLEGAL_SASL_STATE


def test_a_multi_round_exchange_completes_on_its_last_round() -> None:
    client = Client(sasl_core())
    client.handshake("TWO-ROUNDS")
    client.answer(17, 1)
    assert client.authenticate(b"\x00bob\x00secret") == Respond(1)  # not yet authenticated
    assert client.answer(36, 2).auth_bytes == b"challenge"
    assert client.core.state is AuthState.AUTHENTICATING
    assert client.core.principal == ANONYMOUS
    assert client.authenticate(b"\x00bob\x00secret") == Respond(2, authenticated=True)
    assert client.answer(36, 2).auth_bytes == b"final"
    assert client.core.principal == "User:bob"


def test_reauth_sends_the_session_lifetime_and_enforces_the_deadline() -> None:
    client = Client(sasl_core(reauth_ms=60_000))
    client.handshake()
    client.answer(17, 1)
    client.authenticate(b"\x00alice\x00secret", now_ms=1_000)
    assert client.answer(36, 2).session_lifetime.total_seconds() == 60
    assert client.core.expired(60_999) is None
    # KIP-368: a new handshake + authenticate on the live connection re-authenticates.
    client.handshake()
    client.answer(17, 1)
    served = client.send(
        3,
        12,
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    assert isinstance(served, Serve)  # served meanwhile: the principal was proven already
    client.core.complete(served.request.id, None)
    client.core.data_to_send()
    client.authenticate(b"\x00alice\x00secret", now_ms=50_000)
    assert client.answer(36, 2).session_lifetime.total_seconds() == 60
    assert client.core.expired(109_999) is None
    close = client.core.expired(110_000)
    assert close is not None
    assert close.reason is CloseReason.SESSION_EXPIRED


def test_a_request_after_the_deadline_closes_the_connection() -> None:
    client = Client(sasl_core(reauth_ms=1_000))
    client.handshake()
    client.authenticate(b"\x00alice\x00secret", now_ms=0)
    client.core.data_to_send()
    result = client.send(18, 3, now_ms=1_000, client_software_name="x", client_software_version="1")
    assert result == Close(CloseReason.SESSION_EXPIRED, "not re-authenticated in time")


def test_the_lifetime_is_capped_by_the_credential_expiry() -> None:
    client = Client(sasl_core(FakeSasl(expires_at_ms=31_000), reauth_ms=60_000))
    client.handshake()
    client.answer(17, 1)
    client.authenticate(b"\x00alice\x00secret", now_ms=1_000)
    assert client.answer(36, 2).session_lifetime.total_seconds() == 30


def test_reauthentication_cannot_change_the_principal() -> None:
    client = Client(sasl_core(reauth_ms=60_000))
    client.handshake()
    client.authenticate(b"\x00alice\x00secret")
    client.core.data_to_send()
    client.handshake()
    client.core.data_to_send()
    result = client.authenticate(b"\x00mallory\x00secret")
    assert isinstance(result, Close)
    assert int(client.answer(36, 2).error_code) == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert client.core.principal == "User:alice"


def test_a_listener_without_sasl_starts_ready_with_the_transport_principal() -> None:
    core = ServerConnection(served=SERVED, principal="User:CN=client1,O=Acme")
    assert core.state is AuthState.READY
    assert core.principal == "User:CN=client1,O=Acme"
    client = Client(core)
    assert client.handshake() == Respond(0, ErrorCode.NONE)
    assert int(client.answer(17, 1).error_code) == ErrorCode.ILLEGAL_SASL_STATE
    assert not core.closed


def identity(mechanism: str, token: bytes) -> str | None:
    if mechanism == "PLAIN":
        return "User:" + token.split(b"\x00")[1].decode()
    if mechanism.startswith("SCRAM") and token.startswith(b"n,,n="):
        return "User:" + token[5:].split(b",")[0].decode()
    return None


def passthrough_core(requires_sasl: bool = True) -> ServerConnection:
    policy = ListenerPolicy(requires_sasl=requires_sasl, passthrough=True, identity_of=identity)
    return ServerConnection(served=SERVED, forwarding=True, policy=policy)


def test_passthrough_trusts_the_claimed_identity_only_after_upstream_success() -> None:
    client = Client(passthrough_core())
    handshake = client.handshake()
    assert isinstance(handshake, Forward)
    assert not handshake.sasl_verdict
    authenticate = client.authenticate(b"\x00carol\x00pw")
    assert isinstance(authenticate, Forward)
    assert authenticate.sasl_verdict
    assert client.core.state is AuthState.AWAITING_VERDICT
    assert client.core.principal == ANONYMOUS
    assert client.core.upstream_authenticated(0) is None
    assert client.core.principal == "User:carol"
    assert client.core.state is AuthState.READY


def test_passthrough_scram_needs_two_successful_rounds() -> None:
    client = Client(passthrough_core())
    client.handshake("SCRAM-SHA-512")
    client.authenticate(b"n,,n=dave,r=abc")
    assert client.core.upstream_authenticated(0) is None
    assert client.core.state is AuthState.AUTHENTICATING
    assert client.core.principal == ANONYMOUS
    client.authenticate(b"c=biws,r=abcdef,p=proof")
    assert client.core.upstream_authenticated(0) is None
    assert client.core.principal == "User:dave"


def test_passthrough_upstream_failure_closes() -> None:
    client = Client(passthrough_core())
    client.handshake()
    client.authenticate(b"\x00carol\x00bad")
    close = client.core.upstream_authenticated(ErrorCode.SASL_AUTHENTICATION_FAILED)
    assert close is not None
    assert close.reason is CloseReason.AUTHENTICATION_FAILED
    assert client.core.principal == ANONYMOUS


def test_passthrough_on_an_open_listener_forwards_and_upgrades_the_principal() -> None:
    client = Client(passthrough_core(requires_sasl=False))
    assert isinstance(
        client.send(
            3,
            12,
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
        Serve,
    )
    client.handshake()
    client.authenticate(b"\x00erin\x00pw")
    client.core.upstream_authenticated(0)
    assert client.core.principal == "User:erin"


def test_the_transition_table_refuses_illegal_events() -> None:
    assert transition(AuthState.AWAITING_HANDSHAKE, AuthEvent.HANDSHAKE_ACCEPTED) is (
        AuthState.AWAITING_AUTHENTICATE
    )
    with pytest.raises(IllegalTransition):
        transition(AuthState.AWAITING_HANDSHAKE, AuthEvent.AUTHENTICATED)
    with pytest.raises(IllegalTransition):
        transition(AuthState.READY, AuthEvent.UPSTREAM_SUCCEEDED)
    assert all(transition(s, AuthEvent.FAILED) is AuthState.CLOSED for s in AuthState)


def test_a_sasl_listener_needs_mechanisms_or_passthrough() -> None:
    with pytest.raises(ValueError, match="mechanisms"):
        ListenerPolicy(requires_sasl=True)
    with pytest.raises(ValueError, match="either"):
        ListenerPolicy(sasl=FakeSasl(), passthrough=True)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_the_upstream_verdict_is_read_from_its_saslauthenticate_answer(version: int) -> None:
    from kio.schema.errors import ErrorCode as KioErrorCode

    from clientmetrics.wire import encode_response, response_type
    from clientmetrics.wire.replies import blank_entity
    from clientmetrics.wire.sasl import authenticate_error_code

    header = RequestHeader(36, version, 3, "c", None, 2 if version >= 2 else 1)
    body = blank_entity(
        response_type(36, version),
        error_code=KioErrorCode.sasl_authentication_failed,
        error_message="bad",
    )
    frame = encode_response(header, body)[4:]
    assert authenticate_error_code(version, frame) == ErrorCode.SASL_AUTHENTICATION_FAILED
