"""Following a gateway's landing zone: every push as soon as it is acknowledged.

The landing exporter answers a push only once its WAL record is fsynced
(docs/landing.md), so the WAL holds every acknowledged push at once; a landed
Parquet file appears seconds later. The tail reads what was appended to the WAL
segments since the last look, and, for a segment converted and removed in the meantime,
the rest of its rows from the Parquet file it became (same name: a file
holds its rows by share, each share's in the WAL's order, so the tail counts
what it read by share); a segment
that came and went between two looks is read whole from its file. Nothing is
read twice, nothing piles up: what is remembered is 16 counts per live segment
and the names of the current hours' files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from clientmetrics.exporters.landing_files import Layout, to_table
from clientmetrics.exporters.wal import MAGIC, SUFFIX, decode_segment
from clientmetrics.telemetry.push_arrow import (
    LANDED_FILES,
    LANDED_SHARES,
    LANDING_ARROW,
    LANDING_DIR,
    partition,
    shares,
)

__all__ = ["LandingTail"]


@dataclass
class _Segment:
    size: int = 0
    #: Rows read from the WAL so far, by share of ``LANDED_SHARES``: the file the
    #: segment becomes holds its rows by share, each share's in WAL order.
    rows: np.ndarray = field(default_factory=lambda: np.zeros(LANDED_SHARES, np.int64))


@dataclass
class LandingTail:
    """New landing rows (``LANDING_ARROW``) of a gateway's data directory, call by call.

    ``since_ms``: rows received before it are skipped on the first read (the
    default, when the tail is made, gives only new pushes; 0 gives everything
    still landed).
    """

    data_dir: Path
    since_ms: int | None = None
    _segments: dict[Path, _Segment] = field(default_factory=dict)
    _files: set[Path] = field(default_factory=set)
    _started: bool = False
    _new_only: bool = False

    def __post_init__(self) -> None:
        if self.since_ms is None:
            self._new_only = True
            self.since_ms = _now_ms()

    @property
    def layout(self) -> Layout:
        return Layout(self.data_dir / LANDING_DIR)

    def read(self) -> pa.Table:
        """Rows acknowledged since the last call (the first call: since ``since_ms``)."""
        tables: list[pa.Table] = []
        live = set(self._wal_segments())
        for path in sorted(live):
            tables += self._grown(path)
        for path in [p for p in self._segments if p not in live]:
            tables += self._converted(path)
        tables += self._new_files()
        rows = pa.concat_tables(tables) if tables else LANDING_ARROW.empty_table()
        if not self._started:
            self._started = True
            since = self.since_ms or 0
            received = rows.column("received_at").cast(pa.int64()).to_numpy(zero_copy_only=False)
            rows = rows.filter(pa.array(received >= since * 1000))
        return rows

    def _wal_segments(self) -> list[Path]:
        wal = self.layout.wal
        if not wal.is_dir():
            return []
        return [p for p in wal.glob(f"*/*{SUFFIX}") if p.is_file()]

    def _grown(self, path: Path) -> list[pa.Table]:
        """The records appended to a segment since the last look (only those bytes are read)."""
        seen = self._segments.setdefault(path, _Segment())
        try:
            if path.stat().st_size == seen.size:
                return []
            with path.open("rb") as segment:
                magic = segment.read(len(MAGIC))
                start = max(seen.size, len(magic))
                segment.seek(start)
                appended = segment.read()
        except FileNotFoundError:  # converted between the listing and the read
            return self._converted(path)
        # Records frame themselves after the segment's magic: decode the new ones alone.
        contents = decode_segment(magic + appended)
        if len(magic) < len(MAGIC) or contents.valid_bytes < len(magic):
            return []  # the header is not written yet, or not a segment this reads
        seen.size = start + contents.valid_bytes - len(magic)
        table = to_table(contents.columns)
        seen.rows += np.bincount(_shares(table), minlength=LANDED_SHARES)
        return [table] if table.num_rows else []

    def _converted(self, path: Path) -> list[pa.Table]:
        seen = self._segments.pop(path, _Segment())
        final = self.layout.final_path(path.name.removesuffix(SUFFIX))
        self._files.add(final)
        if not final.exists():
            return []  # an empty segment leaves no file
        table = pq.read_table(final, schema=LANDING_ARROW)
        rest = table.filter(pa.array(_unseen(_shares(table), seen.rows)))
        return [rest] if rest.num_rows else []

    def _new_files(self) -> list[pa.Table]:
        """Files of the current and previous hour not seen yet (read whole)."""
        now = datetime.now(tz=UTC)
        hours = [self.layout.pushes / partition(t) for t in (now - timedelta(hours=1), now)]
        pattern = LANDED_FILES.rsplit("/", 1)[-1]
        current = {p for hour in hours if hour.is_dir() for p in hour.glob(pattern)}
        # A file whose segment is still followed in the WAL is read from there.
        followed = {f"part-{p.name.removesuffix(SUFFIX)}.parquet" for p in self._segments}
        fresh = sorted(p for p in current - self._files if p.name not in followed)
        current = {p for p in current if p.name not in followed}
        # Only this hour's and the last hour's names are remembered: a bound.
        self._files = current | {p for p in self._files if p.parent in hours}
        if not self._started and self._new_only:
            return []  # files landed before we started hold no new pushes
        return [pq.read_table(p, schema=LANDING_ARROW) for p in fresh]


def _shares(table: pa.Table) -> np.ndarray:
    of_row: np.ndarray = shares(table.column("client_instance_id"), LANDED_SHARES).to_numpy()
    return of_row


def _unseen(of_row: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """Which rows come after the first ``seen[share]`` of their share, counted in the
    rows' order: the rows of a landed file its WAL segment had not shown yet."""
    order = np.argsort(of_row, kind="stable")
    ordered = of_row[order]
    rank = np.empty(len(of_row), np.int64)
    rank[order] = np.arange(len(of_row)) - np.searchsorted(ordered, ordered, side="left")
    unseen: np.ndarray = rank >= seen[of_row]
    return unseen


def _now_ms() -> int:
    return int(datetime.now(tz=UTC).timestamp() * 1000)
