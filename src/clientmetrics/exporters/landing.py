"""The landing exporter: every accepted push becomes one row of a Parquet dataset.

It implements docs/landing.md. ``export`` frames the push as a WAL record, adds it
to the open batch and waits; the committer task writes and fsyncs each batch on a
worker thread (group commit: one fsync answers every push that arrived while the
previous one ran) and then wakes all its pushes at once. Segments are sealed by
size, age, UTC hour and on flush; the converter task turns each sealed segment
into one Parquet file in a child process (``_Converter``: off the event loop's
GIL). On start, segments left by dead writers (crashed processes) are
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
import multiprocessing
import os
import secrets
from collections import deque
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

import structlog

from clientmetrics.exporters import landing_files as files
from clientmetrics.exporters.base import Exporter, ExportError, Landed
from clientmetrics.exporters.landing_options import LandingOptions
from clientmetrics.exporters.wal import MAGIC, SUFFIX, encode_record, segment_name, utc_hour
from clientmetrics.lifeline import child_started
from clientmetrics.telemetry.model import AcceptedPush
from clientmetrics.telemetry.push_arrow import LANDING_DIR

log = structlog.get_logger(__name__)
_SEALED_BACKLOG = 8
#: How often a running exporter looks for WAL left by writers that died since.
RECOVER_EVERY_S = 30.0
#: Backoff of the WAL probe and of conversion retries: first wait, and the cap.
RETRY_FIRST_S = 0.1
RETRY_MAX_S = 5.0
#: Bytes the WAL probe writes and fsyncs: about a large push, so that a disk with
#: a few bytes free is not taken for a healed one.
PROBE_BYTES = 64 * 1024
#: Pushes of one group commit answered per turn of the event loop (each resumes its
#: handler, which encodes and writes the answer: ~16 us): a few ms a turn at most.
ANSWER_SLICE = 128


@dataclass(frozen=True, slots=True)
class LandingStats:
    """Counters since start, for benchmarks and metrics."""

    pushes: int
    batches: int
    fsyncs: int
    files: int
    recovered_files: int


class _Segment:
    """The exporter's view of one WAL segment file (mutated by loop and committer)."""

    __slots__ = ("durable", "fd", "hour", "name", "opened_at", "path", "size")

    def __init__(self, name: str, path: Path, hour: int, opened_at: float) -> None:
        self.name = name
        self.path = path
        self.hour = hour
        self.opened_at = opened_at
        self.size = 0
        self.fd: int | None = None
        #: Bytes of the file known fsynced (set on the WAL thread after each batch).
        self.durable = 0


