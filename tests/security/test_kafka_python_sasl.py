"""kafka-python's SASL clients against the gateway's server mechanisms (through the front)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError
from kafka.net.sasl.oauth import AbstractTokenProvider

from tests.admin.front import Front
from tests.security.jwts import Signer

pytestmark = pytest.mark.integration


class Token(AbstractTokenProvider):
    def __init__(self, value: str) -> None:
        self.value = value

    def token(self) -> str:
        return self.value


def connect(front: Front, **conf: Any) -> bool:
    try:
        client = KafkaAdminClient(
            bootstrap_servers=f"127.0.0.1:{front.port}",
            security_protocol="SASL_PLAINTEXT",
            request_timeout_ms=5000,
            bootstrap_timeout_ms=3000,
            **conf,
        )
    except KafkaError:
        return False
    client.close()
    return True


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_passwords(front: Front, mechanism: str) -> None:
    before = len(front.principals)
    assert connect(
        front, sasl_mechanism=mechanism, sasl_plain_username="alice", sasl_plain_password="alice-pw"
    )
    assert front.principals[before] == "User:alice"
    before = len(front.principals)
    assert not connect(
        front, sasl_mechanism=mechanism, sasl_plain_username="alice", sasl_plain_password="x"
    )
    assert len(front.principals) == before


def test_oauthbearer(front: Front, signer: Signer) -> None:
    now = int(time.time())
    before = len(front.principals)
    good = Token(signer.token(now, sub="py-app"))
    assert connect(front, sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=good)
    assert front.principals[before] == "User:py-app"
    before = len(front.principals)
    wrong_audience = Token(signer.token(now, aud="elsewhere"))
    assert not connect(
        front, sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=wrong_audience
    )
    assert len(front.principals) == before
