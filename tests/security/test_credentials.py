"""Kafka's SCRAM credential storage: derivation vectors and the file format."""

from __future__ import annotations

import base64

import pytest

from clientmetrics.security.credentials import (
    CredentialError,
    ScramCredential,
    derive,
    dumps_credentials,
    loads_credentials,
)

# RFC 7677 section 3: user "user", password "pencil".
RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")


def test_rfc7677_server_key_gives_the_rfc_server_signature() -> None:
    import hashlib
    import hmac

    cred = derive("SCRAM-SHA-256", "pencil", salt=RFC7677_SALT, iterations=4096)
    auth_message = (
        b"n=user,r=rOprNGfwEbeRWgbNEkqO,"
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    )
    signature = hmac.new(cred.server_key, auth_message, hashlib.sha256).digest()
    assert base64.b64encode(signature) == b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    # StoredKey = H(ClientKey) where ClientKey = ClientProof XOR ClientSignature.
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    client_signature = hmac.new(cred.stored_key, auth_message, hashlib.sha256).digest()
    client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
    assert hashlib.sha256(client_key).digest() == cred.stored_key


def test_kafka_text_form_round_trips_and_hides_keys_from_repr() -> None:
    cred = derive("SCRAM-SHA-512", "pw", salt=b"s" * 16, iterations=4096)
    text = cred.to_text()
    assert text.startswith("salt=c3Nzc3Nzc3Nzc3Nzc3Nzcw==,stored_key=")
    assert text.endswith(",iterations=4096")
    assert ScramCredential.from_text(text) == cred
    assert "stored" not in repr(cred)
    assert len(cred.stored_key) == 64


def test_file_format_has_no_password_and_round_trips() -> None:
    creds = {
        "alice": {
            "SCRAM-SHA-256": derive("SCRAM-SHA-256", "hunter2xx", salt=b"a" * 16, iterations=4096)
        }
    }
    text = dumps_credentials(creds)
    assert "hunter2xx" not in text
    assert loads_credentials(text) == creds


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"iterations": 100}, "iterations must be between 4096 and 16384"),
        ({"iterations": 20000}, "iterations must be between 4096 and 16384"),
        ({"salt": b"short"}, "salt must be at least 16 bytes"),
    ],
)
def test_derive_refuses_weak_parameters(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"salt": b"x" * 16, "iterations": 4096, **kwargs}
    with pytest.raises(CredentialError, match=message):
        derive("SCRAM-SHA-256", "pw", **args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"version": 2, "users": {}}',
        '{"version": 1, "users": {"a": {"MD5": "x"}}}',
        '{"version": 1, "users": {"a": {"SCRAM-SHA-256": "salt=!!"}}}',
    ],
)
def test_bad_files_are_refused(text: str) -> None:
    with pytest.raises(CredentialError):
        loads_credentials(text)
