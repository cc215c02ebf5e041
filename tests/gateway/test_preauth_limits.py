"""Before authentication, sizes are refused before anything is parsed, and a clean
client stays served while unauthenticated peers send oversized SASL messages
(against a real `clientmetrics serve` process)."""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import time
from collections.abc import Iterator

import pytest

from clientmetrics.wire import decode_response
from tests import preauth_attacks
from tests.frames import recv_frame
from tests.plain_flood import CleanClient, add_user
from tests.procs import MIN_DEADLINE_S, GatewayProcess, wait_for
from tests.security.jwts import AUDIENCE, ISSUER, Signer

pytestmark = pytest.mark.integration
PASSWORD = "alice-secret"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    work = tmp_path_factory.mktemp("preauth")
    add_user(work / "data", "alice", PASSWORD)
    jwks = work / "jwks.json"
    jwks.write_text(json.dumps(Signer().jwks()))
    config = (
        '[sasl]\nmechanisms = ["PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"]\n'
        f'[sasl.oauthbearer]\njwks = "{jwks}"\nissuer = "{ISSUER}"\naudience = "{AUDIENCE}"\n'
    )
    gw = GatewayProcess(work / "data", config, listen_protocol="SASL_PLAINTEXT").start()
    yield gw
    gw.stop()
    assert gw.tracebacks() == []


def login(port: int, mechanism: str, token: bytes) -> tuple[object, bool]:
    """SaslHandshake then one SaslAuthenticate: (its answer or None, closed after)."""
    with socket.create_connection(("127.0.0.1", port), timeout=MIN_DEADLINE_S) as sock:
        sock.sendall(preauth_attacks.handshake(mechanism))
        recv_frame(sock)
        try:
            sock.sendall(preauth_attacks.authenticate(token))
            _, answer = decode_response(36, 2, recv_frame(sock))
        except (ConnectionError, OSError, AssertionError):
            return None, True
        closed = sock.recv(1) == b""
        return answer, closed


@pytest.mark.parametrize(
    ("mechanism", "token", "limit"),
    [
        ("SCRAM-SHA-512", preauth_attacks.scram_first(600), 512),
        ("OAUTHBEARER", preauth_attacks.oauthbearer_first(20_000), 16384),
        ("PLAIN", b"\0alice\0" + b"p" * 9000, 8192),
    ],
)
def test_an_oversized_token_is_refused_unparsed_and_closed(
    gateway: GatewayProcess, mechanism: str, token: bytes, limit: int
) -> None:
    answer, closed = login(gateway.port, mechanism, token)
    assert answer is not None
    assert int(answer.error_code) == 58  # type: ignore[attr-defined]
    assert f"larger than the {limit} bytes taken" in answer.error_message  # type: ignore[attr-defined]
    assert closed


def test_a_frame_over_512_kib_before_authentication_is_closed_unanswered(
    gateway: GatewayProcess,
) -> None:
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=MIN_DEADLINE_S) as sock:
        sock.sendall(preauth_attacks.handshake("SCRAM-SHA-512"))
        recv_frame(sock)
        # Only the size prefix and a little of the body: the close does not wait for more.
        sock.sendall(struct.pack(">i", 512 * 1024 + 1) + b"\x00" * 1024)
        with contextlib.suppress(ConnectionResetError):
            assert sock.recv(65536) == b""

    def logged() -> bool:  # log lines are written by a thread: the close may come first
        closes = gateway.events("connection_closed_on_protocol_error")
        return any(line["reason"] == "frame_too_large" for line in closes)

    wait_for(logged, 10, what="the frame_too_large close in the log")


