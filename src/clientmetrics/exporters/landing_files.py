"""Blocking file work of the landing exporter: Parquet files, fsyncs, WAL recovery.

Everything here runs on worker threads, never on the event loop. The layout and
the guarantees are the landing contract (docs/landing.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import structlog

from clientmetrics.exporters.wal import SUFFIX, Columns, decode_segment, segment_first_ms
from clientmetrics.lifeline import lower_priority
from clientmetrics.telemetry.push_arrow import LANDING_ARROW, PUSHES_DIR, partition, share_groups

log = structlog.get_logger(__name__)

#: The landing contract's columns, in order (docs/landing.md).
SCHEMA = LANDING_ARROW
LOCK_SUFFIX = ".lock"


@dataclass(frozen=True, slots=True)
class Layout:
    """The directories of one landing zone (``DATA/landing``)."""

    root: Path

    @property
    def pushes(self) -> Path:
        return self.root / PUSHES_DIR

    @property
    def staging(self) -> Path:
        return self.root / ".staging"

    @property
    def wal(self) -> Path:
        return self.root / ".wal"

    def create(self) -> None:
        """Make the zone's directories (durably: a new directory entry is fsynced)."""
        for directory in (self.pushes, self.staging, self.wal):
            make_dirs(directory)

    def final_path(self, segment: str) -> Path:
        """Where the Parquet file of ``segment`` lands: its first row's UTC hour."""
        when = datetime.fromtimestamp(segment_first_ms(segment) / 1000, tz=UTC)
        return self.pushes / partition(when) / f"part-{segment}.parquet"


@dataclass(frozen=True, slots=True)
class Converted:
    """The outcome of turning one WAL segment into its Parquet file."""

    segment: str
    rows: int
    path: Path | None
    #: True when the file was already there (a crash after rename, before unlink).
    already_landed: bool = False
    torn_bytes: int = 0


def converter_ready() -> int:
    """In the converter child: do once, at the worker's priority, what the first
    conversion would otherwise do niced, then lower the child's priority for the
    conversions to come. Returns the child's pid.

    Importing this module (pyarrow) is the most of it; the first ``pa.array``
    also imports pandas (pyarrow asks whether a list is a pandas array), 0.37 s
    of CPU, which took a niced child 8 s behind a busy machine's other work.
    """
    write_landed(to_table(Columns()), pa.BufferOutputStream())
    lower_priority()
    return os.getpid()


def fsync_dir(path: Path) -> None:
    """Make the entries of ``path`` (creations, renames, unlinks) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(path: Path) -> None:
    """``mkdir -p`` that fsyncs the parent of every directory it creates."""
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir()
        fsync_dir(directory.parent)


def to_table(cols: Columns) -> pa.Table:
    """The landing rows of ``cols`` as a table with the contract's exact schema."""
    arrays = [pa.array(cols[f.name], f.type) for f in SCHEMA]
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def write_landed(table: pa.Table, where: Path | pa.NativeFile) -> None:
    """Write landing rows as one Parquet file (zstd), a row group per share of their
    instances (``push_arrow.share_groups``), the shares named in its metadata: a
    pipeline task reads only its own share's row groups (docs/landing.md)."""
    grouped = share_groups(table)
    schema = table.schema.with_metadata({**(table.schema.metadata or {}), **grouped.metadata()})
    with pq.ParquetWriter(where, schema, compression="zstd") as writer:
        for _, first, rows in grouped.runs:
            writer.write_table(grouped.table.slice(first, rows), row_group_size=rows)


def convert_segment(layout: Layout, segment_path: Path) -> Converted:
    """Turn one sealed WAL segment into exactly one Parquet file, then delete it.

    Skips the write when the file already exists, so running this twice on the
    same segment (a crash between rename and unlink) never duplicates rows.
    """
    segment = segment_path.name.removesuffix(SUFFIX)
    final = layout.final_path(segment)
    if final.exists():
        _remove_segment(segment_path)
        return Converted(segment, 0, final, already_landed=True)
    contents = decode_segment(segment_path.read_bytes())
    if contents.torn_bytes:
        log.warning(
            "landing.wal.torn_tail",
            segment=segment,
            kept_bytes=contents.valid_bytes,
            dropped_bytes=contents.torn_bytes,
        )
    rows = len(contents.columns)
    if rows == 0:
        _remove_segment(segment_path)
        return Converted(segment, 0, None, torn_bytes=contents.torn_bytes)
    staging = layout.staging / final.name
    write_landed(to_table(contents.columns), staging)
    _fsync_file(staging)
    make_dirs(final.parent)
    os.rename(staging, final)
    fsync_dir(final.parent)
    _remove_segment(segment_path)
    return Converted(segment, rows, final, torn_bytes=contents.torn_bytes)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_segment(segment_path: Path) -> None:
    segment_path.unlink(missing_ok=True)
    fsync_dir(segment_path.parent)


def segments_in(writer_dir: Path) -> list[Path]:
    """The WAL segments of a writer, oldest first (sequence order)."""
    return sorted(
        writer_dir.glob(f"*{SUFFIX}"), key=lambda p: int(p.name.removesuffix(SUFFIX).split("-")[-1])
    )


def _lock_path(writer_dir: Path) -> Path:
    # The lock sits beside the directory, not in it: a writer takes its lock before
    # it creates its directory, so a directory whose lock can be taken is orphaned.
    return writer_dir.with_name(writer_dir.name + LOCK_SUFFIX)


def lock_writer_dir(writer_dir: Path) -> int | None:
    """Take a writer's lock; the fd while held, None if a live process holds it.

    ``flock`` locks belong to the open file, so they also exclude a second exporter
    in the same process, and the kernel drops them when the owner dies.
    """
    fd = os.open(_lock_path(writer_dir), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except OSError:
        os.close(fd)
        raise
    return fd


def retire_writer_dir(writer_dir: Path, lock_fd: int) -> None:
    """Remove an emptied writer directory, then its lock file, then release the lock."""
    try:
        if not writer_dir.exists() or not segments_in(writer_dir):
            with contextlib.suppress(FileNotFoundError):
                writer_dir.rmdir()
            # Unlinked only while held and after the directory is gone, so nobody
            # can lock a fresh lock file for a directory that still has segments.
            _lock_path(writer_dir).unlink(missing_ok=True)
            fsync_dir(writer_dir.parent)
    finally:
        os.close(lock_fd)


def recover_orphans(layout: Layout, own_writer_id: str) -> list[Converted]:
    """Convert the segments of every writer directory no live process holds."""
    results: list[Converted] = []
    for writer_dir in sorted(p for p in layout.wal.iterdir() if p.is_dir()):
        if writer_dir.name == own_writer_id:
            continue
        lock_fd = lock_writer_dir(writer_dir)
        if lock_fd is None:
            continue
        try:
            if writer_dir.exists():  # another process may have retired it meanwhile
                results.extend(_convert_all(layout, writer_dir))
        finally:
            retire_writer_dir(writer_dir, lock_fd)
    return results


def _convert_all(layout: Layout, writer_dir: Path) -> list[Converted]:
    results: list[Converted] = []
    for segment_path in segments_in(writer_dir):
        try:
            results.append(convert_segment(layout, segment_path))
        except (ValueError, pa.ArrowException) as exc:
            # One undecodable segment must not keep the gateway from starting; it
            # stays in the WAL (and in the logs) for an operator to look at.
            log.error("landing.recover_failed", segment=segment_path.name, error=repr(exc))
    return results
