"""OAUTHBEARER: JWT signature, issuer, audience and expiry checked; RFC 7628 framing."""

from __future__ import annotations

import pytest

from clientmetrics.errors import ConfigurationError
from clientmetrics.security import (
    Authenticated,
    AuthenticationFailed,
    OAuthBearerConfig,
    SaslConfig,
    build_sasl_server,
    identity_of,
    parse_sasl,
)
from tests.security.conftest import MemoryCredentials
from tests.security.jwts import AUDIENCE, ISSUER, Signer, client_first

NOW_S = 1_800_000_000
NOW_MS = NOW_S * 1000


@pytest.fixture(scope="module")
def signer() -> Signer:
    return Signer()


def server(signer: Signer, claim: str = "sub"):  # type: ignore[no-untyped-def]
    config = SaslConfig(("OAUTHBEARER",), OAuthBearerConfig("jwks.json", ISSUER, AUDIENCE, claim))
    return build_sasl_server(config, MemoryCredentials(), seed=b"s" * 16, jwks=signer.jwks())


def test_valid_token_gives_subject_and_expiry(signer: Signer) -> None:
    exchange = server(signer).start("OAUTHBEARER")
    assert exchange.respond(client_first(signer.token(NOW_S)), now_ms=NOW_MS) == b""
    assert exchange.outcome == Authenticated("User:alice", expires_at_ms=(NOW_S + 600) * 1000)


def test_principal_claim(signer: Signer) -> None:
    exchange = server(signer, "client_id").start("OAUTHBEARER")
    exchange.respond(client_first(signer.token(NOW_S, client_id="svc-7")), now_ms=NOW_MS)
    assert exchange.outcome == Authenticated("User:svc-7", expires_at_ms=(NOW_S + 600) * 1000)


@pytest.mark.parametrize(
    "claims",
    [
        {"exp": NOW_S - 3600},  # expired
        {"iss": "https://other.test"},
        {"aud": "someone-else"},
        {"exp": None},  # no expiry at all
        {"sub": None},
    ],
    ids=["expired", "wrong-issuer", "wrong-audience", "no-exp", "no-sub"],
)
def test_bad_tokens_are_refused_the_rfc7628_way(signer: Signer, claims: dict[str, object]) -> None:
    exchange = server(signer).start("OAUTHBEARER")
    challenge = exchange.respond(client_first(signer.token(NOW_S, **claims)), now_ms=NOW_MS)
    assert challenge == b'{"status":"invalid_token"}'
    assert exchange.outcome is None
    with pytest.raises(AuthenticationFailed, match="invalid_token"):
        exchange.respond(b"\x01", now_ms=NOW_MS)


def test_signature_by_another_key_is_refused(signer: Signer) -> None:
    forged = Signer(kid=signer.kid).token(NOW_S)
    exchange = server(signer).start("OAUTHBEARER")
    assert exchange.respond(client_first(forged), now_ms=NOW_MS) == b'{"status":"invalid_token"}'
    assert exchange.outcome is None


def test_unsigned_and_tampered_tokens_are_refused(signer: Signer) -> None:
    import base64
    import json

    header, payload, sig = signer.token(NOW_S).split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["sub"] = "admin"
    evil = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    none_header = base64.urlsafe_b64encode(b'{"alg":"none","kid":"k1"}').rstrip(b"=").decode()
    for token in (f"{header}.{evil}.{sig}", f"{none_header}.{payload}."):
        exchange = server(signer).start("OAUTHBEARER")
        exchange.respond(client_first(token), now_ms=NOW_MS)
        assert exchange.outcome is None


@pytest.mark.parametrize(
    "message", [b"", b"n,,auth=Bearer x", b"n,,\x01auth=Basic abc\x01\x01", b"\xff\xfe"]
)
def test_malformed_client_messages(signer: Signer, message: bytes) -> None:
    with pytest.raises(AuthenticationFailed, match="Invalid OAUTHBEARER"):
        server(signer).start("OAUTHBEARER").respond(message, now_ms=NOW_MS)


def test_issuer_and_audience_are_required() -> None:
    with pytest.raises(ConfigurationError, match="audience is required"):
        parse_sasl({"mechanisms": ["OAUTHBEARER"], "oauthbearer": {"jwks": "f", "issuer": "i"}})
    with pytest.raises(ConfigurationError, match="issuer is required"):
        parse_sasl({"mechanisms": ["OAUTHBEARER"], "oauthbearer": {"jwks": "f", "audience": "a"}})
    with pytest.raises(ConfigurationError, match=r"needs a \[sasl.oauthbearer\]"):
        parse_sasl({"mechanisms": ["OAUTHBEARER"]})


def test_parse_sasl_validates_mechanisms() -> None:
    assert parse_sasl({"mechanisms": ["plain", "SCRAM-SHA-512"]}) == SaslConfig(
        ("PLAIN", "SCRAM-SHA-512")
    )
    with pytest.raises(ConfigurationError, match="unsupported mechanism"):
        parse_sasl({"mechanisms": ["GSSAPI"]})
    with pytest.raises(ConfigurationError, match="non-empty list"):
        parse_sasl({"mechanisms": []})


def test_build_refuses_a_bad_jwks() -> None:
    config = SaslConfig(("OAUTHBEARER",), OAuthBearerConfig("j.json", ISSUER, AUDIENCE))
    with pytest.raises(ConfigurationError, match=r"j\.json"):
        build_sasl_server(config, MemoryCredentials(), seed=b"s" * 16, jwks={"keys": "nope"})
    with pytest.raises(ConfigurationError, match="no JWKS"):
        build_sasl_server(config, MemoryCredentials(), seed=b"s" * 16)


def test_identity_of_reads_each_mechanism(signer: Signer) -> None:
    assert identity_of("PLAIN", b"\0bob\0pw") == "User:bob"
    assert identity_of("SCRAM-SHA-256", b"n,,n=a=2Cb=3Dc,r=xyz") == "User:a,b=c"
    assert identity_of("SCRAM-SHA-512", b"n,a=x,n=carol,r=xyz") == "User:carol"
    assert identity_of("OAUTHBEARER", client_first(signer.token(NOW_S, sub="dave"))) == "User:dave"
    for mech, junk in (
        ("PLAIN", b"x"),
        ("SCRAM-SHA-256", b"\xff"),
        ("OAUTHBEARER", b"n,,"),
        ("GSSAPI", b"\0a\0b"),
    ):
        assert identity_of(mech, junk) is None


def test_key_rotation(signer: Signer) -> None:
    srv = server(signer)
    rotated = Signer(kid="k2")
    srv.use_jwks(rotated.jwks())
    old = srv.start("OAUTHBEARER")
    old.respond(client_first(signer.token(NOW_S)), now_ms=NOW_MS)
    assert old.outcome is None
    new = srv.start("OAUTHBEARER")
    new.respond(client_first(rotated.token(NOW_S)), now_ms=NOW_MS)
    assert new.outcome is not None
    with pytest.raises(ConfigurationError, match="invalid JWKS"):
        srv.use_jwks({"keys": [{"kty": "nonsense"}]})
