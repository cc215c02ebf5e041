"""PLAIN's costly check as a step of the connection core (sans-IO).

The core hands PLAIN's PBKDF2 out as a ``Verify`` result; whatever runs it (the
gateway runs it off the event loop) feeds the result back through ``verified``,
which answers the SaslAuthenticate; the shell (the driver; here tests/wire/shell.py)
then hands in the frames it held meanwhile. The
mechanisms are the product's own, over in-memory SCRAM credentials.
"""

from __future__ import annotations

import hashlib
import hmac

import pytest

from clientmetrics.security import SaslConfig, build_sasl_server
from clientmetrics.security.credentials import derive
from clientmetrics.security.mechanisms import DummyCredentials
from clientmetrics.wire import ApiKey, ErrorCode, decode_response, encode_request, request_type
from clientmetrics.wire.auth import AuthState, IllegalTransition
from clientmetrics.wire.headers import RequestHeader
from clientmetrics.wire.server import (
    ANONYMOUS,
    Close,
    CloseReason,
    ListenerPolicy,
    Respond,
    Serve,
    ServerConnection,
    Verify,
)
from tests.security.conftest import MemoryCredentials
from tests.wire.shell import receive, verified
from tests.wire.test_server_sasl import SERVED, Client

FAILED = "Authentication failed: Invalid username or password"
SALT = b"0123456789abcdef"
SEED = b"s" * 16
DUMMY = DummyCredentials(SEED)


@pytest.fixture
def sasl():  # type: ignore[no-untyped-def]
    credentials = MemoryCredentials()
    credentials.users["alice"] = {
        "SCRAM-SHA-512": derive("SCRAM-SHA-512", "alice-secret", salt=SALT, iterations=4096)
    }
    return build_sasl_server(SaslConfig(("PLAIN",)), credentials, seed=SEED)


def plain_client(sasl, reauth_ms: int | None = None) -> Client:  # type: ignore[no-untyped-def]
    policy = ListenerPolicy(requires_sasl=True, sasl=sasl, reauth_ms=reauth_ms)
    client = Client(ServerConnection(served=SERVED, policy=policy))
    assert client.handshake() == Respond(0)
    assert int(client.answer(17, 1).error_code) == 0
    return client


def frame(client: Client, api_key: int, version: int, **body: object) -> bytes:
    """A request frame, numbered by the client but not sent."""
    client.correlation += 1
    header_version = 2 if request_type(api_key, version).__flexible__ else 1
    header = RequestHeader(api_key, version, client.correlation, "c", None, header_version)
    return encode_request(header, request_type(api_key, version)(**body))


def login_answer(client: Client) -> tuple[int, int]:
    """(correlation id, error code) of the one SaslAuthenticate v2 answer written."""
    (data,) = client.core.data_to_send()
    correlation, body = decode_response(36, 2, data[4:])
    return correlation, int(body.error_code)


def api_versions(client: Client) -> bytes:
    return frame(client, 18, 3, client_software_name="x", client_software_version="1")


def test_plain_is_verified_outside_the_core_then_answered(sasl) -> None:  # type: ignore[no-untyped-def]
    client = plain_client(sasl, reauth_ms=60_000)
    verify = client.authenticate(b"\x00alice\x00alice-secret", version=1, now_ms=1_000)
    assert isinstance(verify, Verify)
    assert verify.request_id == 1
    assert client.core.state is AuthState.VERIFYING
    assert client.core.verifying
    assert client.core.should_pause()  # not read until the answer is in
    assert client.core.data_to_send() == []  # nothing answered yet
    derived = verify.derive()
    assert derived == stored_key("sha512", b"alice-secret", SALT, 4096)
    assert verified(client.core, derived, 5_000) == [Respond(1, authenticated=True)]
    answer = client.answer(36, 1)
    assert int(answer.error_code) == 0
    # The session lifetime counts from the end of the check.
    assert answer.session_lifetime.total_seconds() == 60
    assert client.core.sasl.deadline_ms == 65_000
    assert client.core.principal == "User:alice"
    assert client.core.state is AuthState.READY
    assert not client.core.should_pause()
    # A password verified once is remembered: the next login is answered at once.
    again = plain_client(sasl)
    assert again.authenticate(b"\x00alice\x00alice-secret") == Respond(1, authenticated=True)