class _Batch:
    """Records that will share one fsync; ``future`` is its outcome. Its pushes are
    told it by ``finish``, ``ANSWER_SLICE`` per turn of the event loop, each through
    the callback it was added with (``then``; ``wait`` makes one for a future)."""

    __slots__ = ("callbacks", "chunks", "count", "future", "sealed", "started")

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future = future
        self.chunks: list[tuple[_Segment, list[bytes]]] = []
        self.sealed: list[_Segment] = []
        self.count = 0
        self.started = 0.0
        self.callbacks: list[Landed] = []

    def then(self, landed: Landed) -> None:
        """Call ``landed(None)`` once the batch is fsynced, ``landed(error)`` if not."""
        self.callbacks.append(landed)

    def wait(self) -> asyncio.Future[None]:
        """A push's own future, resolved like ``future``."""
        waiter = self.future.get_loop().create_future()

        def settle(error: BaseException | None) -> None:
            if waiter.done():  # its push was cancelled; the record is in the WAL anyway
                return
            if error is None:
                waiter.set_result(None)
            elif isinstance(error, asyncio.CancelledError):
                waiter.cancel()
            else:
                waiter.set_exception(error)

        self.callbacks.append(settle)
        return waiter

    def finish(self, error: BaseException | None) -> None:
        """Settle ``future`` and start telling the pushes, the first slice now."""
        if self.future.done():
            return
        if error is None:
            self.future.set_result(None)
        else:
            self.future.set_exception(error)
            self.future.exception()  # retrieved: the pushes are told it
        self._answer(error, 0)

    def _answer(self, error: BaseException | None, start: int) -> None:
        # All at once, thousands of pushes resuming in one turn held the loop: 42 ms
        # measured for the 2,585 pushes behind a 715 ms fdatasync.
        end = min(start + ANSWER_SLICE, len(self.callbacks))
        for landed in self.callbacks[start:end]:
            try:
                landed(error)
            except Exception:  # one push's answer must not keep the others waiting
                log.exception("landing.answer_failed")
        if end < len(self.callbacks):
            self.future.get_loop().call_soon(self._answer, error, end)

    def add(self, segment: _Segment, record: bytes, now: float) -> None:
        if not self.chunks or self.chunks[-1][0] is not segment:
            self.chunks.append((segment, []))
        self.chunks[-1][1].append(record)
        if self.count == 0:
            self.started = now
        self.count += 1

    @property
    def empty(self) -> bool:
        return not self.chunks and not self.sealed


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
        self._current: _Segment | None = None
        self._batch: _Batch | None = None
        self._inflight: _Batch | None = None
        self._wake = asyncio.Event()
        # Back-pressure: at most max_pending pushes wait on the WAL; the others queue
        # FIFO and each freed slot is handed to the next one directly. (Python 3.11's
        # asyncio.Semaphore rescans its waiters on every release, which goes quadratic
        # when a group commit frees thousands of slots at once.)
        self._pending = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._sealed: asyncio.Queue[_Segment] = asyncio.Queue(_SEALED_BACKLOG)
        self._tasks: list[asyncio.Task[None]] = []
        self._wal_thread = ThreadPoolExecutor(1, thread_name_prefix="landing-wal")
        self._file_thread = ThreadPoolExecutor(1, thread_name_prefix="landing-files")
        self._converter = _Converter(self._file_thread)
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
        self._batch = _Batch(loop.create_future())
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

    def _append(self, push: AcceptedPush) -> _Batch:
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
            segment = _Segment(name, self._writer_dir / f"{name}{SUFFIX}", hour, now)
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
        self._wal_thread.shutdown(wait=True)
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
            self._batch = _Batch(loop.create_future())
            self._inflight = batch
            try:
                fsyncs = await loop.run_in_executor(self._wal_thread, _write_batch, batch)
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

    async def _gather(self, batch: _Batch, loop: asyncio.AbstractEventLoop) -> None:
        # Let pushes that are already on their way join this fsync, but never make
        # the first one wait longer than commit_interval_ms.
        deadline = batch.started + self._options.commit_interval_ms / 1000
        while loop.time() < deadline:
            seen = batch.count
            await asyncio.sleep(0)
            if batch.count == seen:
                return

    async def _wal_failed(self, exc: OSError, batch: _Batch) -> None:
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
        segments: list[_Segment] = []
        for failed in (batch, pending):
            if failed is None:
                continue
            failed.finish(ExportError(f"landing WAL write failed: {exc}"))
            segments += [seg for seg, _ in failed.chunks] + failed.sealed
        if self._current is not None:
            segments.append(self._current)
        self._current = None
        self._batch = _Batch(asyncio.get_running_loop().create_future())
        unique = list({id(seg): seg for seg in segments}.values())
        loop = asyncio.get_running_loop()
        kept = await loop.run_in_executor(self._wal_thread, _abandon, unique)
        for segment in kept:
            await self._sealed.put(segment)

    async def _probe_loop(self) -> None:
        """While WAL writes fail, retry a probe write with backoff; clear the fault on success."""
        loop = asyncio.get_running_loop()
        delay = RETRY_FIRST_S
        while True:
            if self._failure is None:
                delay = RETRY_FIRST_S
                await self._faulted.wait()
                self._faulted.clear()
                continue
            await asyncio.sleep(delay)
            try:
                await loop.run_in_executor(self._wal_thread, _probe, self._writer_dir)
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

    async def _convert(self, segment: _Segment) -> None:
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


