"""The landing exporter's WAL side: segments, group-commit batches, and what the
WAL thread does with them (write, trim after a failure, probe while failing).

The exporter (``landing.py``) owns the loop side: it fills batches and decides when
each is written; everything here that touches a file runs on its WAL thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import secrets
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import structlog

from clientmetrics.exporters import landing_files as files
from clientmetrics.exporters.base import Landed
from clientmetrics.exporters.wal import MAGIC

log = structlog.get_logger(__name__)
_T = TypeVar("_T")
#: Bytes the WAL probe writes and fsyncs: about a large push, so that a disk with
#: a few bytes free is not taken for a healed one.
PROBE_BYTES = 64 * 1024
#: How far ahead of its records a segment file is zero-filled (and synced), so that a
#: group commit overwrites blocks the file already has: an appending synced write
#: also allocates blocks and grows the file, a journal commit of its metadata each
#: time. On the project's ext4 disk, 3,000-byte commits took 180-196 us of CPU and
#: 1.4-2.7 ms appending, 83-99 us and 0.4-0.7 ms overwriting zeros. A new segment
#: gets ``PREALLOCATE_FIRST_BYTES``, and each extension doubles the file up to
#: ``PREALLOCATE_BYTES`` more: a short-lived segment (a quiet gateway rolls every
#: ``roll_seconds``) is not given a MiB of zeros, and at most one 3 KB push in ~350
#: pays for the next MiB of a busy one.
PREALLOCATE_FIRST_BYTES = 64 * 1024
PREALLOCATE_BYTES = 1024 * 1024
#: Pushes of one group commit answered per turn of the event loop (each resumes its
#: handler, which encodes and writes the answer: ~16 us): a few ms a turn at most.
ANSWER_SLICE = 128


class WalThread:
    """The WAL's one thread: runs file work in submission order, each call answered by
    an asyncio future of the loop that first ran it.

    ``run_in_executor`` on a one-thread pool did the same through a
    ``concurrent.futures`` future, its condition variable and a chained asyncio future:
    Python work on both sides, under the interpreter lock, for every group commit. At
    moderate load a commit carries one or two pushes, and that handoff was a large
    part of the event loop's core (``bench/wal_handoff.py``).

    The thread tells the loop a call is done by writing a byte to a pipe the loop
    reads, a system call made without the interpreter lock. ``call_soon_threadsafe``
    woke the loop while the thread still held the lock: on a worker's one core the
    woken loop took the core, waited for the lock, and gave the core back, two task
    switches per group commit for nothing. For the same reason the thread runs as
    ``SCHED_BATCH`` (Linux): woken by its queue or by its disk, it does not take the
    core from the running loop, whose interpreter lock it needs anyway, but runs when
    the loop waits (``bench/wal_handoff.py --busy``).

    The queue holds only what is under way: the exporter awaits each call before it
    makes the next of its kind (one batch write at a time, one probe at a time, a
    trim only after a failed write), so at most a few calls wait in it.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        #: Finished calls, appended by the thread and settled by the loop.
        self._done: deque[tuple[asyncio.Future[Any], object, BaseException | None]] = deque()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pipe = (-1, -1)

    def run(self, fn: Callable[..., _T], *args: Any) -> asyncio.Future[_T]:
        """``fn(*args)`` on the thread, after everything run before it."""
        loop = asyncio.get_running_loop()
        if self._thread is None:
            self._start(loop)
        elif loop is not self._loop:
            raise RuntimeError(f"{self._name} serves another event loop")
        future: asyncio.Future[_T] = loop.create_future()
        self._queue.put((future, fn, args))
        return future

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._pipe = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._loop = loop
        loop.add_reader(self._pipe[0], self._settle_done)
        self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(AttributeError, OSError):  # not Linux: as it is
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
        wake = self._pipe[1]
        while (call := self._queue.get()) is not None:
            future, fn, args = call
            try:
                result, error = fn(*args), None
            except BaseException as exc:  # handed to the awaiting task, which decides
                result, error = None, exc
            self._done.append((future, result, error))
            with contextlib.suppress(BlockingIOError):  # full: the loop has wake-ups to read
                os.write(wake, b"\0")

    def _settle_done(self) -> None:
        """On the loop: settle every finished call (after the wake-ups it read)."""
        with contextlib.suppress(BlockingIOError):
            os.read(self._pipe[0], 4096)
        done = self._done
        while done:
            _settle(*done.popleft())

    def shutdown(self) -> None:
        """Finish what was submitted, then stop the thread (blocks; any thread). The
        loop settles the last calls and closes the pipe when it next runs."""
        if self._thread is None:
            return
        self._queue.put(None)
        self._thread.join()
        self._thread = None
        loop = self._loop
        try:
            if loop is None or loop.is_closed():
                raise RuntimeError("no loop")
            loop.call_soon_threadsafe(self._close_pipe, loop)
        except RuntimeError:  # the loop is gone: nobody waits for the answers
            self._close_fds()

    def _close_pipe(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.remove_reader(self._pipe[0])
        self._settle_done()
        self._close_fds()

    def _close_fds(self) -> None:
        for fd in self._pipe:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._pipe = (-1, -1)


_Call = tuple["asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...]]


def _settle(future: asyncio.Future[Any], result: object, error: BaseException | None) -> None:
    if future.done():  # its waiter was cancelled
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


class Segment:
    """The exporter's view of one WAL segment file (mutated by loop and committer)."""

    __slots__ = ("allocated", "durable", "fd", "hour", "name", "opened_at", "path", "size")

    def __init__(self, name: str, path: Path, hour: int, opened_at: float) -> None:
        self.name = name
        self.path = path
        self.hour = hour
        self.opened_at = opened_at
        self.size = 0
        self.fd: int | None = None
        #: Bytes of the file known fsynced (set on the WAL thread after each batch).
        self.durable = 0
        #: The file's length: records up to ``durable``, synced zeros after them.
        self.allocated = 0


class Batch:
    """Records that will share one fsync; ``future`` is its outcome. Its pushes are
    told it by ``finish``, ``ANSWER_SLICE`` per turn of the event loop, each through
    the callback it was added with (``then``; ``wait`` makes one for a future)."""

    __slots__ = ("callbacks", "chunks", "count", "future", "sealed", "started")

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future = future
        self.chunks: list[tuple[Segment, list[bytes]]] = []
        self.sealed: list[Segment] = []
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

    def add(self, segment: Segment, record: bytes, now: float) -> None:
        if not self.chunks or self.chunks[-1][0] is not segment:
            self.chunks.append((segment, []))
        self.chunks[-1][1].append(record)
        if self.count == 0:
            self.started = now
        self.count += 1

    @property
    def empty(self) -> bool:
        return not self.chunks and not self.sealed


#: A segment's writes return once their data is on stable storage (O_DSYNC): one
#: system call per batch where a write, an fdatasync and an fstat were three, and
#: after each the WAL thread waits for the interpreter lock (up to 0.5 ms under load).
#: No O_APPEND: records overwrite the zeros ahead of them (``PREALLOCATE_BYTES``) at
#: the file position, which stays at the end of the records.
_SEGMENT_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_DSYNC


def write_batch(batch: Batch) -> int:
    """Write a batch into its segment files, durably; runs on the WAL thread.

    Returns the synced writes (and directory fsyncs) it took."""
    written: dict[Segment, int] = {}
    new_dirs: set[Path] = set()
    synced = 0
    for segment, records in batch.chunks:
        if segment.fd is None:
            segment.fd = os.open(segment.path, _SEGMENT_FLAGS, 0o644)
            new_dirs.add(segment.path.parent)
            synced += _reserve(segment, len(MAGIC))
        data = b"".join(records)
        end = segment.durable + written.get(segment, 0) + len(data)
        synced += _reserve(segment, end)
        write_all(segment.fd, data)
        written[segment] = written.get(segment, 0) + len(data)
    for directory in new_dirs:
        # A new segment's directory entry must be durable too, or its records are.
        files.fsync_dir(directory)
    for segment, size in written.items():
        segment.durable += size
    for segment in batch.sealed:
        if segment.fd is not None:
            _trim_zeros(segment)
            os.close(segment.fd)
            segment.fd = None
    return len(batch.chunks) + len(new_dirs) + synced


def _reserve(segment: Segment, end: int) -> int:
    """Zero-fill ``segment``'s file to ``end`` bytes or more, durably: the synced
    writes it took (0 or 1). A new file gets its magic in the same write."""
    assert segment.fd is not None
    if end <= segment.allocated:
        return 0
    grown = segment.allocated + min(segment.allocated, PREALLOCATE_BYTES)
    size = max(end, grown, PREALLOCATE_FIRST_BYTES)
    if segment.allocated == 0:
        write_at(segment.fd, MAGIC + bytes(size - len(MAGIC)), 0)
        os.lseek(segment.fd, len(MAGIC), os.SEEK_SET)
        segment.durable = len(MAGIC)  # no record yet: nothing to keep if it fails
    else:
        write_at(segment.fd, bytes(size - segment.allocated), segment.allocated)
    segment.allocated = size
    return 1


def _trim_zeros(segment: Segment) -> None:
    """A sealed segment ends at its last record. Not synced, and harmless if lost: a
    zero tail reads as padding (``wal.decode_segment``)."""
    assert segment.fd is not None
    try:
        os.ftruncate(segment.fd, segment.durable)
    except OSError as exc:
        log.warning("landing.wal.trim_failed", segment=segment.name, error=str(exc))


def abandon(segments: list[Segment]) -> list[Segment]:
    """After a failed write: trim each segment to its fsynced bytes and close it.

    Returns the segments that still hold records (to convert); empty ones are
    removed. Runs on the WAL thread.
    """
    kept: list[Segment] = []
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


def probe(writer_dir: Path) -> None:
    """Write, fsync and remove a scratch file in the WAL: raises OSError while that fails."""
    path = writer_dir / f"probe-{secrets.token_hex(4)}.tmp"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        write_all(fd, bytes(PROBE_BYTES))
        os.fdatasync(fd)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` at the file position (which it moves on)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def write_at(fd: int, data: bytes, offset: int) -> None:
    """Write all of ``data`` at ``offset`` (the file position stays)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written