def stored_key(digest: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    """RFC 5802: StoredKey = H(HMAC(Hi(password, salt, i), "Client Key"))."""
    salted = hashlib.pbkdf2_hmac(digest, password, salt, iterations)
    return hashlib.new(digest, hmac.new(salted, b"Client Key", digest).digest()).digest()


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        (b"\x00alice\x00wrong", stored_key("sha512", b"wrong", SALT, 4096)),
        # An unknown user is derived against the dummy credential (8192 rounds).
        (
            b"\x00mallory\x00alice-secret",
            stored_key("sha256", b"alice-secret", DUMMY.salt("SCRAM-SHA-256", "mallory"), 8192),
        ),
    ],
    ids=["wrong", "unknown"],
)
@pytest.mark.parametrize("version", [0, 1, 2])
def test_wrong_password_and_unknown_user_both_pay_the_derivation(
    sasl,  # type: ignore[no-untyped-def]
    token: bytes,
    expected: bytes,
    version: int,
) -> None:
    client = plain_client(sasl)
    verify = client.authenticate(token, version=version)
    assert isinstance(verify, Verify)
    derived = verify.derive()
    assert derived == expected
    assert verified(client.core, derived, 0) == [Close(CloseReason.AUTHENTICATION_FAILED, FAILED)]
    answer = client.answer(36, version)
    assert int(answer.error_code) == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert answer.error_message == FAILED
    assert client.core.principal == ANONYMOUS
    assert client.core.closed


def test_frames_received_while_verifying_are_held_in_order(sasl) -> None:  # type: ignore[no-untyped-def]
    client = plain_client(sasl)
    auth = frame(client, ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"\x00alice\x00alice-secret")
    first, second = api_versions(client), api_versions(client)
    results = receive(client.core, auth + first + second[:7], 0)
    assert len(results) == 1
    verify = results[0]
    assert isinstance(verify, Verify)
    # More bytes while verifying: cut into frames, held, not served.
    assert receive(client.core, second[7:], 0) == []
    with pytest.raises(IllegalTransition):
        client.core.receive_frame(first[4:], 0)  # the shell holds them, not the core
    results = verified(client.core, verify.derive(), 0)
    assert results[0] == Respond(1, authenticated=True)
    assert [type(r) for r in results[1:]] == [Serve, Serve]
    assert [r.request.id for r in results[1:]] == [2, 3]  # type: ignore[union-attr]
    assert [r.request.header.correlation_id for r in results[1:]] == [3, 4]  # type: ignore[union-attr]
    assert login_answer(client) == (2, 0)  # only the login is answered so far
    assert client.core.in_flight == 2  # the two ApiVersions, for their handlers


def test_held_frames_are_dropped_when_the_check_fails(sasl) -> None:  # type: ignore[no-untyped-def]
    client = plain_client(sasl)
    auth = frame(client, ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"\x00alice\x00nope")
    (verify,) = receive(client.core, auth + api_versions(client), 0)
    assert isinstance(verify, Verify)
    assert verified(client.core, verify.derive(), 0) == [
        Close(CloseReason.AUTHENTICATION_FAILED, FAILED)
    ]
    assert login_answer(client) == (2, ErrorCode.SASL_AUTHENTICATION_FAILED)  # and nothing else


def test_a_request_pipelined_behind_the_login_is_judged_after_it(sasl) -> None:  # type: ignore[no-untyped-def]
    client = plain_client(sasl)
    auth = frame(client, ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"\x00alice\x00alice-secret")
    metadata = frame(
        client,
        3,
        12,
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    (verify,) = receive(client.core, auth + metadata, 0)
    assert isinstance(verify, Verify)
    # Metadata before authentication would close the connection; held, it comes after.
    first, second = verified(client.core, verify.derive(), 0)
    assert first == Respond(1, authenticated=True)
    assert isinstance(second, Serve)
    assert second.request.header.api_key == 3


def test_verified_after_the_connection_was_lost_does_nothing(sasl) -> None:  # type: ignore[no-untyped-def]
    client = plain_client(sasl)
    verify = client.authenticate(b"\x00alice\x00alice-secret")
    assert isinstance(verify, Verify)
    client.core.connection_lost()
    assert verified(client.core, verify.derive(), 0) == []
    assert client.core.principal == ANONYMOUS
    with pytest.raises(IllegalTransition):
        verified(client.core, b"", 0)  # no Verify outstanding


def test_reauthentication_is_verified_too_and_holds_requests(sasl) -> None:  # type: ignore[no-untyped-def]
    client = plain_client(sasl, reauth_ms=60_000)
    verify = client.authenticate(b"\x00alice\x00alice-secret")
    assert isinstance(verify, Verify)
    verified(client.core, verify.derive(), 0)
    client.core.data_to_send()
    client.handshake()
    client.core.data_to_send()
    auth = frame(client, ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"\x00alice\x00changed")
    (verify,) = receive(client.core, auth + api_versions(client), 10_000)
    assert isinstance(verify, Verify)
    assert client.core.state is AuthState.VERIFYING
    results = verified(client.core, verify.derive(), 10_000)
    assert results == [Close(CloseReason.AUTHENTICATION_FAILED, FAILED)]
    assert client.core.principal == "User:alice"  # what it proved before
