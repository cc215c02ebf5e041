"""The client side of PLAIN and SCRAM (the admin tool's and the gateway's upstream login).

Expected messages are RFC 4616's layout and RFC 7677's SCRAM-SHA-256 example, byte for byte.
"""

from __future__ import annotations

import pytest

from clientmetrics.security.base import AuthenticationFailed, UnsupportedMechanism
from clientmetrics.security.sasl_client import client_messages

# RFC 7677, section 3.
NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_plain_is_one_message() -> None:
    messages = client_messages("PLAIN", "alice", "s3cret")
    assert next(messages) == b"\x00alice\x00s3cret"
    with pytest.raises(StopIteration):
        messages.send(b"")


def test_scram_sha_256_follows_rfc_7677() -> None:
    messages = client_messages("SCRAM-SHA-256", "user", "pencil", nonce=NONCE)
    assert next(messages) == b"n,,n=user,r=" + NONCE.encode()
    assert messages.send(SERVER_FIRST) == CLIENT_FINAL
    with pytest.raises(StopIteration):
        messages.send(SERVER_FINAL)


def test_a_server_that_does_not_know_the_password_is_refused() -> None:
    messages = client_messages("SCRAM-SHA-256", "user", "pencil", nonce=NONCE)
    next(messages)
    messages.send(SERVER_FIRST)
    with pytest.raises(AuthenticationFailed, match="Invalid SCRAM server message"):
        messages.send(b"v=" + b"A" * 43 + b"=")


def test_only_password_mechanisms_have_a_client() -> None:
    with pytest.raises(UnsupportedMechanism):
        next(client_messages("GSSAPI", "user", "pencil"))
