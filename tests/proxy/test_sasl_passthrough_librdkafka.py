"""SASL passthrough end to end: librdkafka -> ``clientmetrics serve`` (proxy) -> SCRAM cluster.

The gateway listens SASL_PLAINTEXT with no ``[sasl]`` section, so clients
authenticate with the cluster (Tansu behind its SCRAM-SHA-512 front) through it.
Records must cross intact, telemetry must land under the principal the cluster
accepted, a wrong password must land nothing, and a client that never
authenticated must not reach the client-metrics config RPCs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from peers.free_ports import free_port_block

from tests.admin.tool import run_tool
from tests.landed import rows_of
from tests.procs import TansuProcess, wait_for
from tests.proxy.conftest import FAST_LANDING, TANSU_NODE, ProxyGateway

pytestmark = pytest.mark.integration

USERS = {"alice": "alice-secret"}
PREFIX = "Error while executing client metrics command : "
JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="alice" password="{password}";'
)
MESSAGES = 200
SQLITE = ("--store", "sqlite")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TansuProcess, ProxyGateway]]:
    root = tmp_path_factory.mktemp("passthrough")
    broker = TansuProcess(log_path=root / "tansu.log", users=USERS).start()
    base = free_port_block(TANSU_NODE + 1)
    gw = ProxyGateway(
        root / "gw",
        FAST_LANDING,
        extra_args=("--upstream", broker.bootstrap, "--broker-port-base", str(base), *SQLITE),
        listen_protocol="SASL_PLAINTEXT",
    )
    gw.broker_port_base = base
    try:
        gw.start()
        yield broker, gw
    finally:
        code = gw.stop()
        broker.stop()
    assert code == 0
    assert gw.tracebacks() == []


def tool(gw: ProxyGateway, tmp_path: Path, props: str | None, *args: str) -> tuple[int, str, str]:
    extra: tuple[str, ...] = ()
    if props is not None:
        path = tmp_path / "client.properties"
        path.write_text(props)
        extra = ("--command-config", str(path))
    result = run_tool("--bootstrap-server", gw.bootstrap, *extra, "--timeout", "5000", *args)
    return result.code, result.out, result.err


def scram_props(password: str) -> str:
    return (
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.jaas.config={JAAS.format(password=password)}\n"
    )


def client_conf(gw: ProxyGateway, client_id: str, password: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": gw.bootstrap,
        "client.id": client_id,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": password,
        "log_level": 0,
        **extra,
    }


def test_passthrough_authenticates_with_the_cluster_and_lands_the_principal(
    stack: tuple[TansuProcess, ProxyGateway], tmp_path: Path
) -> None:
    _, gw = stack
    # Not authenticated: the SASL listener serves no config RPC; the tool fails in one line.
    code, out, err = tool(gw, tmp_path, None, "--alter", "--name", "all", "--metrics", "org.")
    assert (code, len(out.splitlines()), err) == (1, 1, ""), out
    assert out.startswith(PREFIX), out
    assert "disconnected before a response was received" in out
    code, out, err = tool(
        gw, tmp_path, scram_props("wrong"), "--alter", "--name", "all", "--metrics", "org."
    )
    assert (code, len(out.splitlines()), err) == (1, 1, ""), out
    assert out.startswith(PREFIX), out
    # Nothing was stored by either attempt; alice (checked by the cluster) may alter.
    code, out, _ = tool(gw, tmp_path, scram_props(USERS["alice"]), "--list")
    assert (code, out.split()) == (0, []), out
    altered = tool(
        gw, tmp_path, scram_props(USERS["alice"]),
        "--alter", "--name", "all", "--metrics", "org.apache.kafka.", "--interval", "500",
    )  # fmt: skip
    assert altered == (0, "Altered client metrics config for all.\n", "")

    topic = f"sasl-px-{uuid.uuid4().hex[:8]}"
    producer = Producer(client_conf(gw, "px-sasl-prod", USERS["alice"]))
    sent = {f"key-{i}".encode(): f"value-{i}".encode() * 5 for i in range(MESSAGES)}
    for key, value in sent.items():
        producer.produce(topic, key=key, value=value)
    assert producer.flush(20) == 0
    consumer = Consumer(
        client_conf(
            gw,
            "px-sasl-cons",
            USERS["alice"],
            **{"group.id": "px-sasl", "auto.offset.reset": "earliest", "session.timeout.ms": 6000},
        )
    )
    consumer.subscribe([topic])
    received: dict[bytes, bytes] = {}
    try:

        def everything_back() -> bool:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                received[message.key()] = message.value()
            return len(received) == MESSAGES

        wait_for(everything_back, 60, interval=0, what="every record back through the proxy")
        assert received == sent

        def both_landed() -> bool:
            consumer.poll(0.1)
            producer.poll(0.1)
            return all(rows_of(gw.data_dir, c) for c in ("px-sasl-prod", "px-sasl-cons"))

        wait_for(both_landed, 30, interval=0, what="telemetry from both clients")
    finally:
        consumer.close()
    for client_id in ("px-sasl-prod", "px-sasl-cons"):
        rows = rows_of(gw.data_dir, client_id)
        assert {r["principal"] for r in rows} == {"User:alice"}, client_id

    # With the subscription in force, a wrong password gets the cluster's refusal and lands nothing.
    errors: list[str] = []
    producer = Producer(
        client_conf(gw, "px-intruder", "alice-secreT", error_cb=lambda e: errors.append(e.str()))
    )

    def refused() -> bool:
        producer.poll(0.1)
        # The cluster's own refusal, relayed by the gateway.
        return any("invalid credentials with SASL mechanism SCRAM-SHA-512" in e for e in errors)

    wait_for(refused, 60, interval=0, what="the cluster's refusal")
    # Then a client that may push: once its rows landed, so would any push accepted
    # before it (segments are converted in order), rather than after a guessed time.
    later = Producer(client_conf(gw, "px-later", USERS["alice"]))

    def later_landed() -> bool:
        later.poll(0.1)
        return bool(rows_of(gw.data_dir, "px-later"))

    wait_for(later_landed, 60, interval=0, what="a later client's telemetry")
    later.flush(1)
    assert rows_of(gw.data_dir, "px-intruder") == []
