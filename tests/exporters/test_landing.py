"""The landing exporter against docs/landing.md: rows, files, rolling, durability."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from landing_helpers import BASE_MS, PushFactory, parquet_files, read_landing
from tests.procs import MIN_DEADLINE_S

from clientmetrics.errors import ConfigurationError
from clientmetrics.exporters import (
    LANDING_SCHEMA,
    ExportError,
    LandingExporter,
    LandingOptions,
    landing,
    landing_wal,
)
from clientmetrics.exporters.landing import create
from clientmetrics.exporters.landing_converter import Converter
from clientmetrics.exporters.wal import SUFFIX, decode_segment


@pytest.fixture
async def exporters(tmp_path: Path) -> AsyncIterator[list[LandingExporter]]:
    """Exporters a test starts; whatever it leaves open is closed afterwards."""
    started: list[LandingExporter] = []
    yield started
    for exporter in started:
        await exporter.close(timeout_s=60)


async def _start(
    started: list[LandingExporter], data_dir: Path, **options: float
) -> LandingExporter:
    exporter = LandingExporter(data_dir, LandingOptions(**options))  # type: ignore[arg-type]
    await exporter.start()
    started.append(exporter)
    return exporter


async def _wait_for(predicate: Callable[[], bool], timeout_s: float = 60.0) -> None:
    """Poll until ``predicate()``; the deadline only bounds a failure (the converter child
    runs niced: on a busy machine its work waits)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


async def test_rows_land_with_exact_types_and_values(
    tmp_path: Path, exporters: list[LandingExporter], make_push: PushFactory
) -> None:
    exporter = await _start(exporters, tmp_path)
    pushes = [
        make_push(0, payload=b""),
        make_push(1, client_id="prodüction", payload=b"\x0a\x00\xff" * 500),
        make_push(2, client_instance_id=uuid.UUID("ABCDEF01-2345-6789-ABCD-EF0123456789")),
    ]
    await asyncio.gather(*(exporter.export(p) for p in pushes))
    await exporter.close(timeout_s=60)

    files = parquet_files(tmp_path)
    assert len(files) == 1
    assert pq.read_schema(files[0]).remove_metadata() == LANDING_SCHEMA
    assert files[0].parent.relative_to(tmp_path / "landing" / "pushes") == Path(
        "date=2026-03-01/hour=10"
    )
    assert files[0].name.startswith(f"part-{BASE_MS}-{exporter.writer_id}-")
    rows = sorted(read_landing(tmp_path).to_pylist(), key=lambda r: r["client_source_port"])
    expected = [
        {
            "received_at": datetime(2026, 3, 1, 10, 59, 59, tzinfo=UTC),
            "client_instance_id": str(p.client_instance_id),
            "subscription_id": p.subscription_id,
            "terminating": p.terminating,
            "client_id": p.client_id,
            "client_software_name": "librdkafka",
            "client_software_version": "2.16.0",
            "client_source_address": "192.0.2.7",
            "client_source_port": p.client_source_port,
            "principal": "User:ANONYMOUS",
            "node_id": 3,
            "listener": "SSL",
            "security_protocol": "SSL",
            "compression_type": 4,
            "push_interval_ms": 30000,
            "payload": p.payload,
            "date": "2026-03-01",
            "hour": 10,
        }
        for p in pushes
    ]
    assert rows == expected
    assert rows[0]["payload"] == b""
    assert rows[2]["client_instance_id"] == "abcdef01-2345-6789-abcd-ef0123456789"


async def test_hour_boundary_splits_files(
    tmp_path: Path, exporters: list[LandingExporter], make_push: PushFactory
) -> None:
    exporter = await _start(exporters, tmp_path)
    for i, at in enumerate([BASE_MS + 999, BASE_MS + 1000, BASE_MS + 998, BASE_MS + 5000]):
        await exporter.export(make_push(i, received_at_ms=at))
    await exporter.close(timeout_s=60)
    table = read_landing(tmp_path)
    by_hour: dict[int, set[str]] = {}
    for row in table.to_pylist():
        assert row["received_at"].hour == row["hour"]
        by_hour.setdefault(row["hour"], set()).add(row["client_id"])
    assert by_hour == {10: {"c0", "c2"}, 11: {"c1", "c3"}}
    hours = sorted(p.parent.name for p in parquet_files(tmp_path))
    # c0 / c1 / c2 / c3 alternate hours, so each change of hour seals a segment.
    assert hours == ["hour=10", "hour=10", "hour=11", "hour=11"]


