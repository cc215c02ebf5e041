"""Failed authentications are answered later and later per source; a success resets it.

Measured from outside, over the wire, in both modes: standalone terminating SASL
(the gateway checks the password) and proxy passthrough (the upstream refuses).
Kafka delays a failed authentication by 100 ms; the gateway doubles the delay
with each recent failure from the same address (100, 200, 400 ms ...), and a
held answer must not hold up anyone else.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from peers.free_ports import free_port_block
from structlog.testing import capture_logs

from clientmetrics.exporters.memory import InMemoryExporter
from clientmetrics.gateway.config import Address, GatewayConfig, Listener
from clientmetrics.gateway.server import Gateway
from clientmetrics.store.memory import MemorySubscriptionStore
from clientmetrics.wire import ErrorCode, RequestHeader, encode_request, request_type
from clientmetrics.wire.server import ListenerPolicy
from tests.frames import answer_frame
from tests.gateway.test_sasl_terminate import PlainServerForTests
from tests.procs import MIN_DEADLINE_S
from tests.proxy.fake_upstream import NODE, FakeUpstream
from tests.proxy.test_sasl_passthrough import authenticate, plain_identity


class Setup:
    def __init__(self, gateway: Gateway, upstream: FakeUpstream | None) -> None:
        self.gateway = gateway
        self.upstream = upstream

    def refuse(self, refused: bool) -> None:
        """Passthrough: whether the upstream refuses (terminate mode checks the password)."""
        if self.upstream is not None:
            self.upstream.sasl_error = ErrorCode.SASL_AUTHENTICATION_FAILED if refused else 0


@pytest.fixture(params=["terminate", "passthrough"])
async def setup(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Setup]:
    upstream = None
    if request.param == "terminate":
        config = GatewayConfig(data_dir=tmp_path, listeners=(Listener.parse("127.0.0.1:0"),))
        # As the gateway builds it: the claimed user names whose failure it was.
        policy = ListenerPolicy(
            requires_sasl=True, sasl=PlainServerForTests(), identity_of=plain_identity
        )
    else:
        upstream = await FakeUpstream().start()
        config = GatewayConfig(
            data_dir=tmp_path,
            listeners=(Listener.parse("127.0.0.1:0"),),
            upstream=(Address("127.0.0.1", upstream.port),),
            broker_port_base=free_port_block(NODE + 1),
        )
        policy = ListenerPolicy(requires_sasl=True, passthrough=True, identity_of=plain_identity)
    gw = Gateway(
        config, store=MemorySubscriptionStore(), exporters=[InMemoryExporter()], policy=policy
    )
    await gw.start()
    try:
        yield Setup(gw, upstream)
    finally:
        await gw.close()
        if upstream is not None and upstream.server is not None:
            upstream.server.close()


async def attempt(setup: Setup, password: str) -> tuple[int, float]:
    """One connection's authentication: its error code and how long the answer took."""
    setup.refuse(password != "alice-secret")
    reader, writer = await asyncio.open_connection("127.0.0.1", setup.gateway.port)
    try:
        started = time.monotonic()
        code = await asyncio.wait_for(
            authenticate(reader, writer, f"\x00alice\x00{password}".encode()), 30
        )
        return code, time.monotonic() - started
    finally:
        writer.close()


async def handshake_time(port: int) -> float:
    """How long another connection waits for its SaslHandshake answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        started = time.monotonic()
        handshake = request_type(17, 1)(mechanism="PLAIN")
        writer.write(encode_request(RequestHeader(17, 1, 1, "c", None, 1), handshake))
        await answer_frame(reader)
        return time.monotonic() - started
    finally:
        writer.close()


def held_ms(logs: list[dict[str, object]]) -> list[object]:
    """The hold the gateway chose for each failed authentication, as its audit line says."""
    return [e["delay_ms"] for e in logs if e.get("reason") == "authentication_failed"]


async def test_repeated_failures_are_answered_slower_and_a_success_resets(setup: Setup) -> None:
    failed = ErrorCode.SASL_AUTHENTICATION_FAILED
    timings = []
    with capture_logs() as logs:
        for _ in range(3):
            code, took = await attempt(setup, "wrong")
            assert code == failed
            timings.append(took)
        # The audit line is written before the held answer, so it is there by now.
        assert held_ms(logs) == [100, 200, 400]
        # Held at least that long (the SASL exchange itself is a few ms on loopback):
        # lower bounds only, a busy machine only adds.
        assert [t >= d / 1000 for t, d in zip(timings, [100, 200, 400], strict=True)] == [
            True
        ] * 3, timings

        # A fourth failure is held 800 ms; meanwhile another connection is served: its
        # answer comes while the held one still waits (an order of events, not a time).
        held = asyncio.ensure_future(attempt(setup, "wrong"))
        await asyncio.sleep(0.1)  # a head start (later, the check is only weaker, not wrong)
        await handshake_time(setup.gateway.port)
        assert not held.done()
        code, took = await held
        assert (code, took >= 0.8) == (failed, True), took

        # A success is never held, and forgets the failures: the next one is held 100 ms
        # again (not the 1,600 ms a fifth failure would be).
        code, _ = await attempt(setup, "alice-secret")
        assert code == ErrorCode.NONE
        code, took = await attempt(setup, "wrong")
        assert code == failed
        assert took >= 0.1, took
        assert held_ms(logs) == [100, 200, 400, 800, 100]


async def test_a_failed_login_names_a_huge_claimed_user_by_its_digest(setup: Setup) -> None:
    """The audit line names who was tried, but never carries a client's 8 KB name (the
    largest PLAIN message taken before authentication) in every line."""
    setup.refuse(True)
    huge = "u" * 8_000
    with capture_logs() as logs:
        reader, writer = await asyncio.open_connection("127.0.0.1", setup.gateway.port)
        try:
            token = f"\x00{huge}\x00wrong".encode()
            code = await asyncio.wait_for(authenticate(reader, writer, token), MIN_DEADLINE_S)
        finally:
            writer.close()
        assert code == ErrorCode.SASL_AUTHENTICATION_FAILED
        deadline = time.monotonic() + MIN_DEADLINE_S
        while not [e for e in logs if e.get("reason") == "authentication_failed"]:
            assert time.monotonic() < deadline, logs
            await asyncio.sleep(0.05)
    (failed,) = [e for e in logs if e.get("reason") == "authentication_failed"]
    assert failed["user"] == "sha256:" + hashlib.sha256(f"User:{huge}".encode()).hexdigest()
