"""Fail-open exporters in their child process: pushes go over, counters come back."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from pathlib import Path

import pytest

from clientmetrics.errors import ListenError
from clientmetrics.exporters import InMemoryExporter
from clientmetrics.exporters.child import ChildExporters, with_exporter_process
from clientmetrics.exporters.path import ExportPath
from clientmetrics.exporters.registry import load_exporters
from clientmetrics.telemetry import otlp
from clientmetrics.telemetry.model import AcceptedPush


def push(n: int) -> AcceptedPush:
    payload = otlp.build_metrics_data(
        [otlp.gauge("queue.depth", n, time_unix_nano=10**18)]
    ).SerializeToString()
    return AcceptedPush(
        n,
        uuid.UUID(int=n + 1),
        1,
        False,
        f"c{n}",
        "sw",
        "1",
        "a",
        1,
        "User:x",
        0,
        "PLAINTEXT",
        "PLAINTEXT",
        0,
        1000,
        payload,
    )


async def wait(predicate: object, timeout: float = 60) -> None:
    """Poll until ``predicate()``: the child runs niced, so a busy machine serves it late."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():  # type: ignore[operator]
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.1)


async def test_pushes_reach_the_child_and_its_counters_come_back(tmp_path: Path) -> None:
    specs = [("landing", {}), ("prometheus", {"listen": "127.0.0.1:0", "labels": ["client_id"]})]
    built = load_exporters(specs, tmp_path)
    exporters = with_exporter_process(built, specs, tmp_path)
    assert [type(e).__name__ for e in exporters] == ["LandingExporter", "ChildExporters"]
    child = exporters[1]
    assert isinstance(child, ChildExporters)
    landing = InMemoryExporter()  # stands in for landing: the child is what is tested
    await landing.start()
    path = ExportPath([landing, child])
    await child.start()
    try:
        assert os.getpriority(os.PRIO_PROCESS, child._proc.pid) == min(
            19, os.getpriority(os.PRIO_PROCESS, 0) + 10
        )
        for n in range(5):
            await path.export(push(n))

        def exported() -> bool:
            (stats,) = [s for s in path.stats() if s.name == "prometheus"]
            return stats.exported == 5

        await wait(exported)
        (stats,) = [s for s in path.stats() if s.name == "prometheus"]
        assert (stats.received, stats.dropped, stats.failed, stats.queue_depth) == (5, 0, 0, 0)
        assert stats.export_seconds_count >= 1
    finally:
        await child.close(60)
    assert not child._proc.is_alive()


async def test_bad_options_fail_at_start(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        child = ChildExporters([("prometheus", {"listen": f"127.0.0.1:{port}"})], tmp_path)
        # a taken port is the machine's state, not a bad setting: ListenError, exit 1
        with pytest.raises(ListenError, match=f"cannot listen on 127.0.0.1:{port}"):
            await child.start()
    assert not child._proc.is_alive()


async def test_past_the_backlog_pushes_are_dropped_and_counted(tmp_path: Path) -> None:
    child = ChildExporters([("prometheus", {"listen": "127.0.0.1:0"})], tmp_path, backlog_bytes=1)
    await child.start()
    try:
        child.offer(push(1))  # fills the one-byte backlog until the writer takes it
        child.offer(push(2))
        (stats,) = child.exporter_stats()
        assert (stats.received, stats.dropped) == (2, 1)
    finally:
        await child.close(60)


async def test_a_dead_exporter_process_drops_and_counts_instead_of_failing(
    tmp_path: Path,
) -> None:
    child = ChildExporters([("prometheus", {"listen": "127.0.0.1:0"})], tmp_path)
    await child.start()
    try:
        child._proc.kill()
        await asyncio.to_thread(child._proc.join, 10)
        for n in range(200):  # the writer finds the socket closed
            child.offer(push(n))
            await asyncio.sleep(0.005)
        (stats,) = child.exporter_stats()
        assert stats.received == 200
        assert stats.dropped >= 190
        assert stats.queue_depth == 0
    finally:
        await child.close(60)
