"""Real librdkafka clients over SASL_SSL against a real ``clientmetrics serve``.

Users are created with ``clientmetrics users add``; the gateway terminates TLS and
SASL itself with its own mechanisms (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER with a
JWKS file). Pushes must land with the authenticated principal; a wrong password
and a client without credentials must land nothing; re-authentication
(``connections.max.reauth.ms``) must keep one connection's pushes flowing.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.kadmin import set_subscription
from tests.landed import rows_of
from tests.procs import BIN, MIN_DEADLINE_S, GatewayProcess, wait_for
from tests.security.jwts import AUDIENCE, ISSUER, Signer
from tests.tlsfiles import TestCA

pytestmark = pytest.mark.integration

PASSWORD = "alice-secret"
ADD_USER = (str(BIN / "clientmetrics"), "users", "add")


@pytest.fixture(scope="module")
def signer() -> Signer:
    return Signer()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, signer: Signer) -> Iterator[GatewayProcess]:
    root = tmp_path_factory.mktemp("sasl")
    ca = TestCA(root / "pki")
    ca.issue("server", common_name="localhost")
    data = root / "data"
    for user in ("alice", "bob"):
        subprocess.run(
            [*ADD_USER, user, "--data-dir", str(data), "--password-stdin"],
            input=f"{PASSWORD}\n",
            text=True,
            check=True,
            capture_output=True,
        )
    jwks = root / "jwks.json"
    jwks.write_text(json.dumps(signer.jwks()))
    config = f"""
[gateway]
connections_max_reauth_ms = 2500

[tls]
certificate = "{ca.root / "server.crt"}"
private_key = "{ca.root / "server.key"}"

[sasl]
mechanisms = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]

[sasl.oauthbearer]
jwks = "{jwks}"
issuer = "{ISSUER}"
audience = "{AUDIENCE}"

[exporters.landing]
roll_seconds = 0.3
"""
    gw = GatewayProcess(data, config, listen_protocol="SASL_SSL").start()
    gw.ca = ca  # type: ignore[attr-defined]
    # kafka-python's admin client over the same listener, as a user of the gateway.
    set_subscription(
        gw.bootstrap,
        "all",
        {"metrics": "org.apache.kafka.", "interval.ms": "500"},
        security_protocol="SASL_SSL",
        ssl_cafile=str(ca.ca),
        ssl_check_hostname=False,
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="alice",
        sasl_plain_password=PASSWORD,
    )
    yield gw
    assert gw.stop() == 0
    assert gw.tracebacks() == []


def run_producer(
    gw: GatewayProcess,
    client_id: str,
    seconds: float,
    until: Callable[[list[str]], bool] | None = None,
    **conf: Any,
) -> list[str]:
    """A producer polled for ``seconds``, or with ``until`` until it says so (given the
    errors so far; at most ``MIN_DEADLINE_S``); returns the errors librdkafka reported.

    A fixed time is for a test about time (sessions expiring); one that waits for
    something to happen says what with ``until``, so a busy machine only makes it later.
    """
    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": gw.bootstrap,
            "client.id": client_id,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(gw.ca.ca),  # type: ignore[attr-defined]
            "ssl.endpoint.identification.algorithm": "none",
            "log_level": 0,
            "error_cb": lambda err: errors.append(err.str()),
            **conf,
        }
    )
    deadline = time.monotonic() + (seconds if until is None else MIN_DEADLINE_S)
    while time.monotonic() < deadline:
        producer.poll(0.1)
        if until is not None and until(errors):
            break
    else:
        assert until is None, f"{client_id}: what it waited for did not happen: {errors}"
    producer.flush(1)
    return errors


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_password_mechanisms_land_the_principal(gateway: GatewayProcess, mechanism: str) -> None:
    client_id = f"app-{mechanism.lower()}"
    user = "bob" if mechanism == "PLAIN" else "alice"
    run_producer(
        gateway,
        client_id,
        0,
        lambda _: bool(rows_of(gateway.data_dir, client_id)),
        **{"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": PASSWORD},
    )
    assert {r["principal"] for r in rows_of(gateway.data_dir, client_id)} == {f"User:{user}"}


def test_oauthbearer_token_lands_its_subject(gateway: GatewayProcess, signer: Signer) -> None:
    now = int(time.time())
    run_producer(
        gateway,
        "app-oauth",
        0,
        lambda _: bool(rows_of(gateway.data_dir, "app-oauth")),
        **{
            "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _cfg: (signer.token(now, sub="svc-billing"), now + 600),
        },
    )
    assert {r["principal"] for r in rows_of(gateway.data_dir, "app-oauth")} == {"User:svc-billing"}


def test_wrong_password_and_no_credentials_land_nothing(gateway: GatewayProcess) -> None:
    def refused(errors: list[str]) -> bool:
        return any("Authentication failed" in e or "authentication" in e.lower() for e in errors)

    run_producer(
        gateway,
        "intruder",
        0,
        refused,
        **{"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": "no"},
    )
    # SSL without SASL: the gateway serves it only ApiVersions and SaslHandshake.
    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": gateway.bootstrap,
            "client.id": "anonymous",
            "security.protocol": "SSL",
            "ssl.ca.location": str(gateway.ca.ca),  # type: ignore[attr-defined]
            "ssl.endpoint.identification.algorithm": "none",
            "log_level": 0,
            "error_cb": lambda err: errors.append(err.str()),
        }
    )
    for _ in range(20):
        producer.poll(0.1)
    # Then a client that may push: once its rows landed, so would any push accepted
    # before it (segments are converted in order), rather than after a guessed time.
    run_producer(
        gateway,
        "after-intruders",
        0,
        lambda _: bool(rows_of(gateway.data_dir, "after-intruders")),
        **{"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": PASSWORD},
    )
    assert rows_of(gateway.data_dir, "intruder") == []
    assert rows_of(gateway.data_dir, "anonymous") == []


def test_reauthentication_keeps_pushes_flowing(gateway: GatewayProcess) -> None:
    # 8 s against a 2.5 s session lifetime: the connection re-authenticates in place
    # at least twice, and pushes keep landing from the end of the run too.
    start = time.time()
    errors = run_producer(
        gateway,
        "long-lived",
        8,
        **{"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": PASSWORD},
    )
    assert not [e for e in errors if "uthenticat" in e], errors
    wait_for(lambda: rows_of(gateway.data_dir, "long-lived"), 10, what="pushes to land")
    received = sorted(
        r["received_at"].timestamp()  # type: ignore[attr-defined]
        for r in rows_of(gateway.data_dir, "long-lived")
    )
    assert received[-1] - start > 6, received
    assert len({r["client_instance_id"] for r in rows_of(gateway.data_dir, "long-lived")}) == 1


def test_kafka_python_reporter_over_sasl_ssl_lands_its_principal(gateway: GatewayProcess) -> None:
    from kafka import KafkaProducer

    from clientmetrics.reporter import enable_telemetry

    producer = KafkaProducer(
        bootstrap_servers=gateway.bootstrap,
        client_id="py-reporter",
        security_protocol="SASL_SSL",
        ssl_cafile=str(gateway.ca.ca),  # type: ignore[attr-defined]
        ssl_check_hostname=False,
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="bob",
        sasl_plain_password=PASSWORD,
    )
    enable_telemetry(producer)
    try:
        wait_for(
            lambda: any(r["payload"] for r in rows_of(gateway.data_dir, "py-reporter")),
            30,
            what="a reporter push over SASL_SSL",
        )
    finally:
        producer.close()
    assert {r["principal"] for r in rows_of(gateway.data_dir, "py-reporter")} == {"User:bob"}
