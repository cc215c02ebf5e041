"""Reading the pipeline's tables with pyarrow, cached per file while it is unchanged.

The pipeline writes ``DATA/tables/<table>/date=YYYY-MM-DD/*.parquet`` with Spark
(timestamps as INT96, so pyarrow sees naive nanoseconds that mean UTC). Files are
only ever added by rename, except the ``clients`` snapshot, which is replaced
whole; a file that vanishes between listing and reading is simply skipped: the
next page load sees the new snapshot.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

TABLES = ("points", "client_windows", "clients", "alerts")

#: (path, mtime_ns, size): a file is re-read only when this changes.
Signature = tuple[str, int, int]

_UTC_US = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True, slots=True)
class TableFiles:
    """The data files of one table as they were when listed."""

    table: str
    signatures: tuple[Signature, ...]


def normalise_timestamps(table: pa.Table) -> pa.Table:
    """Every timestamp column as microseconds in UTC, whatever unit Spark wrote."""
    columns = []
    for field, original in zip(table.schema, table.columns, strict=True):
        column = original
        if pa.types.is_timestamp(field.type) and field.type != _UTC_US:
            if field.type.tz is None:
                column = pc.assume_timezone(column, "UTC")
            column = column.cast(_UTC_US, safe=False)
        columns.append(column)
    return pa.Table.from_arrays(columns, names=table.column_names)


class TableReader:
    """Read-only access to ``DATA/tables``, with a bounded per-file cache.

    Safe to share between the HTTP server's threads.
    """

    def __init__(
        self, tables_dir: Path, pattern: str = "date=*/*.parquet", max_cached_files: int = 4096
    ) -> None:
        self._root = tables_dir
        self._pattern = pattern
        self._max = max_cached_files
        self._files: OrderedDict[tuple[Signature, tuple[str, ...]], pa.Table] = OrderedDict()
        self._whole: dict[tuple[str, tuple[str, ...]], tuple[TableFiles, pa.Table]] = {}
        self._lock = threading.Lock()

    @property
    def root(self) -> Path:
        """The tables directory."""
        return self._root

    def list_files(self, table: str, modified_after: float | None = None) -> TableFiles:
        """The table's data files now (hidden and staging files left out).

        ``modified_after`` (epoch seconds) keeps only files changed since then.
        """
        signatures = []
        oldest = int(modified_after * 1e9) if modified_after is not None else None
        for path in sorted((self._root / table).glob(self._pattern)):
            if path.name.startswith((".", "_")):
                continue
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            if oldest is not None and stat.st_mtime_ns < oldest:
                continue
            signatures.append((str(path), stat.st_mtime_ns, stat.st_size))
        return TableFiles(table, tuple(signatures))

    def read(
        self,
        table: str,
        columns: Sequence[str] | None = None,
        modified_after: float | None = None,
    ) -> pa.Table | None:
        """The whole table (only ``columns`` if given), or None when it has no files yet.

        ``modified_after`` reads only the files changed since then (epoch seconds).
        """
        wanted = tuple(columns or ())
        files = self.list_files(table, modified_after)
        key = (table, wanted)
        with self._lock:
            cached = self._whole.get(key)
        if not files.signatures:
            return None
        if cached is not None and cached[0] == files:
            return cached[1]
        parts = [part for sig in files.signatures if (part := self._read_file(sig, wanted))]
        result = pa.concat_tables(parts, promote_options="permissive") if parts else None
        if result is not None:
            with self._lock:
                self._whole[key] = (files, result)
        return result

    def _read_file(self, signature: Signature, columns: tuple[str, ...]) -> pa.Table | None:
        key = (signature, columns)
        with self._lock:
            cached = self._files.get(key)
            if cached is not None:
                self._files.move_to_end(key)
                return cached
        try:
            schema_names = pq.read_schema(signature[0]).names
            present = [name for name in columns if name in schema_names] if columns else None
            table = normalise_timestamps(pq.read_table(signature[0], columns=present))
        except (FileNotFoundError, pa.ArrowInvalid):
            return None  # replaced or half-written: the next listing has its successor
        with self._lock:
            self._files[key] = table
            while len(self._files) > self._max:
                self._files.popitem(last=False)
        return table

    def read_recent(self, columns: Sequence[str], modified_after: float) -> pa.Table | None:
        """Files directly under the root (by the pattern) changed after ``modified_after``."""
        return self.read("", columns, modified_after)
