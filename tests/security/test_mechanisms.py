"""PLAIN and SCRAM server mechanisms against stored credentials."""

from __future__ import annotations

import base64
import time

import pytest
import scramp

from clientmetrics.security import (
    Authenticated,
    AuthenticationFailed,
    SaslConfig,
    UnsupportedMechanism,
    build_sasl_server,
    derive,
)
from clientmetrics.security.mechanisms import DummyCredentials, ScramExchange
from tests.security.conftest import MemoryCredentials

SEED = b"0123456789abcdef"


def server(credentials: MemoryCredentials, *mechanisms: str):  # type: ignore[no-untyped-def]
    return build_sasl_server(
        SaslConfig(mechanisms or ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")),
        credentials,
        seed=SEED,
    )


def test_rfc7677_exchange() -> None:
    creds = MemoryCredentials()
    creds.users["user"] = {
        "SCRAM-SHA-256": derive(
            "SCRAM-SHA-256",
            "pencil",
            salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="),
            iterations=4096,
        )
    }
    exchange = ScramExchange(
        "SCRAM-SHA-256", creds, DummyCredentials(SEED), nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    first = exchange.respond(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", now_ms=0)
    assert first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert exchange.outcome is None
    final = exchange.respond(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        now_ms=0,
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert exchange.outcome == Authenticated("User:user")


def scram_login(srv, mechanism: str, user: str, password: str) -> Authenticated | None:  # type: ignore[no-untyped-def]
    client = scramp.ScramClient([mechanism], user, password)
    exchange = srv.start(mechanism)
    server_first = exchange.respond(client.get_client_first().encode(), now_ms=0)
    client.set_server_first(server_first.decode())
    server_final = exchange.respond(client.get_client_final().encode(), now_ms=0)
    client.set_server_final(server_final.decode())
    return exchange.outcome


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_accepts_the_password_and_refuses_others_alike(
    credentials: MemoryCredentials, mechanism: str
) -> None:
    srv = server(credentials)
    assert scram_login(srv, mechanism, "alice", "alice-secret") == Authenticated("User:alice")
    messages = []
    for user, password in (("alice", "wrong"), ("mallory", "alice-secret")):
        with pytest.raises(AuthenticationFailed) as info:
            scram_login(srv, mechanism, user, password)
        messages.append(str(info.value))
    # What Kafka 4.4.0 answers (SaslServerAuthenticator's message for a SaslException).
    kafkas = "Authentication failed during authentication due to invalid credentials"
    assert messages == [f"{kafkas} with SASL mechanism {mechanism}"] * 2


def test_scram_unknown_user_gets_a_stable_salt_like_a_real_one(
    credentials: MemoryCredentials,
) -> None:
    srv = server(credentials)

    def salt_of(user: str) -> str:
        exchange = srv.start("SCRAM-SHA-256")
        first = exchange.respond(f"n,,n={user},r=abcdefgh".encode(), now_ms=0).decode()
        fields = dict(part.split("=", 1) for part in first.split(","))
        return fields["s"]

    assert salt_of("ghost") == salt_of("ghost")
    assert salt_of("ghost") != salt_of("ghost2")


def test_scram_user_names_are_unescaped(credentials: MemoryCredentials) -> None:
    credentials.add("a,b=c", "pw-of-abc")
    srv = server(credentials)
    assert scram_login(srv, "SCRAM-SHA-256", "a,b=c", "pw-of-abc") == Authenticated("User:a,b=c")


def test_plain_checks_the_stored_scram_credential(credentials: MemoryCredentials) -> None:
    srv = server(credentials)
    exchange = srv.start("PLAIN")
    assert exchange.respond(b"\0alice\0alice-secret", now_ms=0) == b""
    assert exchange.outcome == Authenticated("User:alice")
    exchange = srv.start("PLAIN")
    exchange.respond(b"alice\0alice\0alice-secret", now_ms=0)
    assert exchange.outcome == Authenticated("User:alice")


def test_plain_unknown_user_and_wrong_password_same_message_and_cost(
    credentials: MemoryCredentials,
) -> None:
    # Most users' count, so the dummy's too (alice has 4096).
    credentials.add("bob", "bob-secret", iterations=8192)
    credentials.add("carol", "carol-secret", iterations=8192)
    srv = server(credentials)

    def attempt(token: bytes) -> tuple[str, float]:
        start = time.perf_counter()
        for _ in range(5):
            with pytest.raises(AuthenticationFailed) as info:
                srv.start("PLAIN").respond(token, now_ms=0)
        return str(info.value), time.perf_counter() - start

    wrong, wrong_s = attempt(b"\0bob\0nope")
    unknown, unknown_s = attempt(b"\0nobody\0nope")
    assert wrong == unknown == "Authentication failed: Invalid username or password"
    # Both derive 8192 PBKDF2 rounds: the unknown user is not answered much faster.
    assert unknown_s > wrong_s * 0.5


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"alice\0alice-secret", "expected 3 tokens"),
        (b"\0\0pw", "username not specified"),
        (b"\0alice\0", "password not specified"),
        (b"bob\0alice\0alice-secret", "authorization id that is different"),
    ],
)
def test_plain_malformed(credentials: MemoryCredentials, token: bytes, message: str) -> None:
    with pytest.raises(AuthenticationFailed, match=message):
        server(credentials).start("PLAIN").respond(token, now_ms=0)


def test_mechanism_not_enabled(credentials: MemoryCredentials) -> None:
    srv = server(credentials, "SCRAM-SHA-512")
    assert srv.mechanisms == ("SCRAM-SHA-512",)
    with pytest.raises(UnsupportedMechanism):
        srv.start("PLAIN")


def test_plain_derives_once_per_verified_password(
    credentials: MemoryCredentials, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clientmetrics.security import mechanisms

    derivations: list[str] = []
    real = mechanisms.salted_keys

    def counted(*args: object) -> tuple[bytes, bytes]:
        derivations.append(str(args[1]))
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(mechanisms, "salted_keys", counted)
    srv = server(credentials)

    def login(password: str) -> bool:
        try:
            srv.start("PLAIN").respond(f"\0alice\0{password}".encode(), now_ms=0)
        except AuthenticationFailed:
            return False
        return True

    assert login("alice-secret")
    assert login("alice-secret")  # remembered: no second derivation
    assert not login("wrong")
    assert not login("wrong")  # failures always pay
    assert derivations == ["alice-secret", "wrong", "wrong"]
    credentials.add("alice", "new-secret")  # a changed credential is not matched from memory
    assert not login("alice-secret")
    assert login("new-secret")


def test_verified_passwords_are_bounded() -> None:
    from clientmetrics.security.mechanisms import VerifiedPlain

    verified = VerifiedPlain(SEED, max_entries=2)
    for user in ("a", "b", "c"):
        verified.remember(user, "pw", b"key")
    assert [verified.known(u, "pw", b"key") for u in ("a", "b", "c")] == [False, True, True]
    assert not verified.known("b", "other", b"key")


def test_plain_hands_the_derivation_to_the_caller(credentials: MemoryCredentials) -> None:
    from clientmetrics.security import DeferringExchange, Derivation

    srv = server(credentials)
    results = []
    for token in (b"\0alice\0alice-secret", b"\0alice\0wrong", b"\0nobody\0wrong"):
        exchange = srv.start("PLAIN")
        assert isinstance(exchange, DeferringExchange)
        step = exchange.begin(token, now_ms=0)
        # Nothing decided yet: a known user, a wrong password and an unknown user all
        # leave the PBKDF2 to the caller.
        assert isinstance(step, Derivation)
        assert exchange.outcome is None
        try:
            exchange.finish(step.compute())
        except AuthenticationFailed as exc:
            results.append(str(exc))
        else:
            results.append(str(exchange.outcome))
    failed = "Authentication failed: Invalid username or password"
    assert results == [str(Authenticated("User:alice")), failed, failed]
    # The verified password is remembered: the next login needs no derivation.
    exchange = srv.start("PLAIN")
    assert exchange.begin(b"\0alice\0alice-secret", now_ms=0) == b""  # type: ignore[attr-defined]
    assert exchange.outcome == Authenticated("User:alice")


def test_plain_derivation_is_the_stored_key_of_rfc5802(credentials: MemoryCredentials) -> None:
    stored = credentials.scram("alice", "SCRAM-SHA-256")
    assert stored is not None
    step = server(credentials).start("PLAIN").begin(b"\0alice\0alice-secret", now_ms=0)  # type: ignore[attr-defined]
    assert step.compute() == stored.stored_key


def test_plain_finish_without_begin_is_refused(credentials: MemoryCredentials) -> None:
    exchange = server(credentials).start("PLAIN")
    with pytest.raises(AuthenticationFailed, match="unexpected PLAIN message"):
        exchange.finish(b"x" * 32)  # type: ignore[attr-defined]
