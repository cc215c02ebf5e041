"""The heap is trimmed after many connections closed, not more often than every few
seconds, and a closed connection leaves nothing behind for the cyclic collector."""

from __future__ import annotations

import asyncio
import gc
import platform
import socket
import struct
from pathlib import Path

import pytest

from clientmetrics.exporters.memory import InMemoryExporter
from clientmetrics.gateway.config import GatewayConfig, Listener
from clientmetrics.gateway.heap import HeapTrimmer, malloc_trim
from clientmetrics.gateway.server import Gateway
from clientmetrics.gateway.transport import FrameProtocol
from clientmetrics.store.memory import MemorySubscriptionStore


def test_trims_after_enough_closes_and_not_too_often() -> None:
    now = [100.0]
    trims: list[float] = []

    def trim() -> bool:
        trims.append(now[0])
        return True

    trimmer = HeapTrimmer(after_closes=3, every_s=5.0, clock=lambda: now[0], trim=trim)
    now[0] = 106.0
    trimmer.closed()
    trimmer.closed()
    assert not trimmer.maybe_trim()  # two closes only
    trimmer.closed()
    assert trimmer.maybe_trim()
    for _ in range(10):
        trimmer.closed()
    now[0] = 108.0
    assert not trimmer.maybe_trim()  # 2 s after the last trim
    now[0] = 111.0
    assert trimmer.maybe_trim()
    assert trims == [106.0, 111.0]


def test_glibc_gets_its_free_pages_back() -> None:
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("malloc_trim is glibc's")
    assert malloc_trim()


async def test_a_reset_connection_is_freed_without_the_cyclic_collector(tmp_path: Path) -> None:
    """A connection its peer resets mid-request leaves nothing for the cyclic garbage
    collector: its buffers and transport are let go as soon as it closes (the gateway
    moves survivors out of the collector's reach, where a cycle would stay)."""
    config = GatewayConfig(data_dir=tmp_path, listeners=(Listener.parse("127.0.0.1:0"),))
    gw = Gateway(config, store=MemorySubscriptionStore(), exporters=[InMemoryExporter()])
    await gw.start()
    gc.collect()
    gc.disable()
    try:
        socks = []
        for _ in range(5):
            sock = socket.create_connection(("127.0.0.1", gw.port))
            sock.sendall(struct.pack(">i", 100_000) + b"\0" * 50_000)  # half a request
            socks.append(sock)
        while len(gw._connections) < len(socks):
            await asyncio.sleep(0.01)
        for sock in socks:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()  # a reset
        for _ in range(500):
            if not gw._connections:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # the connections' tasks finish
        lost = [
            obj
            for obj in gc.get_objects()
            if isinstance(obj, FrameProtocol)
            and (obj.transport is not None or obj._big is not None or len(obj._scratch))
        ]
        assert not gw._connections
        assert lost == []
    finally:
        gc.enable()
        await gw.close()
