"""What the pass's tasks do with files and the core's rows: read, write, or hand them to Spark.

Runs in the Python workers. ``pass_share`` reads a batch's landed files and
carried state with pyarrow, keeping one share of the instances, and hands them
to ``run_pass``, which drives the core (``core.batch.process_group``) over
whole instances and writes the points and the side outputs as Parquet under
the batch's staging directory, through pyarrow's filesystems;
``close_window_file`` writes the windows the watermark closed. Each returns a
manifest of the files it wrote; the driver publishes only those. Where pyarrow
cannot open the output location, ``pass_rows`` and ``close_rows`` return the
same rows, tagged, for Spark's writer instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import fs

from clientmetrics.pipeline.core.batch import (
    SIDE_OUTPUTS,
    GroupResult,
    PassPlan,
    instance_groups,
    instance_of,
    pass_input,
    process_group,
    shares,
)
from clientmetrics.pipeline.core.schemas import (
    CARRIED,
    CLIENT_WINDOWS_ARROW,
    LABEL_COLUMNS,
    LANDING_ARROW,
    POINTS_ARROW,
    WINDOW_STATE_ARROW,
)
from clientmetrics.pipeline.core.windows import split_windows

_TIMESTAMP = pa.timestamp("us", tz="UTC")

#: Where each kind of row goes, and what time's day partitions it (None: not partitioned).
DAY_OF: dict[str, Callable[[pa.Table], pa.ChunkedArray] | None] = {
    "points": lambda table: table.column("event_time"),
    **{name: day for name, (_, day) in SIDE_OUTPUTS.items()},
    "client_windows": lambda table: table.column("window_start"),
    "open_windows": None,
}

#: What each task returns: a row per file written (``kind`` is ``points`` or a
#: side output), and one row with no file carrying its highest event time.
MANIFEST_ARROW = pa.schema(
    [
        ("kind", pa.string()),
        ("path", pa.string()),
        ("rows", pa.int64()),
        ("max_event_time", _TIMESTAMP),
    ]
)


@cache
def _filesystem(uri: str) -> tuple[fs.FileSystem, str]:
    opened: tuple[fs.FileSystem, str] = fs.FileSystem.from_uri(uri)
    return opened


def filesystem_for(uri: str) -> tuple[fs.FileSystem, str] | None:
    """pyarrow's filesystem and path for a URI, or None when pyarrow cannot open it."""
    try:
        return _filesystem(uri)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, ValueError):
        return None


def _parquet_options(schema: pa.Schema) -> dict[str, object]:
    """How the pass writes Parquet: zstd level 1; statistics on flat columns, dictionaries on text.

    Measured on a points table (bench figures in docs/pipeline.md): 15% faster
    than pyarrow's defaults and under half the size. Statistics on map and list
    columns, which no reader filters on, and dictionaries on numbers cost time.
    """
    return {
        "compression": "zstd",
        "compression_level": 1,
        "write_statistics": [f.name for f in schema if not pa.types.is_nested(f.type)],
        "use_dictionary": [
            f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_binary(f.type)
        ],
    }


def write_parquet(uri: str, table: pa.Table) -> None:
    """Write ``table`` as one Parquet file (``_parquet_options``), its directory made if need be."""
    filesystem, path = fs.FileSystem.from_uri(uri)
    filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
    pq.write_table(table, path, filesystem=filesystem, **_parquet_options(table.schema))


class _TaskFiles:
    """The Parquet files one task writes under a staging URI, and its manifest."""

    def __init__(self, staging: str, task: str) -> None:
        self._staging = staging.rstrip("/")
        self._task = task
        self._files: list[tuple[str, str, int]] = []
        self._seq = 0

    def write(self, kind: str, directory: str, table: pa.Table) -> None:
        """Write ``table`` as a new file under ``directory`` (relative to the staging URI)."""
        self._seq += 1
        relative = f"{directory}/part-{self._task}-{self._seq:05d}.parquet"
        write_parquet(f"{self._staging}/{relative}", table)
        self._files.append((kind, f"{self._staging}/{relative}", table.num_rows))

    def write_kind(self, kind: str, table: pa.Table) -> None:
        """Write rows of one kind under its directory (by day if it is a table)."""
        day = DAY_OF[kind]
        if day is None:
            self.write(kind, kind, table)
        else:
            self.write_by_day(kind, kind, table, day(table))

    def write_by_day(
        self, kind: str, directory: str, table: pa.Table, moments: pa.ChunkedArray
    ) -> None:
        """Write ``table`` under ``directory/date=D``, D being the UTC day of ``moments``."""
        days = pc.cast(moments, pa.date32())
        bounds = pc.min_max(days)
        first, last = bounds["min"].as_py(), bounds["max"].as_py()
        if first == last and days.null_count == 0:  # nearly always: one day, as it is
            self.write(kind, f"{directory}/date={first.isoformat()}", table)
            return
        for day in pc.unique(days).to_pylist():
            if day is None:
                part, name = table.filter(pc.is_null(days)), "__HIVE_DEFAULT_PARTITION__"
            else:
                part, name = table.filter(pc.equal(days, day)), day.isoformat()
            self.write(kind, f"{directory}/date={name}", part)

    def manifest(self, highest: int | None = None) -> pa.RecordBatch:
        """A row per file written, and a ``progress`` row with the highest event time."""
        kinds = [kind for kind, _, _ in self._files] + ["progress"]
        paths: list[str | None] = [path for _, path, _ in self._files] + [None]
        rows = [count for _, _, count in self._files] + [0]
        times = [None] * len(self._files) + [highest]
        return pa.RecordBatch.from_arrays(
            [
                pa.array(kinds, pa.string()),
                pa.array(paths, pa.string()),
                pa.array(rows, pa.int64()),
                pa.array(times, pa.int64()).cast(_TIMESTAMP),
            ],
            schema=MANIFEST_ARROW,
        )