async def test_rolls_by_size_without_flush(
    tmp_path: Path, exporters: list[LandingExporter], make_push: PushFactory
) -> None:
    exporter = await _start(exporters, tmp_path, roll_bytes=5000, roll_seconds=60)
    for i in range(20):
        await exporter.export(make_push(i, payload=b"p" * 1000))
    # 20 records of ~1.1 KB with a 5,000-byte limit: four sealed segments of 5.
    await _wait_for(lambda: len(parquet_files(tmp_path)) == 4)
    assert sorted(read_landing(tmp_path).column("client_id").to_pylist()) == sorted(
        f"c{i}" for i in range(20)
    )
    assert [pq.read_metadata(p).num_rows for p in parquet_files(tmp_path)] == [5, 5, 5, 5]


async def test_rolls_by_age_without_flush(
    tmp_path: Path, exporters: list[LandingExporter], make_push: PushFactory
) -> None:
    exporter = await _start(exporters, tmp_path, roll_seconds=0.1)
    await exporter.export(make_push(0))
    assert parquet_files(tmp_path) == []
    # The converter child runs niced: on a busy machine its first start (pyarrow's
    # import) takes seconds.
    await _wait_for(lambda: len(parquet_files(tmp_path)) == 1)
    assert read_landing(tmp_path).column("client_id").to_pylist() == ["c0"]


async def test_flush_makes_rows_visible_and_export_continues(
    tmp_path: Path, exporters: list[LandingExporter], make_push: PushFactory
) -> None:
    exporter = await _start(exporters, tmp_path, roll_seconds=60)
    await exporter.export(make_push(0))
    await exporter.flush(timeout_s=60)
    assert read_landing(tmp_path).num_rows == 1
    await exporter.export(make_push(1))
    await exporter.close(timeout_s=60)
    assert sorted(read_landing(tmp_path).column("client_id").to_pylist()) == ["c0", "c1"]
    assert len(parquet_files(tmp_path)) == 2


async def test_close_flushes_everything_and_leaves_no_wal(
    tmp_path: Path, make_push: PushFactory
) -> None:
    exporter = LandingExporter(tmp_path, LandingOptions(roll_seconds=60))
    await exporter.start()
    await asyncio.gather(*(exporter.export(make_push(i)) for i in range(300)))
    await exporter.close(timeout_s=60)
    ids = read_landing(tmp_path).column("client_id").to_pylist()
    assert sorted(ids) == sorted(f"c{i}" for i in range(300))
    assert list((tmp_path / "landing" / ".wal").iterdir()) == []
    assert list((tmp_path / "landing" / ".staging").iterdir()) == []
    with pytest.raises(ExportError):
        await exporter.export(make_push(301))


async def test_export_before_start_fails(tmp_path: Path, make_push: PushFactory) -> None:
    exporter = LandingExporter(tmp_path)
    with pytest.raises(ExportError):
        await exporter.export(make_push(0))
    await exporter.close(timeout_s=1)


async def test_group_commit_and_max_pending_bound(
    tmp_path: Path, exporters: list[LandingExporter], make_push: PushFactory
) -> None:
    grouped = await _start(exporters, tmp_path / "a", commit_interval_ms=50)
    await asyncio.gather(*(grouped.export(make_push(i)) for i in range(200)))
    assert grouped.stats.pushes == 200
    assert grouped.stats.batches < 20  # pushes shared fsyncs

    bounded = await _start(exporters, tmp_path / "b", max_pending=1)
    await asyncio.gather(*(bounded.export(make_push(i)) for i in range(30)))
    # Only one push may wait for the WAL at a time, so none can share a commit.
    assert bounded.stats.batches == 30


async def test_two_writers_share_a_data_dir(
    tmp_path: Path, exporters: list[LandingExporter], make_push: PushFactory
) -> None:
    first = await _start(exporters, tmp_path, roll_seconds=60)
    await first.export(make_push(0))
    live_segments = list((tmp_path / "landing" / ".wal" / first.writer_id).glob("*.wal"))
    assert len(live_segments) == 1
    # The second writer must not treat the first one's live WAL as orphaned.
    second = await _start(exporters, tmp_path, roll_seconds=60)
    assert second.writer_id != first.writer_id
    assert live_segments[0].exists()
    assert parquet_files(tmp_path) == []
    await asyncio.gather(
        *(first.export(make_push(i)) for i in range(1, 50)),
        *(second.export(make_push(i)) for i in range(50, 100)),
    )
    await asyncio.gather(first.close(timeout_s=60), second.close(timeout_s=60))
    ids = read_landing(tmp_path).column("client_id").to_pylist()
    assert sorted(ids) == sorted(f"c{i}" for i in range(100))
    writers = {p.name.split("-")[2] for p in parquet_files(tmp_path)}
    assert writers == {first.writer_id, second.writer_id}


