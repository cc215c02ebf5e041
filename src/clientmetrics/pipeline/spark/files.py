"""Files, as the pass's tasks and the driver handle them: Parquet, URIs, manifests.

Everything goes through pyarrow's filesystems (the one filesystem API of the
pipeline: local paths and any scheme pyarrow opens). A task writes its
Parquet files under the batch's staging directory (``TaskFiles``) and
returns a manifest of them (``MANIFEST_ARROW``); the driver publishes only
the files a manifest lists (``storage``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import fs

from clientmetrics.pipeline.core.batch import SIDE_OUTPUTS
from clientmetrics.pipeline.core.schemas import TIMESTAMP
from clientmetrics.telemetry.push_arrow import share_row_groups

#: The landed column every share reads whole: when each push was received.
RECEIVED_AT = "received_at"
_RECEIVED_ONLY = pa.schema([(RECEIVED_AT, TIMESTAMP)])

#: Where each kind of row goes, and what time's day partitions it (None: not partitioned).
DAY_OF: dict[str, Callable[[pa.Table], pa.ChunkedArray] | None] = {
    "points": lambda table: table.column("event_time"),
    **{name: day for name, (_, day) in SIDE_OUTPUTS.items()},
}

#: What each task returns: a row per file written (``kind`` is ``points`` or a side
#: output), a row per new alert event (``event``: its JSON line), and one
#: ``progress`` row with no file: the task's share, its highest event time, the
#: newest push it read and the earliest clock that would judge its clients
#: otherwise (``core.clients.clock_changes_at``).
MANIFEST_ARROW = pa.schema(
    [
        ("kind", pa.string()),
        ("path", pa.string()),
        ("rows", pa.int64()),
        ("share", pa.int32()),
        ("max_event_time", TIMESTAMP),
        ("max_received_at", TIMESTAMP),
        ("clock_changes_at", TIMESTAMP),
        ("event", pa.string()),
    ]
)


@dataclass(frozen=True, slots=True)
class Progress:
    """A pass task's ``progress`` row: what the driver needs beyond the files (µs)."""

    highest: int | None = None
    received: int | None = None
    clock_changes_at: int | None = None


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def absolute_location(path: str) -> str:
    """A local path made absolute; a URI (``s3a://``, ``file:/``, ``hdfs://``) as it is.

    The command's options are made absolute once, where they are read: the
    driver, Spark's JVM and the pass's tasks (pyarrow, which takes no relative
    path) must all name the same place, whatever their working directory.
    """
    return path if _SCHEME.match(path) else os.path.abspath(path)


def open_uri(uri: str) -> tuple[fs.FileSystem, str]:
    """pyarrow's filesystem and path for a URI or an absolute local path.

    Spark names local files ``file:/…`` (one slash), which is a local path here.
    """
    if uri.startswith("/"):
        return _LOCAL, uri
    if uri.startswith("file:"):
        return _LOCAL, "/" + uri.removeprefix("file:").lstrip("/")
    opened: tuple[fs.FileSystem, str] = fs.FileSystem.from_uri(uri)
    return opened


_LOCAL = fs.LocalFileSystem()


#: The columns a reader filters on (an instance, a metric, a time): the only ones
#: given statistics.
FILTERED_ON = frozenset(
    {
        "client_instance_id",
        "metric_name",
        "rule",
        "status",
        "event_time",
        "received_at",
        "window_start",
        "window_end",
        "last_seen",
        "started_at",
        "fired_at",
        "resolved_at",
    }
)


def _parquet_options(schema: pa.Schema) -> dict[str, object]:
    """How the pass writes Parquet: zstd 1, statistics where readers filter, text dictionaries.

    Measured on a points table (bench figures in docs/pipeline.md): 15% faster
    than pyarrow's defaults and under half the size; statistics on every flat
    column cost another 20% of the writing (min and max of every text), so
    only the columns a reader filters on (``FILTERED_ON``) get them.
    Dictionaries on numbers cost time.
    """
    return {
        "compression": "zstd",
        "compression_level": 1,
        "write_statistics": [
            f.name for f in schema if f.name in FILTERED_ON and not pa.types.is_nested(f.type)
        ],
        "use_dictionary": [
            f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_binary(f.type)
        ],
    }


def write_parquet(uri: str, table: pa.Table) -> None:
    """Write ``table`` as one Parquet file (``_parquet_options``), its directory made if need be."""
    filesystem, path = open_uri(uri)
    filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
    pq.write_table(table, path, filesystem=filesystem, **_parquet_options(table.schema))


def read_parquet(path: str, schema: pa.Schema) -> pa.Table:
    """A Parquet file (a URI pyarrow can open) as ``schema``: a column it lacks is null."""
    filesystem, local = open_uri(path)
    with filesystem.open_input_file(local) as source:
        parquet = pq.ParquetFile(source)
        present = set(parquet.schema_arrow.names)
        table = parquet.read(columns=[name for name in schema.names if name in present])
    return _as_schema(table, schema, present)


