"""Crash safety of the landing exporter: WAL recovery, exactly once, torn tails."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from landing_helpers import BASE_MS, build_push, parquet_files, read_landing
from tests.procs import MIN_DEADLINE_S

from clientmetrics.exporters import LandingExporter, LandingOptions, landing
from clientmetrics.exporters.wal import MAGIC, encode_record, segment_name

CRASH_WRITER = Path(__file__).with_name("crash_writer.py")


def _crash_mid_way(data_dir: Path, count: int, kill_after: int, roll_bytes: int) -> set[int]:
    """Run a writer process, SIGKILL it after ``kill_after`` acks; return every ack."""
    proc = subprocess.Popen(
        [sys.executable, str(CRASH_WRITER), str(data_dir), str(count), str(roll_bytes)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    acked: set[int] = set()
    assert proc.stdout.readline().strip() == "started"
    for line in proc.stdout:
        acked.add(int(line))
        if len(acked) >= kill_after:
            proc.send_signal(signal.SIGKILL)
            break
    # Acks printed before the kill landed in the pipe; they count as acknowledged.
    acked.update(int(line) for line in proc.stdout.read().split())
    proc.wait(timeout=MIN_DEADLINE_S)
    return acked


async def _recover(data_dir: Path) -> LandingExporter:
    exporter = LandingExporter(data_dir, LandingOptions())
    await exporter.start()
    await exporter.close(timeout_s=60)
    return exporter


def _client_ids(data_dir: Path) -> list[str]:
    return list(read_landing(data_dir).column("client_id").to_pylist())


async def test_killed_writer_loses_no_acknowledged_push(tmp_path: Path) -> None:
    acked = _crash_mid_way(tmp_path, count=3000, kill_after=1500, roll_bytes=60_000)
    assert len(acked) >= 1500
    wal = tmp_path / "landing" / ".wal"
    assert list(wal.rglob("*.wal")), "the kill should leave segments in the WAL"
    # Everything already under pushes/ is a complete Parquet file.
    for path in parquet_files(tmp_path):
        assert path.name.startswith("part-")
        assert path.suffix == ".parquet"
        pq.read_metadata(path)

    recovered = await _recover(tmp_path)
    assert recovered.stats.recovered_files >= 1
    ids = _client_ids(tmp_path)
    assert len(ids) == len(set(ids)), "no row may be duplicated"
    assert {f"c{i}" for i in acked} <= set(ids)
    assert list(wal.iterdir()) == []


async def test_recovery_running_twice_does_not_duplicate(tmp_path: Path) -> None:
    acked = _crash_mid_way(tmp_path, count=800, kill_after=400, roll_bytes=1_000_000)
    wal = tmp_path / "landing" / ".wal"
    backup = tmp_path / "wal-backup"
    shutil.copytree(wal, backup)

    await _recover(tmp_path)
    first = sorted(_client_ids(tmp_path))
    files_after_first = parquet_files(tmp_path)
    # As if the first recovery died after renaming its files but before unlinking
    # the segments: they are all still there for the next start.
    shutil.rmtree(wal)
    shutil.copytree(backup, wal)
    await _recover(tmp_path)

    assert sorted(_client_ids(tmp_path)) == first
    assert parquet_files(tmp_path) == files_after_first
    assert {f"c{i}" for i in acked} <= set(first)
    assert list(wal.iterdir()) == []


def _write_orphan_segment(data_dir: Path, records: list[bytes], tail: bytes) -> Path:
    writer_dir = data_dir / "landing" / ".wal" / "0123456789abcdef"
    writer_dir.mkdir(parents=True)
    path = writer_dir / f"{segment_name(BASE_MS, '0123456789abcdef', 0)}.wal"
    path.write_bytes(MAGIC + b"".join(records) + tail)
    return path


async def test_torn_tail_is_dropped(tmp_path: Path) -> None:
    records = [encode_record(build_push(i)) for i in range(5)]
    torn = encode_record(build_push(5, payload=b"z" * 100))
    _write_orphan_segment(tmp_path, records, torn[: len(torn) - 7])
    await _recover(tmp_path)
    assert sorted(_client_ids(tmp_path)) == [f"c{i}" for i in range(5)]


async def test_record_with_bad_checksum_ends_the_segment(tmp_path: Path) -> None:
    records = [encode_record(build_push(i)) for i in range(3)]
    corrupt = bytearray(encode_record(build_push(3)))
    corrupt[-1] ^= 0xFF
    _write_orphan_segment(tmp_path, records, bytes(corrupt))
    await _recover(tmp_path)
    assert sorted(_client_ids(tmp_path)) == ["c0", "c1", "c2"]


async def test_segment_with_only_a_torn_record_lands_nothing(tmp_path: Path) -> None:
    path = _write_orphan_segment(tmp_path, [], encode_record(build_push(0))[:10])
    await _recover(tmp_path)
    assert parquet_files(tmp_path) == []
    assert not path.exists()


async def test_live_writer_dir_is_not_recovered(tmp_path: Path) -> None:
    writer = LandingExporter(tmp_path, LandingOptions(roll_seconds=60))
    await writer.start()
    await writer.export(build_push(0))
    segment = next((tmp_path / "landing" / ".wal" / writer.writer_id).glob("*.wal"))
    await _recover(tmp_path)
    assert segment.exists()
    assert parquet_files(tmp_path) == []
    await writer.close(timeout_s=60)
    assert _client_ids(tmp_path) == ["c0"]
    assert os.listdir(tmp_path / "landing" / ".wal") == []


async def test_running_writer_recovers_a_writer_that_died_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(landing, "RECOVER_EVERY_S", 0.05)
    survivor = LandingExporter(tmp_path, LandingOptions(roll_seconds=60))
    await survivor.start()
    _write_orphan_segment(tmp_path, [encode_record(build_push(i)) for i in range(3)], b"")
    # The counter moves once recover_orphans returns, just after the file appears.
    for _ in range(6000):  # 60 s at most: generous for a busy machine
        if parquet_files(tmp_path) and survivor.stats.recovered_files:
            break
        await asyncio.sleep(0.01)
    assert sorted(_client_ids(tmp_path)) == ["c0", "c1", "c2"]
    assert survivor.stats.recovered_files == 1
    await survivor.close(timeout_s=60)