@pytest.mark.parametrize(
    "options",
    [
        {"roll_bytes": 0},
        {"roll_bytes": "lots"},
        {"roll_seconds": -1},
        {"commit_interval_ms": -0.5},
        {"max_pending": 1.5},
        {"max_pending": True},
        {"bogus": 1},
    ],
)
def test_bad_options_are_rejected(tmp_path: Path, options: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        create(options, tmp_path)


def test_options_accept_strings_and_numbers() -> None:
    parsed = LandingOptions.from_mapping(
        {"roll_bytes": "1024", "roll_seconds": 2, "commit_interval_ms": "0", "max_pending": 10}
    )
    assert parsed == LandingOptions(
        roll_bytes=1024, roll_seconds=2.0, commit_interval_ms=0.0, max_pending=10
    )


async def test_wal_write_failure_fails_exports_and_close_still_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_push: PushFactory
) -> None:
    def broken_disk(batch: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(landing_wal, "write_batch", broken_disk)
    exporter = LandingExporter(tmp_path)
    await exporter.start()
    results = await asyncio.gather(
        *(exporter.export(make_push(i)) for i in range(5)), return_exceptions=True
    )
    assert all(isinstance(r, ExportError) for r in results)
    with pytest.raises(ExportError, match="No space left"):
        await exporter.export(make_push(9))
    with pytest.raises(ExportError):
        await exporter.flush(timeout_s=1)
    await asyncio.wait_for(exporter.close(timeout_s=1), 5)


async def test_cancelled_export_does_not_disturb_its_batch(
    tmp_path: Path, exporters: list[LandingExporter], make_push: PushFactory
) -> None:
    exporter = await _start(exporters, tmp_path, commit_interval_ms=20)
    tasks = [asyncio.create_task(exporter.export(make_push(i))) for i in range(10)]
    await asyncio.sleep(0)
    tasks[0].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[0], asyncio.CancelledError)
    assert results[1:] == [None] * 9
    await exporter.close(timeout_s=60)
    # The record was already in the WAL when its waiter went away; it still lands.
    assert read_landing(tmp_path).num_rows == 10


async def test_a_large_group_commit_is_answered_a_slice_per_loop_turn(
    tmp_path: Path, exporters: list[LandingExporter], make_push: PushFactory
) -> None:
    """Thousands of pushes behind one fsync (a slow disk) resumed in one turn held the
    event loop for tens of ms; each turn now resumes at most ANSWER_SLICE of them."""
    exporter = await _start(exporters, tmp_path, commit_interval_ms=200)
    loop = asyncio.get_running_loop()
    turn = [0]
    counting = [True]

    def count_turns() -> None:
        turn[0] += 1
        if counting[0]:
            loop.call_soon(count_turns)

    answered_in: list[int] = []

    async def push(i: int) -> None:
        await exporter.export(make_push(i))
        answered_in.append(turn[0])

    count_turns()
    count = 4 * landing_wal.ANSWER_SLICE
    await asyncio.gather(*(push(i) for i in range(count)))
    counting[0] = False
    assert exporter.stats.pushes == count
    per_turn = [answered_in.count(t) for t in set(answered_in)]
    assert max(per_turn) <= landing_wal.ANSWER_SLICE
    assert len(per_turn) >= 4