class _Converter:
    """Turns sealed segments into Parquet files in a child process, off the event loop's GIL.

    Decoding a segment is a Python loop over its records; on a thread of the
    gateway process it would take the GIL from the event loop in 5 ms slices
    for a whole segment, and every push in flight would wait (measured:
    100-200 ms latency spikes each time a segment rolled). The child is started
    (``spawn``: nothing of the parent's state is inherited) on a thread, not on
    the event loop: starting a process forks the whole gateway. It starts again
    if it dies; where no child can be started, the conversion runs on
    ``fallback``, a thread. The child runs off the worker's cores when there are
    others, and at a lower priority once started (``lifeline``,
    ``files.converter_ready``): on the worker's core it would take the loop's
    time in bursts every ``roll_seconds``.
    """

    def __init__(self, fallback: ThreadPoolExecutor) -> None:
        self._fallback = fallback
        self._pool: ProcessPoolExecutor | None = None
        self._usable = True

    async def convert(
        self, loop: asyncio.AbstractEventLoop, layout: files.Layout, path: Path
    ) -> files.Converted:
        pool = self._pool
        if pool is None and self._usable:
            pool = await loop.run_in_executor(self._fallback, self._start_pool)
        if pool is not None:
            try:
                return await loop.run_in_executor(pool, files.convert_segment, layout, path)
            except BrokenProcessPool:
                log.warning("landing.converter_died", segment=path.name)
                self._pool = None
        return await loop.run_in_executor(self._fallback, files.convert_segment, layout, path)

    def _start_pool(self) -> ProcessPoolExecutor | None:
        """The child, started and answering (runs on a thread: the spawn forks)."""
        if self._pool is None and self._usable:
            try:
                context = multiprocessing.get_context("spawn")
                # The initializer lives in a module that imports nothing heavy, so the
                # child is bound to this process, and off its cores, before it imports
                # pyarrow. Those imports (0.6 s of CPU) run at the worker's priority:
                # niced, behind a busy machine's other work, they took 20 s, and the
                # rows waited. Only then does the child lower its priority.
                pool = ProcessPoolExecutor(
                    1,
                    mp_context=context,
                    initializer=child_started,
                    initargs=(os.getpid(), True, True),
                )
                pool.submit(files.converter_ready).result()  # spawned and imported here
                self._pool = pool
            except (OSError, AssertionError, ValueError, BrokenProcessPool) as exc:
                # e.g. a daemonic parent
                log.warning("landing.converter_unavailable", error=repr(exc))
                self._usable = False
        return self._pool

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


#: A segment's writes return once their data is on stable storage (O_DSYNC): one
#: system call per batch where a write, an fdatasync and an fstat were three, and
#: after each the WAL thread waits for the interpreter lock (up to 0.5 ms under load).
_SEGMENT_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC | os.O_DSYNC


def _write_batch(batch: _Batch) -> int:
    """Append a batch to its segment files, durably; runs on the WAL thread.

    Returns the synced writes (and directory fsyncs) it took."""
    written: dict[_Segment, int] = {}
    new_dirs: set[Path] = set()
    for segment, records in batch.chunks:
        if segment.fd is None:
            segment.fd = os.open(segment.path, _SEGMENT_FLAGS, 0o644)
            _write_all(segment.fd, MAGIC)
            segment.durable = len(MAGIC)  # no record yet: nothing to keep if it fails
            new_dirs.add(segment.path.parent)
        data = b"".join(records)
        _write_all(segment.fd, data)
        written[segment] = written.get(segment, 0) + len(data)
    for directory in new_dirs:
        # A new segment's directory entry must be durable too, or its records are.
        files.fsync_dir(directory)
    for segment, size in written.items():
        segment.durable += size
    for segment in batch.sealed:
        if segment.fd is not None:
            os.close(segment.fd)
            segment.fd = None
    return len(batch.chunks) + len(new_dirs)


def _abandon(segments: list[_Segment]) -> list[_Segment]:
    """After a failed write: trim each segment to its fsynced bytes and close it.

    Returns the segments that still hold records (to convert); empty ones are
    removed. Runs on the WAL thread.
    """
    kept: list[_Segment] = []
    for segment in segments:
        if segment.fd is None:
            continue  # never opened: no file, nothing to convert
        try:
            if segment.durable > len(MAGIC):
                os.ftruncate(segment.fd, segment.durable)
                os.fdatasync(segment.fd)
                kept.append(segment)
            else:
                segment.path.unlink(missing_ok=True)
        except OSError as exc:
            # Left as it is: a torn tail after the last fsynced record is dropped
            # when the segment is decoded, which is all a trim would have done.
            log.warning("landing.wal.trim_failed", segment=segment.name, error=str(exc))
            kept.append(segment)
        finally:
            os.close(segment.fd)
            segment.fd = None
    return kept


def _probe(writer_dir: Path) -> None:
    """Write, fsync and remove a scratch file in the WAL: raises OSError while that fails."""
    path = writer_dir / f"probe-{secrets.token_hex(4)}.tmp"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        _write_all(fd, bytes(PROBE_BYTES))
        os.fdatasync(fd)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def create(options: Mapping[str, object], data_dir: Path) -> Exporter:
    """Entry-point factory: a landing exporter under ``data_dir/landing``."""
    return LandingExporter(data_dir, LandingOptions.from_mapping(options))