def read_landed_share(
    path: str, schema: pa.Schema, share: int, count: int
) -> tuple[pa.Table, pa.ChunkedArray]:
    """A landed file's row groups of share ``share`` of ``count`` as ``schema``, and the
    receipt time of every row in it (the batch's newest push is every share's clock).

    Every row group is read when the file does not name its row groups' shares
    (``push_arrow.share_row_groups``): the caller keeps its share's rows either way.
    """
    filesystem, local = open_uri(path)
    with filesystem.open_input_file(local) as source:
        parquet = pq.ParquetFile(source)
        present = set(parquet.schema_arrow.names)
        names = [name for name in schema.names if name in present]
        meta = parquet.metadata
        rows = [meta.row_group(group).num_rows for group in range(meta.num_row_groups)]
        groups = share_row_groups(meta.metadata, rows, share, count)
        if groups is None:
            shaped = _as_schema(parquet.read(columns=names), schema, present)
            return shaped, shaped.column(RECEIVED_AT)
        shaped = _as_schema(parquet.read_row_groups(groups, columns=names), schema, present)
        times = parquet.read(columns=[name for name in (RECEIVED_AT,) if name in present])
    # A file without the column has null receipt times, as ``read_parquet`` gives.
    return shaped, _as_schema(times, _RECEIVED_ONLY, present).column(RECEIVED_AT)


def modified_at(path: str) -> datetime | None:
    """When a file was last written (UTC), or None when that cannot be told."""
    filesystem, local = open_uri(path)
    try:
        modified: datetime | None = filesystem.get_file_info(local).mtime
    except OSError:
        return None
    return modified


def _as_schema(table: pa.Table, schema: pa.Schema, present: set[str]) -> pa.Table:
    columns = [
        table.column(f.name).cast(f.type) if f.name in present else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


class TaskFiles:
    """The Parquet files one task writes under a staging URI, and its manifest."""

    def __init__(self, staging: str, task: str, share: int) -> None:
        self._staging = staging.rstrip("/")
        self._task = task
        self._share = share
        self._files: list[tuple[str, str, int]] = []
        self._seq = 0

    def write(self, kind: str, directory: str, table: pa.Table) -> None:
        """Write ``table`` as a new file under ``directory`` (relative to the staging URI)."""
        self._seq += 1
        uri = f"{self._staging}/{directory}/part-{self._task}-{self._seq:05d}.parquet"
        write_parquet(uri, table)
        self._files.append((kind, uri, table.num_rows))

    def write_kind(self, kind: str, table: pa.Table) -> None:
        """Write rows of one kind under its directory (by day if it is a table)."""
        day = DAY_OF[kind]
        if day is None:
            self.write(kind, kind, table)
            return
        days = pc.cast(day(table), pa.date32())
        bounds = pc.min_max(days)
        first, last = bounds["min"].as_py(), bounds["max"].as_py()
        if first == last and days.null_count == 0:  # nearly always: one day, as it is
            self.write(kind, f"{kind}/date={first.isoformat()}", table)
            return
        for value in pc.unique(days).to_pylist():
            if value is None:
                part, name = table.filter(pc.is_null(days)), "__HIVE_DEFAULT_PARTITION__"
            else:
                part, name = table.filter(pc.equal(days, value)), value.isoformat()
            self.write(kind, f"{kind}/date={name}", part)

    def manifest(self, progress: Progress | None, events: Sequence[str] = ()) -> pa.RecordBatch:
        """A row per file written and per alert event, and the ``progress`` row (if any)."""
        ends = [progress] if progress is not None else []
        size = len(self._files) + len(events) + len(ends)
        kinds = [kind for kind, _, _ in self._files] + ["alert_event"] * len(events)
        paths: list[str | None] = [path for _, path, _ in self._files] + [None] * len(events)
        rows = [count for _, _, count in self._files] + [1] * len(events)
        texts: list[str | None] = [None] * len(self._files) + list(events)
        none: list[int | None] = [None] * (size - len(ends))
        return pa.RecordBatch.from_arrays(
            [
                pa.array(kinds + ["progress"] * len(ends), pa.string()),
                pa.array(paths + [None] * len(ends), pa.string()),
                pa.array(rows + [0] * len(ends), pa.int64()),
                pa.array([self._share] * size, pa.int32()),
                pa.array(none + [e.highest for e in ends], pa.int64()).cast(TIMESTAMP),
                pa.array(none + [e.received for e in ends], pa.int64()).cast(TIMESTAMP),
                pa.array(none + [e.clock_changes_at for e in ends], pa.int64()).cast(TIMESTAMP),
                pa.array(texts + [None] * len(ends), pa.string()),
            ],
            schema=MANIFEST_ARROW,
        )