async def test_a_submitted_push_is_told_two_turns_after_its_fsync_returns(
    tmp_path: Path,
    exporters: list[LandingExporter],
    make_push: PushFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``submit``: no task per push, and no turn of the event loop between the commit
    task's wake-up and the pushes' answers (each turn there delayed every answer
    under load, where a turn takes 2-3 ms; ``export`` through a future took four)."""
    exporter = await _start(exporters, tmp_path, commit_interval_ms=0)
    loop = asyncio.get_running_loop()
    turn = [0]
    counting = [True]
    returned: list[int] = []
    write_batch = landing_wal.write_batch

    def count_turns() -> None:
        turn[0] += 1
        if counting[0]:
            loop.call_soon(count_turns)

    def timed_write(batch: object) -> int:
        fsyncs = write_batch(batch)  # type: ignore[arg-type]
        returned.append(turn[0])  # read off the loop thread: right to a turn
        return fsyncs

    monkeypatch.setattr(landing_wal, "write_batch", timed_write)
    told: list[tuple[int, BaseException | None]] = []
    count_turns()
    assert exporter.submit(make_push(0), lambda error: told.append((turn[0], error)))
    assert exporter.submit(make_push(1), lambda error: told.append((turn[0], error)))
    await _wait_for(lambda: len(told) == 2)
    counting[0] = False
    assert [error for _, error in told] == [None, None]
    assert exporter.stats.pushes == 2
    assert returned
    assert len(returned) == 1
    # The thread writes its wake-up byte after reading the turn, and the write lets go of
    # the interpreter lock, so the loop may run one turn before the byte is there (1).
    # The byte wakes the loop, whose reader settles the call (2), which wakes the commit
    # task (3); the pushes are told in that turn.
    assert told[0][0] == told[1][0] <= returned[0] + 3


async def test_concurrent_pushes_are_answered_with_their_records_in_the_segment(
    tmp_path: Path,
    exporters: list[LandingExporter],
    make_push: PushFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each of many concurrent pushes is answered only once its record is in the WAL
    segment (read back at its answer, over the zeros the file was given ahead of the
    records); they share group commits; a sealed segment ends at its last record."""
    exporter = await _start(exporters, tmp_path, roll_seconds=3600)
    wal = tmp_path / "landing" / ".wal"

    async def push(i: int) -> None:
        sent = make_push(i, payload=f"push-{i}".encode())
        await exporter.export(sent)
        [segment] = wal.glob(f"*/*{SUFFIX}")
        contents = decode_segment(segment.read_bytes())
        assert sent.payload in contents.columns.payload
        assert contents.torn_bytes == 0

    count = 300
    await asyncio.gather(*(push(i) for i in range(count)))
    assert exporter.stats.batches < count
    [segment] = wal.glob(f"*/*{SUFFIX}")
    contents = decode_segment(segment.read_bytes())
    assert len(contents.columns) == count
    assert segment.stat().st_size >= landing_wal.PREALLOCATE_FIRST_BYTES
    assert contents.padding_bytes == segment.stat().st_size - contents.valid_bytes > 0
    # Sealed (by flush): the zeros are cut off before the segment is converted.
    converting = asyncio.Event()
    convert = Converter.convert
    seen: list[int] = []

    async def held(self: object, loop: object, layout: object, path: Path) -> object:
        seen.append(path.stat().st_size)
        await converting.wait()
        return await convert(self, loop, layout, path)  # type: ignore[arg-type]

    monkeypatch.setattr(Converter, "convert", held)
    flushed = asyncio.create_task(exporter.flush(timeout_s=60))
    await _wait_for(lambda: bool(seen))
    converting.set()
    await flushed
    assert seen == [contents.valid_bytes]
    assert read_landing(tmp_path).num_rows == count


async def test_commits_wait_while_the_converter_is_a_backlog_behind(
    tmp_path: Path,
    exporters: list[LandingExporter],
    make_push: PushFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Sealed segments waiting for conversion are bounded: past the backlog, commits
    wait (pushes wait for their fsync), and they go on when conversions do. One
    segment is with the converter, a backlog waits, and the commit that found the
    backlog full waits to hand its segment over (its push was answered)."""
    converting = asyncio.Event()
    convert = Converter.convert

    async def held(self: object, *args: object) -> object:
        await converting.wait()
        return await convert(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Converter, "convert", held)
    # Each push seals a segment of its own, and is a commit of its own.
    exporter = await _start(exporters, tmp_path, roll_bytes=1, commit_interval_ms=0)
    count = landing._SEALED_BACKLOG + 5
    pushes = []
    through = landing._SEALED_BACKLOG + 2
    for i in range(count):
        pushes.append(asyncio.create_task(exporter.export(make_push(i))))
        if i < through:  # a commit of its own: the next push waits for this one's
            await _wait_for(lambda n=i: exporter.stats.pushes > n)
    try:
        await asyncio.sleep(0.5)  # the rest had time to get through, and did not
        assert exporter.stats.pushes == through
        assert [p.done() for p in pushes].count(False) == count - exporter.stats.pushes
    finally:
        converting.set()
    await asyncio.wait_for(asyncio.gather(*pushes), MIN_DEADLINE_S)
    await exporter.flush(timeout_s=60)
    assert read_landing(tmp_path).num_rows == count


async def test_submit_says_no_when_no_slot_is_free_and_fails_fast_on_a_bad_disk(
    tmp_path: Path, exporters: list[LandingExporter], make_push: PushFactory
) -> None:
    exporter = await _start(exporters, tmp_path, max_pending=1, commit_interval_ms=50)
    told: list[BaseException | None] = []
    assert exporter.submit(make_push(0), told.append)
    assert not exporter.submit(make_push(1), told.append)  # the caller awaits export
    await _wait_for(lambda: told == [None])
    assert exporter.submit(make_push(2), told.append)  # the slot was given back
    await _wait_for(lambda: told == [None, None])
    assert exporter.stats.pushes == 2
    exporter._failure = OSError(28, "No space left on device")  # as _wal_failed sets it
    with pytest.raises(ExportError, match="No space left"):
        exporter.submit(make_push(3), told.append)
    assert told == [None, None]
