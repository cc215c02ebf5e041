"""SASL terminated by the gateway's connection core, against real librdkafka clients.

The mechanism is a small PLAIN written for the test (the product's mechanisms live
in ``clientmetrics.security``); what is under test is the core and the shell: the
exchange over the wire, the principal pushes land with, and what an
unauthenticated client is served.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from clientmetrics.errors import ConfigurationError
from clientmetrics.exporters.memory import InMemoryExporter
from clientmetrics.gateway.config import Address, GatewayConfig, Listener
from clientmetrics.gateway.server import Gateway
from clientmetrics.security.base import Authenticated, AuthenticationFailed
from clientmetrics.store.memory import MemorySubscriptionStore
from clientmetrics.wire.server import ListenerPolicy

pytestmark = pytest.mark.integration

USERS = {"alice": "alice-secret"}


class PlainExchangeForTests:
    mechanism = "PLAIN"

    def __init__(self) -> None:
        self.outcome: Authenticated | None = None

    def respond(self, client_message: bytes, *, now_ms: int) -> bytes:
        _, user, password = client_message.decode().split("\x00")
        if USERS.get(user) != password:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        self.outcome = Authenticated(f"User:{user}")
        return b""


class PlainServerForTests:
    mechanisms = ("PLAIN",)

    def start(self, mechanism: str) -> PlainExchangeForTests:
        return PlainExchangeForTests()


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[tuple[Gateway, InMemoryExporter]]:
    exporter = InMemoryExporter()
    store = MemorySubscriptionStore(
        {"all": {"metrics": "org.apache.kafka.", "interval.ms": "1000"}}
    )
    config = GatewayConfig(
        data_dir=tmp_path,
        listeners=(Listener.parse("127.0.0.1:0"),),
        connections_max_reauth_ms=2000,
    )
    policy = ListenerPolicy(requires_sasl=True, sasl=PlainServerForTests(), reauth_ms=2000)
    gw = Gateway(config, store=store, exporters=[exporter], policy=policy)
    await gw.start()
    yield gw, exporter
    await gw.close()


def run_producer(port: int, client_id: str, seconds: float, **security: str) -> list[str]:
    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "client.id": client_id,
            "log_level": 0,
            "error_cb": lambda err: errors.append(err.str()),
            **security,
        }
    )
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        producer.poll(0.2)
    return errors


def sasl(user: str, password: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
    }


async def test_pushes_land_with_the_authenticated_principal_across_reauthentication(
    gateway: tuple[Gateway, InMemoryExporter],
) -> None:
    gw, exporter = gateway
    loop = asyncio.get_running_loop()
    # 7 s with connections.max.reauth.ms = 2 s: pushes keep flowing throughout.
    await loop.run_in_executor(
        None, lambda: run_producer(gw.port, "authed", 7, **sasl("alice", "alice-secret"))
    )
    pushes = [p for p in exporter.pushes if p.client_id == "authed"]
    assert len(pushes) >= 4
    assert {p.principal for p in pushes} == {"User:alice"}
    # Re-authenticated in place (KIP-368), not closed at the deadline and reconnected.
    assert len({p.client_source_port for p in pushes}) == 1


async def test_wrong_password_and_no_credentials_land_nothing(
    gateway: tuple[Gateway, InMemoryExporter],
) -> None:
    gw, exporter = gateway
    loop = asyncio.get_running_loop()
    wrong, plain = await asyncio.gather(
        loop.run_in_executor(
            None, lambda: run_producer(gw.port, "wrong", 4, **sasl("alice", "nope"))
        ),
        loop.run_in_executor(None, lambda: run_producer(gw.port, "anonymous", 4)),
    )
    assert any("Authentication failed" in e for e in wrong), wrong
    assert plain  # the client without credentials gets disconnected
    assert exporter.pushes == []


def test_each_listener_gets_the_policy_of_its_protocol(tmp_path: Path) -> None:
    sasl_listener = Listener.parse("SASL_PLAINTEXT://127.0.0.1:0")
    plain_listener = Listener.parse("127.0.0.1:0")
    config = GatewayConfig(
        data_dir=tmp_path, listeners=(plain_listener,), connections_max_reauth_ms=5000
    )
    server = PlainServerForTests()
    gw = Gateway(config, sasl=server)
    terminated = gw.policy_for(sasl_listener)
    assert (terminated.requires_sasl, terminated.sasl, terminated.reauth_ms) == (True, server, 5000)
    assert gw.policy_for(plain_listener) == ListenerPolicy()
    with pytest.raises(ConfigurationError, match="needs SASL mechanisms"):
        Gateway(config).policy_for(sasl_listener)
    proxy = GatewayConfig(
        data_dir=tmp_path,
        listeners=(plain_listener,),
        upstream=(Address("127.0.0.1", 9092),),
        store="sqlite",
    )
    passthrough = Gateway(proxy, identity_of=lambda mechanism, token: None)
    policy = passthrough.policy_for(sasl_listener)
    assert (policy.requires_sasl, policy.passthrough, policy.sasl) == (True, True, None)
    assert policy.identity_of is not None
    assert not passthrough.policy_for(plain_listener).requires_sasl
