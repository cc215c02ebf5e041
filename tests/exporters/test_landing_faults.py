"""The landing exporter heals by itself: a failing WAL disk, failing conversions.

Faults are injected at the exporter's own file-writing functions, so these run on
any machine; tests/gateway/test_disk_full.py does the same on a real full tmpfs.
"""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path
from typing import Any

import pytest
from landing_helpers import PushFactory, read_landing

from clientmetrics.exporters import ExportError, LandingExporter, LandingOptions, landing_wal
from clientmetrics.exporters.landing_converter import Converter

ENOSPC = OSError(errno.ENOSPC, "No space left on device")


class Disk:
    """A switch for the injected fault."""

    def __init__(self) -> None:
        self.full = False


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Disk:
    """WAL writes and the probe fail while ``disk.full``; a failing batch leaves its
    records written but not fsynced, as a full disk can."""
    state = Disk()
    real_write, real_probe = landing_wal.write_batch, landing_wal.probe

    def write_batch(batch: Any) -> int:
        if state.full:
            for segment, records in batch.chunks:
                if segment.fd is not None:
                    landing_wal.write_all(segment.fd, b"".join(records)[:-3])  # torn, unsynced
            raise ENOSPC
        return real_write(batch)

    def probe(writer_dir: Path) -> None:
        if state.full:
            raise ENOSPC
        real_probe(writer_dir)

    monkeypatch.setattr(landing_wal, "write_batch", write_batch)
    monkeypatch.setattr(landing_wal, "probe", probe)
    return state


async def _settle(exporter: LandingExporter, *, ready: bool, within_s: float) -> None:
    for _ in range(int(within_s / 0.02)):
        if (exporter.health() is None) == ready:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"exporter health {exporter.health()!r} after {within_s}s")


async def test_wal_write_failure_heals_without_a_restart(
    tmp_path: Path, disk: Disk, make_push: PushFactory
) -> None:
    exporter = LandingExporter(tmp_path, LandingOptions(roll_seconds=0.2))
    await exporter.start()
    try:
        acked = [0, 1, 2]
        for i in acked:
            await exporter.export(make_push(i))
        disk.full = True
        with pytest.raises(ExportError, match="No space left"):
            await exporter.export(make_push(100))
        assert exporter.health() is not None
        # While the disk is full, pushes are refused at once, not queued.
        with pytest.raises(ExportError):  # a queued one would wait for ever: 10 s is slack
            await asyncio.wait_for(exporter.export(make_push(101)), 10)
        await asyncio.sleep(0.5)  # a few probes fail
        assert exporter.health() is not None
        disk.full = False
        await _settle(exporter, ready=True, within_s=10)
        for i in (3, 4):
            await exporter.export(make_push(i))
            acked.append(i)
        counters = exporter.counters()
        assert counters["landing_wal_failures"] >= 1
        assert counters["landing_pushes_durable"] == len(acked)
        # The converter child runs niced: on a busy machine its work waits.
        await exporter.flush(timeout_s=60)
        # Every acknowledged push landed, exactly once; no refused one did.
        client_ids = sorted(read_landing(tmp_path).column("client_id").to_pylist())
        assert client_ids == sorted(f"c{i}" for i in acked)
        assert exporter.counters()["landing_rows_landed"] == len(acked)
    finally:
        await exporter.close(timeout_s=60)


async def test_failed_conversion_is_retried_until_the_rows_are_visible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_push: PushFactory
) -> None:
    disk = Disk()
    real_convert = Converter.convert

    async def convert(self: Any, loop: Any, layout: Any, path: Path) -> Any:
        if disk.full:
            raise ENOSPC
        return await real_convert(self, loop, layout, path)

    monkeypatch.setattr(Converter, "convert", convert)
    exporter = LandingExporter(tmp_path, LandingOptions(roll_seconds=0.5))
    await exporter.start()
    try:
        disk.full = True
        for i in range(4):
            await exporter.export(make_push(i))  # the WAL is fine: acknowledged
        for _ in range(1200):  # 60 s at most: generous for a busy machine
            if exporter.counters()["landing_convert_failures"] >= 2:
                break
            await asyncio.sleep(0.05)
        assert exporter.counters()["landing_convert_failures"] >= 2, "retried"
        assert read_landing(tmp_path).num_rows == 0
        assert exporter.health() is None, "pushes still land in the WAL"
        disk.full = False
        # Visible within about roll_seconds of recovery (the retry backoff is capped
        # there), plus the converter child's first start, slow on a loaded machine.
        for _ in range(1200):  # the rows show before the converter's gauge is set
            if (
                read_landing(tmp_path).num_rows == 4
                and exporter.counters()["landing_converting_ok"] == 1.0
            ):
                break
            await asyncio.sleep(0.05)
        assert sorted(read_landing(tmp_path).column("client_id").to_pylist()) == [
            "c0", "c1", "c2", "c3"
        ]  # fmt: skip
        assert exporter.counters()["landing_converting_ok"] == 1.0
    finally:
        await exporter.close(timeout_s=60)


async def test_a_failed_group_commit_fails_every_push_of_its_group(
    tmp_path: Path, disk: Disk, make_push: PushFactory
) -> None:
    """Pushes that share a group commit share its outcome: none of them is acknowledged
    when its write fails (the gateway answers each THROTTLING_QUOTA_EXCEEDED)."""
    exporter = LandingExporter(tmp_path, LandingOptions(commit_interval_ms=50))
    await exporter.start()
    try:
        await exporter.export(make_push(0))
        disk.full = True
        group = [exporter.export(make_push(i)) for i in range(1, 41)]
        results = await asyncio.gather(*group, return_exceptions=True)
        assert all(isinstance(r, ExportError) for r in results), results
        assert all("No space left" in str(r) for r in results)
        assert exporter.stats.pushes == 1
        disk.full = False
        await _settle(exporter, ready=True, within_s=60)
    finally:
        await exporter.close(timeout_s=60)
    assert read_landing(tmp_path).num_rows == 1
