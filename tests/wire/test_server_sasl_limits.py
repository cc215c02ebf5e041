"""What an unauthenticated client can make the connection core buffer and parse.

Sizes are refused before anything is parsed: frames over Kafka's
``sasl.server.max.receive.size`` (512 KiB) before authentication, and SASL tokens
over what their mechanism takes at that step. Also: a session whose credential
expires ends with it, and telemetry requests whose handler fails get a code clients
retry.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pytest

from clientmetrics.security.base import MAX_RECEIVE_BYTES, SaslExchange, max_message_bytes
from clientmetrics.wire import (
    ApiKey,
    ErrorCode,
    RequestHeader,
    blank_entity,
    encode_request,
    request_type,
)
from clientmetrics.wire.errors import FrameTooLarge
from clientmetrics.wire.server import Close, CloseReason, Respond, Serve, ServerConnection
from tests.wire.shell import receive
from tests.wire.test_server_sasl import (
    Client,
    FakeExchange,
    FakeSasl,
    passthrough_core,
    sasl_core,
)


@dataclass
class ScramLikeSasl(FakeSasl):
    """The fake exchange under a real mechanism name, so the real size table applies."""

    @property
    def mechanisms(self) -> tuple[str, ...]:
        return ("SCRAM-SHA-512", "PLAIN", "OAUTHBEARER")

    def start(self, mechanism: str) -> SaslExchange:
        exchange = FakeExchange(mechanism, 2 if mechanism.startswith("SCRAM") else 1, None)
        self.started.append(exchange)
        return exchange


def plain_token(size: int) -> bytes:
    """A PLAIN-shaped token (``\\0user\\0secret``) of exactly ``size`` bytes."""
    return b"\x00" + b"u" * (size - 8) + b"\x00secret"


def test_the_size_table_is_kafkas_ceiling_and_much_less_per_mechanism() -> None:
    assert MAX_RECEIVE_BYTES == 524288
    assert max_message_bytes("SCRAM-SHA-256", 0) == 512
    assert max_message_bytes("SCRAM-SHA-512", 1) == 1024
    assert max_message_bytes("PLAIN", 0) == 8192
    assert max_message_bytes("OAUTHBEARER", 0) == 16384
    assert max_message_bytes("GSSAPI", 0) == MAX_RECEIVE_BYTES  # passed through: the ceiling


def test_a_frame_over_the_ceiling_before_authentication_closes_before_buffering() -> None:
    core = sasl_core()
    # Only the size prefix and a few bytes: the close comes before any body is kept.
    results = receive(core, struct.pack(">i", MAX_RECEIVE_BYTES + 1) + b"\x00" * 64, 0)
    assert len(results) == 1
    assert isinstance(results[0], Close)
    assert results[0].reason is CloseReason.FRAME_TOO_LARGE
    assert core.closed


def test_the_ceiling_is_lifted_once_the_client_authenticated() -> None:
    client = Client(sasl_core())
    client.handshake()
    client.authenticate(b"\x00alice\x00secret")
    client.core.data_to_send()
    assert client.core.frame_limit == client.core.max_request_bytes
    assert receive(client.core, struct.pack(">i", MAX_RECEIVE_BYTES + 1), 0) == []
    assert not client.core.closed


def test_a_large_frame_gets_no_buffer_of_its_own_before_authentication() -> None:
    core = sasl_core()
    core.framer.feed(struct.pack(">i", 100_000), lambda frame: None)
    assert len(core.framer.get_buffer()) == 100_000  # under the ceiling: its own buffer
    core = sasl_core()
    with pytest.raises(FrameTooLarge):
        core.framer.feed(struct.pack(">i", MAX_RECEIVE_BYTES + 1), lambda frame: None)
    assert len(core.framer.get_buffer()) < 100_000  # only the scratch buffer


def test_a_large_frame_a_shell_buffered_itself_is_not_parsed_before_authentication() -> None:
    core = sasl_core()
    result = core.receive_frame(b"\x00" * (MAX_RECEIVE_BYTES + 1), 0)
    assert isinstance(result, Close)
    assert result.reason is CloseReason.FRAME_TOO_LARGE


@pytest.mark.parametrize(
    ("mechanism", "size"), [("PLAIN", 8192), ("SCRAM-SHA-512", 512), ("OAUTHBEARER", 16384)]
)
def test_a_first_token_over_its_mechanisms_size_is_refused_unparsed(
    mechanism: str, size: int
) -> None:
    sasl = ScramLikeSasl()
    client = Client(sasl_core(sasl))
    client.handshake(mechanism)
    client.answer(17, 1)
    result = client.authenticate(plain_token(size + 1))
    assert isinstance(result, Close)
    assert result.reason is CloseReason.AUTHENTICATION_FAILED
    answer = client.answer(36, 2)
    assert int(answer.error_code) == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert f"larger than the {size} bytes" in answer.error_message
    assert sasl.started[0].seen == []  # the mechanism never saw it


@pytest.mark.parametrize("version", [0, 1, 2])
def test_a_token_at_its_mechanisms_size_is_taken(version: int) -> None:
    sasl = ScramLikeSasl()
    client = Client(sasl_core(sasl))
    client.handshake("PLAIN")
    client.answer(17, 1)
    result = client.authenticate(plain_token(8192), version=version)
    assert result == Respond(1, authenticated=True)
    assert sasl.started[0].seen == [plain_token(8192)]


def test_the_second_scram_message_has_a_limit_of_its_own() -> None:
    sasl = ScramLikeSasl()
    client = Client(sasl_core(sasl))
    client.handshake("SCRAM-SHA-512")
    client.authenticate(plain_token(500))  # the fake's first round: a challenge
    client.core.data_to_send()
    result = client.authenticate(plain_token(1025))
    assert isinstance(result, Close)
    assert int(client.answer(36, 2).error_code) == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert len(sasl.started[0].seen) == 1


def test_passthrough_refuses_an_oversized_first_token_without_forwarding_it() -> None:
    client = Client(passthrough_core())
    client.handshake("OAUTHBEARER")
    client.core.complete(0, None)  # the cluster's answer to the forwarded handshake
    result = client.authenticate(b"n,,\x01auth=Bearer " + b"a" * 20_000 + b"\x01\x01")
    assert isinstance(result, Close)
    assert result.reason is CloseReason.AUTHENTICATION_FAILED
    assert int(client.answer(36, 2).error_code) == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_a_token_session_ends_with_the_token_without_reauth_configured() -> None:
    client = Client(sasl_core(FakeSasl(expires_at_ms=31_000)))
    client.handshake()
    client.answer(17, 1)
    client.authenticate(b"\x00alice\x00secret", now_ms=1_000)
    assert client.answer(36, 2).session_lifetime.total_seconds() == 30
    assert client.core.expired(30_999) is None
    close = client.core.expired(31_000)
    assert close is not None
    assert close.reason is CloseReason.SESSION_EXPIRED


def test_a_v0_client_cannot_be_told_but_its_token_session_still_ends() -> None:
    client = Client(sasl_core(FakeSasl(expires_at_ms=31_000)))
    client.handshake()
    client.answer(17, 1)
    client.authenticate(b"\x00alice\x00secret", version=0, now_ms=1_000)
    client.core.data_to_send()
    close = client.core.expired(31_000)
    assert close is not None
    assert close.reason is CloseReason.SESSION_EXPIRED


def test_a_password_session_without_reauth_has_no_deadline() -> None:
    client = Client(sasl_core())
    client.handshake()
    client.answer(17, 1)
    client.authenticate(b"\x00alice\x00secret", now_ms=1_000)
    assert client.answer(36, 2).session_lifetime.total_seconds() == 0
    assert client.core.sasl.deadline_ms is None


@pytest.mark.parametrize(
    ("api_key", "code"),
    [
        (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ErrorCode.THROTTLING_QUOTA_EXCEEDED),
        (ApiKey.PUSH_TELEMETRY, ErrorCode.THROTTLING_QUOTA_EXCEEDED),
        (ApiKey.DESCRIBE_CONFIGS, ErrorCode.UNKNOWN_SERVER_ERROR),
    ],
)
def test_a_failing_telemetry_handler_answers_a_code_clients_retry(
    api_key: int, code: ErrorCode
) -> None:
    versions = {ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: 0, ApiKey.PUSH_TELEMETRY: 0}
    version = versions.get(api_key, 4)
    core = ServerConnection(served={api_key: (version, version)})
    header = RequestHeader(api_key, version, 1, "c", None, 2)
    (result,) = receive(
        core, encode_request(header, blank_entity(request_type(api_key, version))), 0
    )
    assert isinstance(result, Serve)
    assert core.fail(result.request, RuntimeError("disk on fire")) == Respond(0, code)
    assert code.retriable or api_key == ApiKey.DESCRIBE_CONFIGS
