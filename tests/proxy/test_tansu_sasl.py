"""The SCRAM-requiring upstream: librdkafka authenticates to ``TansuProcess(users=...)``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from tests.procs import TansuProcess, wait_for

pytestmark = pytest.mark.integration

USERS = {"alice": "alice-secret", "bob": "b0b=,pass"}


@pytest.fixture
def scram_tansu(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TansuProcess]:
    mechanism = getattr(request, "param", "SCRAM-SHA-512")
    broker = TansuProcess(log_path=tmp_path / "tansu.log", users=USERS, mechanism=mechanism)
    yield broker.start()
    broker.stop()


def _errors(conf: dict[str, str]) -> tuple[dict[str, object], list[KafkaError]]:
    seen: list[KafkaError] = []
    return {**conf, "error_cb": seen.append, "log_level": 0}, seen


@pytest.mark.parametrize("scram_tansu", ["SCRAM-SHA-512", "SCRAM-SHA-256"], indirect=True)
def test_right_password_produces_and_consumes(scram_tansu: TansuProcess) -> None:
    topic = f"sasl-{uuid.uuid4().hex[:8]}"
    conf, errors = _errors({"bootstrap.servers": scram_tansu.bootstrap})
    producer = Producer({**conf, **scram_tansu.sasl_config("alice")})
    producer.produce(topic, key=b"k", value=b"authenticated")
    assert producer.flush(20) == 0
    consumer = Consumer(
        {
            **conf,
            **scram_tansu.sasl_config("bob"),
            "group.id": "sasl-group",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,  # Tansu waits out the session before the first join
        }
    )
    consumer.subscribe([topic])
    got: list[tuple[bytes | None, bytes | None]] = []
    try:

        def received() -> bool:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                got.append((message.key(), message.value()))
            return bool(got)

        wait_for(received, 30, interval=0, what="the record back")
    finally:
        consumer.close()
    assert got == [(b"k", b"authenticated")]
    assert errors == []


def _refusal(bootstrap: str, sasl: dict[str, str]) -> KafkaError:
    """The error a producer with these credentials gets; it never sees metadata."""
    conf, errors = _errors({"bootstrap.servers": bootstrap, **sasl})
    producer = Producer(conf)

    def refused() -> bool:
        producer.poll(0.1)
        return bool(errors)

    wait_for(refused, 15, interval=0, what="an authentication error")
    with pytest.raises(KafkaException):
        producer.list_topics(timeout=2)
    return errors[0]


def test_wrong_password_and_unknown_user_are_refused(scram_tansu: TansuProcess) -> None:
    wrong_password = scram_tansu.sasl_config("alice", "alice-secreT")
    unknown_user = {**scram_tansu.sasl_config("alice"), "sasl.username": "carol"}
    for sasl in (wrong_password, unknown_user):
        error = _refusal(scram_tansu.bootstrap, sasl)
        assert error.code() == KafkaError._AUTHENTICATION, sasl
        # The broker's SaslAuthenticate error message, as librdkafka reports it.
        assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in error.str(), sasl


def test_no_sasl_gets_nothing(scram_tansu: TansuProcess) -> None:
    conf, _errors_seen = _errors({"bootstrap.servers": scram_tansu.bootstrap})
    producer = Producer(conf)
    with pytest.raises(KafkaException) as caught:
        producer.list_topics(timeout=3)
    assert caught.value.args[0].code() == KafkaError._TRANSPORT
