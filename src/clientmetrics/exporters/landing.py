"""The landing exporter: every accepted push becomes one row of a Parquet dataset.

It implements docs/landing.md. ``export`` frames the push as a WAL record, adds it
to the open batch and waits; the committer task writes and fsyncs each batch on a
worker thread (group commit: one fsync answers every push that arrived while the
previous one ran; ``landing_wal``) and then wakes all its pushes at once. Segments are sealed by
size, age, UTC hour and on flush; the converter task turns each sealed segment
into one Parquet file in a child process (``landing_converter``: off the event
loop's GIL). On start, segments left by dead writers (crashed processes) are
converted first.

Faults heal without a restart. A failed WAL write (a full disk) fails the pushes
of that batch, trims the segments it touched back to what was fsynced, seals
them, and makes the exporter refuse pushes at once while a probe write retries
with backoff; the first probe that succeeds lets pushes in again. A failed
conversion is retried with backoff (capped near ``roll_seconds``), so
acknowledged rows become visible soon after the fault clears. ``health`` says
whether pushes can land now; ``counters`` separates pushes made durable in the
WAL from rows landed in Parquet.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections import deque
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import structlog

from clientmetrics.exporters import landing_files as files
from clientmetrics.exporters import landing_wal
from clientmetrics.exporters.base import Exporter, ExportError, Landed
from clientmetrics.exporters.landing_converter import Converter
from clientmetrics.exporters.landing_options import LandingOptions
from clientmetrics.exporters.landing_wal import Batch, Segment, WalThread
from clientmetrics.exporters.wal import SUFFIX, encode_record, segment_name, utc_hour
from clientmetrics.telemetry.model import AcceptedPush
from clientmetrics.telemetry.push_arrow import LANDING_DIR

log = structlog.get_logger(__name__)
_SEALED_BACKLOG = 8
#: How often a running exporter looks for WAL left by writers that died since.
RECOVER_EVERY_S = 30.0
#: Backoff of the WAL probe and of conversion retries: first wait, and the cap.
RETRY_FIRST_S = 0.1
RETRY_MAX_S = 5.0


@dataclass(frozen=True, slots=True)
class LandingStats:
    """Counters since start, for benchmarks and metrics."""

    pushes: int
    batches: int
    fsyncs: int
    files: int
    recovered_files: int


class LandingExporter:
    """Durable Parquet landing zone under ``data_dir/landing`` (docs/landing.md)."""

    name = "landing"

    def __init__(self, data_dir: Path, options: LandingOptions | None = None) -> None:
        self._layout = files.Layout(data_dir / LANDING_DIR)
        self._options = options or LandingOptions()
        self.writer_id = secrets.token_hex(8)
        self._writer_dir = self._layout.wal / self.writer_id
        self._lock_fd: int | None = None
        self._sequence = 0
        self._current: Segment | None = None
        self._batch: Batch | None = None
        self._inflight: Batch | None = None
        self._wake = asyncio.Event()
        # Back-pressure: at most max_pending pushes wait on the WAL; the others queue
        # FIFO and each freed slot is handed to the next one directly. (Python 3.11's
        # asyncio.Semaphore rescans its waiters on every release, which goes quadratic
        # when a group commit frees thousands of slots at once.)
        self._pending = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._sealed: asyncio.Queue[Segment] = asyncio.Queue(_SEALED_BACKLOG)
        self._tasks: list[asyncio.Task[None]] = []
        self._wal_thread = WalThread("landing-wal")
        self._file_thread = ThreadPoolExecutor(1, thread_name_prefix="landing-files")
        self._converter = Converter(self._file_thread)
        #: Set while WAL writes fail: pushes are refused until a probe write succeeds.
        self._failure: BaseException | None = None
        self._faulted = asyncio.Event()  # wakes the probe
        self._convert_failure: BaseException | None = None
        self._counts = {"pushes": 0, "batches": 0, "fsyncs": 0, "files": 0, "recovered": 0}
        self._faults = {"rows": 0, "wal_failures": 0, "convert_failures": 0}

    @property
    def stats(self) -> LandingStats:
        """A snapshot of the counters."""
        c = self._counts
        return LandingStats(c["pushes"], c["batches"], c["fsyncs"], c["files"], c["recovered"])

    def health(self) -> str | None:
        """None when a push can land now; otherwise why not (for ``/readyz``)."""
        if not self._tasks:
            return "landing exporter is not running"
        if self._failure is not None:
            return f"landing WAL write failed: {self._failure}"
        return None

    def counters(self) -> dict[str, float]:
        """Landing counters for ``/metrics``: durable in the WAL is not yet landed."""
        return {
            "landing_pushes_durable": self._counts["pushes"],
            "landing_rows_landed": self._faults["rows"],
            "landing_files": self._counts["files"],
            "landing_wal_failures": self._faults["wal_failures"],
            "landing_convert_failures": self._faults["convert_failures"],
            "landing_segments_waiting": self._sealed.qsize(),
            "landing_ready": 0.0 if self.health() else 1.0,
            "landing_converting_ok": 0.0 if self._convert_failure else 1.0,
        }

    async def start(self) -> None:
        """Create the zone, claim a writer directory, recover dead writers' segments."""
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._file_thread, self._claim_and_recover)
        except OSError as exc:
            raise ExportError(f"landing zone {self._layout.root}: {exc}") from exc
        self._batch = Batch(loop.create_future())
        self._tasks = [
            asyncio.create_task(self._commit_loop(), name="landing-commit"),
            asyncio.create_task(self._roll_loop(), name="landing-roll"),
            asyncio.create_task(self._convert_loop(), name="landing-convert"),
            asyncio.create_task(self._recover_loop(), name="landing-recover"),
            asyncio.create_task(self._probe_loop(), name="landing-probe"),
        ]

    def _claim_and_recover(self) -> None:
        self._layout.create()
        self._lock_fd = files.lock_writer_dir(self._writer_dir)
        if self._lock_fd is None:
            raise OSError(f"writer {self.writer_id} is locked by another process")
        self._writer_dir.mkdir()
        files.fsync_dir(self._layout.wal)
        self._recover()

    def _recover(self) -> None:
        recovered = files.recover_orphans(self._layout, self.writer_id)
        self._counts["recovered"] += sum(1 for r in recovered if r.rows and not r.already_landed)

    async def export(self, push: AcceptedPush) -> None:
        """Append ``push`` to the WAL; return once it is fsynced."""
        await self._acquire_slot()
        try:
            batch = self._append(push)
            await batch.wait()
        finally:
            self._release_slot()

    def submit(self, push: AcceptedPush, landed: Landed) -> bool:
        """``export`` without a task or a turn of the loop: append ``push`` now and call
        ``landed`` once it is fsynced (None) or failed (the error).

        False, and nothing done, when no slot is free (``max_pending``): await
        ``export``, which queues for one. Raises ``ExportError`` as ``export`` does.
        """
        if not self._slot_free():
            return False
        batch = self._append(push)
        self._pending += 1

        def released(error: BaseException | None) -> None:
            self._release_slot()
            landed(error)

        batch.then(released)
        return True

    def _slot_free(self) -> bool:
        """Whether a push may wait on the WAL now (none queues for a slot before it)."""
        return self._pending < self._options.max_pending and not self._waiters

    async def _acquire_slot(self) -> None:
        if self._slot_free():
            self._pending += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # the releaser handed its slot over: _pending already counts us
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release_slot()  # got a slot while being cancelled: pass it on
            else:
                self._waiters.remove(waiter)
            raise

    def _release_slot(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._pending -= 1

    def _append(self, push: AcceptedPush) -> Batch:
        if self._failure is not None:
            # Fail fast while the disk is bad: the client retries after its interval.
            raise ExportError(f"landing exporter failed: {self._failure}") from self._failure
        batch = self._batch
        if batch is None or not self._tasks:
            raise ExportError("landing exporter is not running")
        record = encode_record(push)
        now = asyncio.get_running_loop().time()
        segment = self._current
        hour = utc_hour(push.received_at_ms)
        if segment is not None and segment.hour != hour:
            self._seal_current()
            segment = None
        if segment is None:
            name = segment_name(push.received_at_ms, self.writer_id, self._sequence)
            self._sequence += 1
            segment = Segment(name, self._writer_dir / f"{name}{SUFFIX}", hour, now)
            self._current = segment
        batch.add(segment, record, now)
        segment.size += len(record)
        if segment.size >= self._options.roll_bytes:
            self._seal_current()
        self._wake.set()
        return batch

    def _seal_current(self) -> None:
        # The seal rides in the open batch, after every record of the segment.
        if self._current is not None and self._batch is not None:
            self._batch.sealed.append(self._current)
            self._current = None
            self._wake.set()

    async def flush(self, timeout_s: float) -> None:
        """Seal the open segment and wait until every segment is a Parquet file."""
        try:
            await asyncio.wait_for(self._drain(), timeout_s)
        except TimeoutError:
            raise ExportError(f"landing flush did not finish within {timeout_s} s") from None
        if self._failure is not None:
            raise ExportError(f"landing exporter failed: {self._failure}") from self._failure

    async def _drain(self) -> None:
        self._seal_current()
        batch = self._batch
        if batch is not None and not batch.empty and self._failure is None:
            await asyncio.shield(batch.future)
        await self._sealed.join()

    async def close(self, timeout_s: float) -> None:
        """Flush, stop the tasks and threads, and give up the writer directory."""
        self._converter.hurry()
        try:
            if self._tasks and self._failure is None:
                await self.flush(timeout_s)
        finally:
            await self._shutdown()

    async def _shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        # Only after a flush that timed out can pushes still be waiting; they were
        # never acknowledged, and must not wait for ever.
        for batch in (self._inflight, self._batch):
            if batch is not None:
                batch.finish(ExportError("landing exporter closed"))
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._release)

    def _release(self) -> None:
        self._wal_thread.shutdown()
        self._converter.shutdown()
        self._file_thread.shutdown(wait=True)
        for segment in (self._current, *(self._batch.sealed if self._batch else ())):
            if segment is not None and segment.fd is not None:
                os.close(segment.fd)
                segment.fd = None
        if self._lock_fd is not None:
            # Segments still here (a failed flush) stay for the next start to recover.
            files.retire_writer_dir(self._writer_dir, self._lock_fd)
            self._lock_fd = None

    # --- background tasks ---------------------------------------------------------

    async def _commit_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch = self._batch
            if batch is None or batch.empty:
                continue
            await self._gather(batch, loop)
            self._batch = Batch(loop.create_future())
            self._inflight = batch
            try:
                fsyncs = await self._wal_thread.run(landing_wal.write_batch, batch)
            except OSError as exc:
                await self._wal_failed(exc, batch)
                continue
            finally:
                self._inflight = None
            self._counts["pushes"] += batch.count
            self._counts["batches"] += 1
            self._counts["fsyncs"] += fsyncs
            batch.finish(None)
            for segment in batch.sealed:
                await self._sealed.put(segment)

    async def _gather(self, batch: Batch, loop: asyncio.AbstractEventLoop) -> None:
        # Let pushes that are already on their way join this fsync, but never make
        # the first one wait longer than commit_interval_ms.
        deadline = batch.started + self._options.commit_interval_ms / 1000
        while loop.time() < deadline:
            seen = batch.count
            await asyncio.sleep(0)
            if batch.count == seen:
                return

    async def _wal_failed(self, exc: OSError, batch: Batch) -> None:
        """Fail the unacknowledged pushes, set the WAL straight, refuse pushes until healed.

        Every segment the failed batch (or the batch filling behind it) touched is
        trimmed to its fsynced length and sealed: an acknowledged record must never
        sit behind a torn one. Sealed segments with records go on to conversion.
        """
        log.error("landing.wal.write_failed", error=str(exc))
        self._faults["wal_failures"] += 1
        self._failure = exc
        self._faulted.set()
        pending = self._batch
        segments: list[Segment] = []
        for failed in (batch, pending):
            if failed is None:
                continue
            failed.finish(ExportError(f"landing WAL write failed: {exc}"))
            segments += [seg for seg, _ in failed.chunks] + failed.sealed
        if self._current is not None:
            segments.append(self._current)
        self._current = None
        self._batch = Batch(asyncio.get_running_loop().create_future())
        unique = list({id(seg): seg for seg in segments}.values())
        kept = await self._wal_thread.run(landing_wal.abandon, unique)
        for segment in kept:
            await self._sealed.put(segment)

    async def _probe_loop(self) -> None:
        """While WAL writes fail, retry a probe write with backoff; clear the fault on success."""
        delay = RETRY_FIRST_S
        while True:
            if self._failure is None:
                delay = RETRY_FIRST_S
                await self._faulted.wait()
                self._faulted.clear()
                continue
            await asyncio.sleep(delay)
            try:
                await self._wal_thread.run(landing_wal.probe, self._writer_dir)
            except OSError as exc:
                delay = min(delay * 2, RETRY_MAX_S)
                log.warning("landing.wal.still_failing", error=str(exc), retry_in_s=delay)
                continue
            log.info("landing.wal.recovered", after_error=str(self._failure))
            self._failure = None

    async def _roll_loop(self) -> None:
        loop = asyncio.get_running_loop()
        period = max(0.005, min(self._options.roll_seconds / 4, 0.5))
        while True:
            await asyncio.sleep(period)
            segment = self._current
            if (
                segment is not None
                and loop.time() - segment.opened_at >= self._options.roll_seconds
            ):
                self._seal_current()

    async def _recover_loop(self) -> None:
        # Several gateway processes may share the data dir; when one dies, another
        # that is still running lands its acknowledged pushes without a restart.
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(RECOVER_EVERY_S)
            try:
                await loop.run_in_executor(self._file_thread, self._recover)
            except OSError as exc:
                log.error("landing.recover_failed", error=str(exc))

    async def _convert_loop(self) -> None:
        while True:
            segment = await self._sealed.get()
            try:
                await self._convert(segment)
            finally:
                self._sealed.task_done()

    async def _convert(self, segment: Segment) -> None:
        """Convert one sealed segment, retrying with backoff while the disk fails.

        An I/O error (a full disk) is retried: the rows are acknowledged and must
        become visible. Anything else (an undecodable segment) is logged and the
        segment left in the WAL for an operator; the loop must go on either way,
        or flush() would wait for ever.
        """
        loop = asyncio.get_running_loop()
        delay = RETRY_FIRST_S
        cap = max(RETRY_FIRST_S, min(RETRY_MAX_S, self._options.roll_seconds))
        while True:
            try:
                result = await self._converter.convert(loop, self._layout, segment.path)
            except OSError as exc:
                self._faults["convert_failures"] += 1
                self._convert_failure = exc
                log.error("landing.convert_failed", segment=segment.name, error=repr(exc),
                          retry_in_s=delay)  # fmt: skip
                await asyncio.sleep(delay)
                delay = min(delay * 2, cap)
                continue
            except Exception as exc:
                log.error("landing.convert_failed", segment=segment.name, error=repr(exc),
                          retry_in_s=None)  # fmt: skip
                return
            if self._convert_failure is not None:
                log.info("landing.convert_recovered", segment=segment.name)
                self._convert_failure = None
            if result.path is not None:
                self._counts["files"] += 1
                self._faults["rows"] += result.rows
            return


def create(options: Mapping[str, object], data_dir: Path) -> Exporter:
    """Entry-point factory: a landing exporter under ``data_dir/landing``."""
    return LandingExporter(data_dir, LandingOptions.from_mapping(options))
