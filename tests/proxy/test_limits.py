"""The connection limits in proxy mode: the same core and limits as standalone."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from peers.free_ports import free_port_block

from clientmetrics.exporters.memory import InMemoryExporter
from clientmetrics.gateway.config import Address, GatewayConfig, Listener
from clientmetrics.gateway.server import Gateway
from clientmetrics.store.memory import MemorySubscriptionStore
from tests.frames import answer_frame
from tests.procs import MIN_DEADLINE_S
from tests.proxy.fake_upstream import NODE, FakeUpstream, raw_request

KiB = 1024


@pytest.fixture
async def proxy(
    upstream: FakeUpstream, tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[Gateway]]]:
    started: list[Gateway] = []

    async def start(**limits: int) -> Gateway:
        config = GatewayConfig(
            data_dir=tmp_path,
            listeners=(Listener.parse("127.0.0.1:0"),),
            upstream=(Address("127.0.0.1", upstream.port),),
            broker_port_base=free_port_block(NODE + 1),
            expiry_check_ms=100,
            **limits,
        )
        gw = Gateway(config, store=MemorySubscriptionStore(), exporters=[InMemoryExporter()])
        await gw.start()
        started.append(gw)
        return gw

    yield start
    for gw in started:
        await gw.close()


async def test_idle_proxy_connections_are_closed(
    proxy: Callable[..., Awaitable[Gateway]],
) -> None:
    gw = await proxy(connections_max_idle_ms=500)
    reader, writer = await asyncio.open_connection("127.0.0.1", gw.port)
    assert await asyncio.wait_for(reader.read(), MIN_DEADLINE_S) == b""
    writer.close()


async def test_the_per_address_cap_applies_to_proxy_connections(
    proxy: Callable[..., Awaitable[Gateway]],
) -> None:
    gw = await proxy(max_connections_per_ip=2)
    kept = [await asyncio.open_connection("127.0.0.1", gw.port) for _ in range(2)]
    for index, (reader, writer) in enumerate(kept):
        writer.write(raw_request(2, 1, index, b"x"))
        assert (await answer_frame(reader))[:4] == struct.pack(">i", index)
    reader, writer = await asyncio.open_connection("127.0.0.1", gw.port)
    assert await asyncio.wait_for(reader.read(), MIN_DEADLINE_S) == b""
    for _, w in kept:
        w.close()


async def test_a_large_request_waits_for_the_budget_another_one_holds(
    proxy: Callable[..., Awaitable[Gateway]], upstream: FakeUpstream
) -> None:
    gw = await proxy(max_request_bytes=1024 * KiB, queued_max_request_bytes=1024 * KiB)
    frames = [raw_request(2, 1, n, bytes([n]) * (700 * KiB)) for n in (1, 2)]
    first = await asyncio.open_connection("127.0.0.1", gw.port)
    second = await asyncio.open_connection("127.0.0.1", gw.port)
    first[1].write(frames[0][: 100 * KiB])
    await asyncio.sleep(0.3)
    second[1].write(frames[1][: 100 * KiB])
    await asyncio.sleep(0.3)
    # Only the first request's buffer exists; the second connection is not read.
    assert gw.limits.budget.used == len(frames[0]) - 4
    first[1].write(frames[0][100 * KiB :])
    second[1].write(frames[1][100 * KiB :])
    for (reader, _), n in zip((first, second), (1, 2), strict=True):
        assert (await answer_frame(reader))[:4] == struct.pack(">i", n)
    assert gw.limits.budget.used == 0
    assert [f[:2] for f in upstream.frames] == [b"\x00\x02", b"\x00\x02"]
    assert sorted(len(f) for f in upstream.frames) == [len(frames[0]) - 4] * 2
    for _, writer in (first, second):
        writer.close()