class _TaskWriter:
    """Buffers one pass task's output and writes it as Parquet files."""

    def __init__(self, plan: PassPlan, task: str) -> None:
        self._plan = plan
        self._files = _TaskFiles(plan.staging, task)
        self._points: list[pa.Table] = []
        self._buffered = 0
        self._sides: dict[str, list[pa.Table]] = {name: [] for name in SIDE_OUTPUTS}
        self._highest: int | None = None

    def add(self, result: GroupResult) -> None:
        if result.max_event_time is not None:
            self._highest = max(self._highest or result.max_event_time, result.max_event_time)
        if result.points.num_rows:
            self._points.append(result.points)
            self._buffered += result.points.num_rows
        for name, table in result.sides.items():
            if table.num_rows:
                self._sides[name].append(table)
        if self._buffered >= self._plan.flush_rows:
            self._flush_points()

    def _flush_points(self) -> None:
        if self._points:
            table = pa.concat_tables(self._points)
            self._points, self._buffered = [], 0
            self._files.write_kind("points", table)

    def close(self) -> pa.RecordBatch:
        self._flush_points()
        for name, tables in self._sides.items():
            if tables:
                self._files.write_kind(name, pa.concat_tables(tables).cast(SIDE_OUTPUTS[name][0]))
        return self._files.manifest(self._highest)


def run_pass(batches: Iterator[pa.RecordBatch], plan: PassPlan, task: str) -> pa.RecordBatch:
    """Process one task's rows (sorted by instance); write its files; return its manifest.

    ``task`` names its files: the partition and attempt, so that a retried
    task never mixes its files with an earlier attempt's (the driver publishes
    only the files the manifest lists).
    """
    writer = _TaskWriter(plan, task)
    for group in instance_groups(batches):
        writer.add(process_group(group, plan))
    return writer.close()


# --- the pass's input, read by the tasks themselves ----------------------------------------------

#: The landed columns the pass reads.
PUSH_COLUMNS = pa.schema([LANDING_ARROW.field(name) for name in (*LABEL_COLUMNS, "payload")])

#: Rows of whole instances handed to the core at a time (as Spark's Arrow batches).
GROUP_ROWS = 10_000


