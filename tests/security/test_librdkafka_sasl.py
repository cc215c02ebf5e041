"""librdkafka's SASL clients against the gateway's server mechanisms.

A front answers SaslHandshake / SaslAuthenticate with ``security``'s mechanisms and
relays the rest to a real gateway; librdkafka authenticates its bootstrap
connection and asks for Metadata through it.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from tests.admin.front import Front
from tests.security.jwts import Signer

pytestmark = pytest.mark.integration
AUTH_ERROR = re.compile(r"SASL authentication error: (.*?) \(after \d+ms")
FAILED = {
    "PLAIN": "Authentication failed: Invalid username or password",
    "SCRAM-SHA-512": "Authentication failed during authentication due to invalid credentials "
    "with SASL mechanism SCRAM-SHA-512",
}


def metadata(front: Front, timeout: float = 5, **conf: Any) -> tuple[bool, list[str]]:
    """Whether Metadata came back over an authenticated connection, and errors seen."""
    errors: list[str] = []
    client = AdminClient(
        {
            "bootstrap.servers": f"127.0.0.1:{front.port}",
            "security.protocol": "SASL_PLAINTEXT",
            "error_cb": lambda err: errors.append(err.str()),
            **conf,
        }
    )
    try:
        client.list_topics(timeout=timeout)
    except Exception:  # librdkafka raises KafkaException on timeout; the errors tell why
        client.poll(1)  # error_cb runs from poll
        return False, errors
    return True, errors


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_passwords(front: Front, mechanism: str) -> None:
    before = len(front.principals)
    ok, _ = metadata(
        front,
        **{"sasl.mechanism": mechanism, "sasl.username": "alice", "sasl.password": "alice-pw"},
    )
    assert ok
    assert front.principals[before] == "User:alice"


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_wrong_password_and_unknown_user_fail_alike(front: Front, mechanism: str) -> None:
    seen = []
    for user, password in (("alice", "nope"), ("mallory", "alice-pw")):
        before = len(front.principals)
        ok, errors = metadata(
            front,
            2,
            **{"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password},
        )
        assert not ok
        assert len(front.principals) == before
        reasons = {m.group(1) for e in errors if (m := AUTH_ERROR.search(e))}
        seen.append(reasons)
    assert seen[0] == seen[1] == {FAILED[mechanism]}


def test_oauthbearer_token_from_a_callback(front: Front, signer: Signer) -> None:
    now = int(time.time())
    before = len(front.principals)
    ok, _ = metadata(
        front,
        **{
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _cfg: (signer.token(now, sub="svc-app"), now + 600),
        },
    )
    assert ok
    assert front.principals[before] == "User:svc-app"


def test_oauthbearer_expired_token_is_refused(front: Front, signer: Signer) -> None:
    now = int(time.time())
    before = len(front.principals)
    ok, errors = metadata(
        front,
        2,
        **{
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _cfg: (signer.token(now - 7200, exp=now - 3600), now + 600),
        },
    )
    assert not ok
    assert len(front.principals) == before
    reasons = {m.group(1) for e in errors if (m := AUTH_ERROR.search(e))}
    assert reasons == {'{"status":"invalid_token"}'}, errors[:3]
