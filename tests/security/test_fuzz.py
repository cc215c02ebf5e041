"""Garbage from a client ends in AuthenticationFailed, never in another exception."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from clientmetrics.security import (
    AuthenticationFailed,
    OAuthBearerConfig,
    SaslConfig,
    build_sasl_server,
    identity_of,
)
from tests.security.conftest import MemoryCredentials
from tests.security.jwts import AUDIENCE, ISSUER, Signer

SIGNER = Signer()
CREDENTIALS = MemoryCredentials()
CREDENTIALS.add("alice", "a password no fuzzer guesses: 7f3a9c1e")
SERVER = build_sasl_server(
    SaslConfig(
        ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"),
        OAuthBearerConfig("test", ISSUER, AUDIENCE),
    ),
    CREDENTIALS,
    seed=b"z" * 16,
    jwks=SIGNER.jwks(),
)
# Shaped like the real first messages, so the fuzzing reaches past the first check.
PREFIXES = [b"", b"\0alice\0", b"n,,n=alice,r=", b"n,,\x01auth=Bearer ", b"c=biws,r="]
messages = st.builds(lambda p, b: p + b, st.sampled_from(PREFIXES), st.binary(max_size=200))


@settings(max_examples=300, deadline=None)
@given(mechanism=st.sampled_from(SERVER.mechanisms), first=messages, second=messages)
def test_any_bytes(mechanism: str, first: bytes, second: bytes) -> None:
    exchange = SERVER.start(mechanism)
    try:
        answer = exchange.respond(first, now_ms=0)
        assert isinstance(answer, bytes)
        if exchange.outcome is None:
            exchange.respond(second, now_ms=0)
    except AuthenticationFailed:
        pass
    # Nobody authenticates by accident: no password or signed token was sent.
    assert exchange.outcome is None
    identity = identity_of(mechanism, first)
    assert identity is None or identity.startswith("User:")
