"""PLAIN's PBKDF2 runs on the gateway's verification threads, in both modes.

Standalone and proxy (``[proxy] sasl = "terminate"``: the gateway checks the
password itself) drive the same connection core; each must run the derivation
the core hands out on the verifier's pool, never on the event loop, and answer
the login and what the client pipelined behind it in order.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from peers.free_ports import free_port_block

from clientmetrics.exporters.memory import InMemoryExporter
from clientmetrics.gateway.config import Address, GatewayConfig, Listener
from clientmetrics.gateway.server import Gateway
from clientmetrics.gateway.verify import Verifier
from clientmetrics.security import SaslConfig, build_sasl_server, mechanisms
from clientmetrics.store.memory import MemorySubscriptionStore
from clientmetrics.wire import (
    ErrorCode,
    RequestHeader,
    decode_response,
    encode_request,
    request_type,
)
from clientmetrics.wire.server import ListenerPolicy
from tests.frames import answer_frame
from tests.proxy.test_session import NODE, FakeUpstream
from tests.security.conftest import MemoryCredentials

FAILED = "Authentication failed: Invalid username or password"


@pytest.fixture
def derivations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The thread each PLAIN derivation ran on."""
    threads: list[str] = []
    real = mechanisms.plain_stored_key

    def recorded(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
        threads.append(threading.current_thread().name)
        return real(mechanism, password, salt, iterations)

    monkeypatch.setattr(mechanisms, "plain_stored_key", recorded)
    return threads


@pytest.fixture(params=["standalone", "proxy"])
async def gateway(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Gateway]:
    credentials = MemoryCredentials()
    credentials.add("alice", "alice-secret")
    sasl = build_sasl_server(SaslConfig(("PLAIN",)), credentials, seed=b"q" * 16)
    policy = ListenerPolicy(requires_sasl=True, sasl=sasl)
    upstream = None
    listeners = (Listener.parse("127.0.0.1:0"),)
    if request.param == "standalone":
        config = GatewayConfig(data_dir=tmp_path, listeners=listeners)
    else:
        upstream = await FakeUpstream().start()
        config = GatewayConfig(
            data_dir=tmp_path,
            listeners=listeners,
            upstream=(Address("127.0.0.1", upstream.port),),
            broker_port_base=free_port_block(NODE + 1),
        )
    gw = Gateway(
        config, store=MemorySubscriptionStore(), exporters=[InMemoryExporter()], policy=policy
    )
    await gw.start()
    try:
        yield gw
    finally:
        await gw.close()
        if upstream is not None and upstream.server is not None:
            upstream.server.close()


async def login(port: int, token: bytes) -> list[tuple[int, int, str | None]]:
    """Handshake, SaslAuthenticate and GetTelemetrySubscriptions in one write;
    (correlation id, error code, error message) of each answer until the close."""
    handshake = encode_request(
        RequestHeader(17, 1, 1, "c", None, 1), request_type(17, 1)(mechanism="PLAIN")
    )
    authenticate = encode_request(
        RequestHeader(36, 2, 2, "c", None, 2), request_type(36, 2)(auth_bytes=token)
    )
    get = encode_request(
        RequestHeader(71, 0, 3, "c", None, 2),
        request_type(71, 0)(client_instance_id=uuid.UUID(int=0)),
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answers = []
    try:
        writer.write(handshake + authenticate + get)
        for api_key, version in ((17, 1), (36, 2), (71, 0)):
            try:
                frame = await answer_frame(reader)
            except asyncio.IncompleteReadError:
                break
            correlation, body = decode_response(api_key, version, frame)
            answers.append(
                (correlation, int(body.error_code), getattr(body, "error_message", None))
            )
    finally:
        writer.close()
    return answers


async def test_logins_are_derived_off_the_loop_and_answered_in_order(
    gateway: Gateway, derivations: list[str]
) -> None:
    port = gateway.port
    assert await login(port, b"\x00alice\x00alice-secret") == [
        (1, 0, None),
        (2, 0, None),
        (3, 0, None),  # pipelined behind the login: held, then served as alice
    ]
    wrong = await login(port, b"\x00alice\x00wrong")
    unknown = await login(port, b"\x00mallory\x00wrong")
    refused = [(1, 0, None), (2, ErrorCode.SASL_AUTHENTICATION_FAILED, FAILED)]
    assert wrong == unknown == refused  # and the held request is never served
    # The right password once, the wrong one, the unknown user (on the dummy): three
    # derivations, each on a verification thread.
    assert len(derivations) == 3
    assert all(name.startswith("sasl-verify") for name in derivations), derivations
    # A password verified before is answered from memory, with no derivation.
    assert (await login(port, b"\x00alice\x00alice-secret"))[1] == (2, 0, None)
    assert len(derivations) == 3


async def test_the_verifier_bounds_concurrent_derivations_and_keeps_the_loop_free() -> None:
    verifier = Verifier(workers=2)
    running = 0
    peak = 0
    lock = threading.Lock()

    def slow() -> bytes:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.05)  # stands for a derivation that releases the GIL
        with lock:
            running -= 1
        return b"k"

    gaps: list[float] = []

    async def ticker(stop: asyncio.Event) -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    stop = asyncio.Event()
    tick = asyncio.ensure_future(ticker(stop))
    started = time.monotonic()
    try:
        results = await asyncio.gather(*(verifier.run(slow, "10.0.0.1") for _ in range(8)))
    finally:
        stop.set()
        await tick
        verifier.close()
    took = time.monotonic() - started
    assert results == [b"k"] * 8
    assert peak == 2  # eight asked at once, two ran at a time: the rest queued
    assert took >= 4 * 0.05
    assert max(gaps) < 0.1  # the loop went on ticking throughout


def test_a_verifier_needs_a_worker() -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        Verifier(workers=0)
    assert 1 <= Verifier().workers <= 4


def recorder(order: list[str], label: str, seconds: float = 0.02) -> Callable[[], bytes]:
    def derive() -> bytes:
        order.append(label)
        time.sleep(seconds)
        return label.encode()

    return derive


async def test_sources_take_turns_for_the_threads() -> None:
    verifier = Verifier(workers=1)
    order: list[str] = []
    try:
        flood = [asyncio.ensure_future(verifier.run(recorder(order, "a"), "a")) for _ in range(6)]
        await asyncio.sleep(0)  # the flood's checks are queued first
        other = [asyncio.ensure_future(verifier.run(recorder(order, "b"), "b")) for _ in range(2)]
        assert await asyncio.gather(*flood, *other) == [b"a"] * 6 + [b"b"] * 2
    finally:
        verifier.close()
    # One a was running and five waited when b came: b goes after one more a, not five.
    assert order == ["a", "a", "b", "a", "b", "a", "a", "a"]


async def test_a_check_cancelled_while_waiting_gives_up_its_turn() -> None:
    verifier = Verifier(workers=1)
    order: list[str] = []
    try:
        busy = asyncio.ensure_future(verifier.run(recorder(order, "a", 0.1), "a"))
        await asyncio.sleep(0.01)
        gone = asyncio.ensure_future(verifier.run(recorder(order, "b"), "b"))
        kept = asyncio.ensure_future(verifier.run(recorder(order, "c"), "c"))
        await asyncio.sleep(0.01)
        assert verifier.waiting == 2
        gone.cancel()  # its connection closed while it waited
        await asyncio.sleep(0)
        assert verifier.waiting == 1
        assert await asyncio.gather(busy, kept) == [b"a", b"c"]
        with pytest.raises(asyncio.CancelledError):
            await gone
        # Nothing is left holding a thread: the next check runs at once.
        assert await asyncio.wait_for(verifier.run(recorder(order, "d"), "d"), 1) == b"d"
    finally:
        verifier.close()
    assert order == ["a", "c", "d"]
    assert verifier.waiting == 0