def test_a_clean_client_stays_served_beside_pre_authentication_floods(
    gateway: GatewayProcess,
) -> None:
    attacks = [
        preauth_attacks.start(
            kind, f"--port={gateway.port}", f"--size={size}", "--threads=2", "--seconds=4"
        )
        for kind, size in (("scram", 2 * 1024 * 1024), ("oauthbearer", 500_000))
    ]
    try:
        clean = CleanClient(gateway.port, "alice", PASSWORD)
        try:
            times = clean.latencies(3.0)  # asserts every answer's correlation id
        finally:
            clean.close()
    finally:
        results = [json.loads(a.communicate(timeout=120)[0].splitlines()[-1]) for a in attacks]
    assert len(times) >= 20  # round trips completed while the attackers ran
    for result in results:
        assert result["attempts"] >= 1
        assert set(result["codes"]) <= {"closed", "58"}  # never in, never a crash


def test_another_accounts_login_does_not_reset_a_users_failed_login_delay(
    gateway: GatewayProcess,
) -> None:
    """Failures are counted per source and claimed user: alice logging in between two
    guesses at bob's password (from the same address) leaves bob's delay doubling."""
    source = "127.0.0.23"  # an address of its own: other tests' failures count for theirs

    def answered_in(user: str, password: str) -> tuple[int, float]:
        """PLAIN from ``source``: (SaslAuthenticate's error code, seconds to its answer)."""
        address = ("127.0.0.1", gateway.port)
        with socket.create_connection(address, timeout=30, source_address=(source, 0)) as sock:
            sock.sendall(preauth_attacks.handshake("PLAIN"))
            recv_frame(sock)
            started = time.monotonic()
            sock.sendall(preauth_attacks.authenticate(f"\0{user}\0{password}".encode()))
            _, answer = decode_response(36, 2, recv_frame(sock))
            return int(answer.error_code), time.monotonic() - started

    assert answered_in("bob", "guess-1")[0] == 58  # held 100 ms
    assert answered_in("bob", "guess-2")[0] == 58  # held 200 ms
    assert answered_in("alice", PASSWORD)[0] == 0  # forgets alice's failures: none
    code, seconds = answered_in("bob", "guess-3")
    assert code == 58
    # Held 400 ms (100 ms, doubling per failure of the source): a reset would be 100 ms.
    assert seconds >= 0.35
    assert answered_in("alice", PASSWORD)[0] == 0


def test_a_flood_over_the_connection_creation_rate_is_held_off_and_a_clean_client_served(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Attackers reconnecting in a loop (from 127.0.0.2, as from another host) to send
    2 MiB SCRAM messages: past ``connection_creation_rate_per_ip`` their connections
    are held unread, then closed, so they get about one try per throttle, while a
    clean client on 127.0.0.1 is not held up."""
    work = tmp_path_factory.mktemp("creation-rate")
    add_user(work / "data", "alice", PASSWORD)
    config = (
        "[gateway]\nconnection_creation_rate_per_ip = 5\n"
        '[sasl]\nmechanisms = ["PLAIN", "SCRAM-SHA-512"]\n'
    )
    gw = GatewayProcess(work / "data", config, listen_protocol="SASL_PLAINTEXT").start()
    try:
        clean = CleanClient(gw.port, "alice", PASSWORD)  # connected before the flood
        attack = preauth_attacks.start(
            "scram", f"--port={gw.port}", f"--size={2 * 1024 * 1024}", "--threads=4",
            "--seconds=4", "--source=127.0.0.2",
        )  # fmt: skip
        try:
            times = clean.latencies(3.0)  # asserts every answer's correlation id
        finally:
            clean.close()
            result = json.loads(attack.communicate(timeout=120)[0].splitlines()[-1])
        assert len(times) >= 20
        assert set(result["codes"]) == {"closed"}
        # 5 a second, 5 at once: about 25 let in to be read over the 4 s (a little
        # slack for the attack's start-up); every other try was held, then closed.
        throttled = gw.metric("connections_throttled_total")
        assert throttled >= 1
        assert result["attempts"] - throttled <= 5 + 5 * 7, (result, throttled)
        wait_for(lambda: gw.events("connection_throttled"), 10, what="the throttle log line")
        (line, *_) = gw.events("connection_throttled")
        assert (line["peer"], line["limit"]) == ("127.0.0.2", 5)
    finally:
        gw.stop()
    assert gw.tracebacks() == []