def read_parquet(path: str, schema: pa.Schema) -> pa.Table:
    """A Parquet file (a URI pyarrow can open) as ``schema``: a column it lacks is null."""
    filesystem, local = fs.FileSystem.from_uri(path)
    with filesystem.open_input_file(local) as source:
        parquet = pq.ParquetFile(source)
        present = set(parquet.schema_arrow.names)
        table = parquet.read(columns=[name for name in schema.names if name in present])
    columns = [
        table.column(f.name).cast(f.type) if f.name in present else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def read_share(
    paths: Sequence[str], schema: pa.Schema, tag: str | None, share: int, count: int
) -> pa.Table:
    """Rows of Parquet files whose instance is in ``share`` of ``count`` (``core.batch.shares``).

    ``tag`` is the rows' kind (None: pushes; else a ``carried`` tag), which
    says where their instance is.
    """
    parts = []
    for path in paths:
        table = read_parquet(path, schema)
        parts.append(table.filter(pc.equal(shares(instance_of(table, tag), count), share)))
    return pa.concat_tables(parts) if parts else schema.empty_table()


def pass_share(
    pushes: Sequence[str],
    state: Mapping[str, Sequence[str]],
    plan: PassPlan,
    share: int,
    count: int,
    task: str,
) -> pa.RecordBatch:
    """``run_pass`` over one share of the instances, read from the batch's files.

    ``pushes`` are the batch's landed files, ``state`` the carried state's by
    ``carried`` tag. Every task reads every file and keeps its share, so that
    an instance's pushes and state meet in one task without a shuffle.
    """
    rows = pass_input(
        read_share(pushes, PUSH_COLUMNS, None, share, count),
        {tag: read_share(paths, CARRIED[tag], tag, share, count) for tag, paths in state.items()},
    )
    return run_pass(iter(rows.to_batches(max_chunksize=GROUP_ROWS)), plan, task)


def close_windows(
    batches: Iterator[pa.RecordBatch], staging: str, watermark_us: int | None, task: str
) -> pa.RecordBatch:
    """Split windows by the watermark (``core.windows.split_windows``) and write both parts.

    Closed ones go under ``client_windows/date=D`` (D the UTC day of the
    window's start), open ones under ``open_windows``; the manifest lists the files.
    """
    files = _TaskFiles(staging, task)
    for batch in batches:
        closed, still_open = split_windows(pa.Table.from_batches([batch]), watermark_us)
        if closed.num_rows:
            files.write_kind("client_windows", closed)
        if still_open.num_rows:
            files.write_kind("open_windows", still_open)
    return files.manifest()


def close_window_file(
    path: str, staging: str, watermark_us: int | None, task: str
) -> pa.RecordBatch:
    """``close_windows`` over one file of open windows the pass wrote."""
    windows = read_parquet(path, WINDOW_STATE_ARROW)
    return close_windows(iter(windows.to_batches()), staging, watermark_us, task)


# --- rows for Spark's writer ---------------------------------------------------------------------

#: Every kind of row a task can return, each as a struct column (null in other kinds' rows).
ROW_KINDS: dict[str, pa.Schema] = {
    "points": POINTS_ARROW,
    **{name: schema for name, (schema, _) in SIDE_OUTPUTS.items()},
    "client_windows": CLIENT_WINDOWS_ARROW,
    "open_windows": WINDOW_STATE_ARROW,
}

#: The tagged rows ``pass_rows`` and ``close_rows`` return: ``kind``, the
#: task's highest event time (on ``progress`` rows), the row's partition day
#: (table rows), and a struct per kind.
TAGGED_ARROW = pa.schema(
    [
        ("kind", pa.string()),
        ("max_event_time", _TIMESTAMP),
        ("date", pa.date32()),
        *((name, pa.struct(list(schema))) for name, schema in ROW_KINDS.items()),
    ]
)


def _tagged(kind: str, table: pa.Table) -> Iterator[pa.RecordBatch]:
    table = table.cast(ROW_KINDS[kind]).combine_chunks()
    day = DAY_OF[kind]
    if day is not None:
        table = table.append_column("_date", pc.cast(day(table), pa.date32()))
    for chunk in table.to_batches(max_chunksize=65_536):
        size = chunk.num_rows
        columns = [pa.array([kind] * size, pa.string()), pa.nulls(size, _TIMESTAMP)]
        if day is not None:
            columns.append(chunk.column(chunk.num_columns - 1))
        else:
            columns.append(pa.nulls(size, pa.date32()))
        batch = chunk.drop_columns(["_date"]) if day is not None else chunk
        for name, schema in ROW_KINDS.items():
            kind_type = TAGGED_ARROW.field(name).type
            if name == kind:
                columns.append(pa.StructArray.from_arrays(batch.columns, fields=list(schema)))
            else:
                columns.append(pa.nulls(size, kind_type))
        yield pa.RecordBatch.from_arrays(columns, schema=TAGGED_ARROW)


def _progress(highest: int | None) -> pa.RecordBatch:
    columns = [
        pa.array(["progress"]),
        pa.array([highest], pa.int64()).cast(_TIMESTAMP),
        pa.nulls(1, pa.date32()),
    ]
    columns += [pa.nulls(1, TAGGED_ARROW.field(name).type) for name in ROW_KINDS]
    return pa.RecordBatch.from_arrays(columns, schema=TAGGED_ARROW)


def pass_rows(batches: Iterator[pa.RecordBatch], plan: PassPlan) -> Iterator[pa.RecordBatch]:
    """``run_pass`` for Spark's writer: the same rows, tagged by kind, instead of files."""
    highest: int | None = None
    for group in instance_groups(batches):
        result = process_group(group, plan)
        if result.max_event_time is not None:
            highest = max(highest or result.max_event_time, result.max_event_time)
        if result.points.num_rows:
            yield from _tagged("points", result.points)
        for name, table in result.sides.items():
            if table.num_rows:
                yield from _tagged(name, table)
    yield _progress(highest)


def close_rows(
    batches: Iterator[pa.RecordBatch], watermark_us: int | None
) -> Iterator[pa.RecordBatch]:
    """``close_windows`` for Spark's writer: closed and open windows as tagged rows."""
    for batch in batches:
        closed, still_open = split_windows(pa.Table.from_batches([batch]), watermark_us)
        if closed.num_rows:
            yield from _tagged("client_windows", closed)
        if still_open.num_rows:
            yield from _tagged("open_windows", still_open)
