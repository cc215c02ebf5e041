"""What the pass's tasks do: read their share, run the core, write Parquet.

Runs in the Python workers. ``pass_share`` reads one share of the
instances' landed pushes and ``pass_records`` takes one Kafka partition's
records (a share whole) as they come; both read the share's carried state,
and ``run_pass`` drives the core (``core.batch.process_group``) over whole
instances and writes the points and the side outputs as Parquet under the
batch's staging directory. ``judge_share`` judges a share's clients again
with a later clock (``core.batch.judge_clients``). Each returns a manifest
of the files it wrote (and the batch's new alert events).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.core.alerts import event_lines
from clientmetrics.pipeline.core.batch import (
    SIDE_OUTPUTS,
    GroupResult,
    PassPlan,
    instance_groups,
    instance_of,
    judge_clients,
    pass_input,
    process_group,
)
from clientmetrics.pipeline.core.records import screen_records
from clientmetrics.pipeline.core.rejects import (
    counts_by_reason,
    received_ok,
    screen_pushes,
    unreadable_file,
    with_origin,
)
from clientmetrics.pipeline.core.schemas import (
    CARRIED,
    LABEL_COLUMNS,
    LANDING_ARROW,
    ORIGIN_ARROW,
    POINTS_ARROW,
    REJECTED_ARROW,
)
from clientmetrics.pipeline.spark.files import (
    Progress,
    TaskFiles,
    modified_at,
    read_landed_share,
    read_parquet,
)
from clientmetrics.telemetry.push_arrow import shares


def _later(*moments: int | None) -> int | None:
    return max((m for m in moments if m is not None), default=None)


def _earlier(*moments: int | None) -> int | None:
    return min((m for m in moments if m is not None), default=None)


class _TaskWriter:
    """Buffers one pass task's output and writes it as Parquet files."""

    def __init__(self, plan: PassPlan, task: str, share: int) -> None:
        self._plan = plan
        self._files = TaskFiles(plan.staging, task, share)
        self._points: list[pa.Table] = []
        self._buffered = 0
        self._sides: dict[str, list[pa.Table]] = {name: [] for name in SIDE_OUTPUTS}
        self._highest: int | None = None
        self._changes: int | None = None

    def add(self, result: GroupResult) -> None:
        self._highest = _later(self._highest, result.max_event_time)
        self._changes = _earlier(self._changes, result.clock_changes_at)
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

    def close(self, received: int | None = None, *, progress: bool = True) -> pa.RecordBatch:
        self._flush_points()
        events: list[str] = []
        for name, tables in self._sides.items():
            if tables:
                table = pa.concat_tables(tables).cast(SIDE_OUTPUTS[name][0])
                self._files.write_kind(name, table)
                if name == "alerts":
                    events = event_lines(table)
        done = Progress(self._highest, received, self._changes) if progress else None
        return self._files.manifest(done, events)


def run_pass(
    batches: Iterator[pa.RecordBatch],
    plan: PassPlan,
    task: str,
    share: int = 0,
    received: int | None = None,
    rejected: pa.Table | None = None,
) -> pa.RecordBatch:
    """Process one task's rows (sorted by instance); write its files; return its manifest.

    ``task`` names its files: the share and attempt, so that a retried task
    never mixes its files with an earlier attempt's (the driver publishes
    only the files the manifest lists), and the next batch's task of the same
    share finds its state by name (``share_files``). ``received`` (the newest
    push the task read) goes into the manifest's progress row. ``rejected``: dead
    letters of pushes left out before the pass, written with the pass's own.
    """
    writer = _TaskWriter(plan, task, share)
    if rejected is not None and rejected.num_rows:
        writer.add(GroupResult(POINTS_ARROW.empty_table(), {"rejected": rejected}, None))
    for group in instance_groups(batches):
        writer.add(process_group(group, plan))
    return writer.close(received)


# --- the pass's input, read by the tasks themselves ----------------------------------------------

#: The landed columns the pass reads.
PUSH_COLUMNS = pa.schema([LANDING_ARROW.field(name) for name in (*LABEL_COLUMNS, "payload")])
#: The pass's pushes: those columns and where each push came from (for its dead letters).
PASS_PUSHES = pa.schema([*PUSH_COLUMNS, *ORIGIN_ARROW])

#: Rows of whole instances handed to the core at a time.
GROUP_ROWS = 10_000

_SHARE_NAME = re.compile(r"/part-(\d+)-(\d+)-[^/]*$")


def task_name(count: int, share: int, attempt: int) -> str:
    """How a pass task names its files: the share count, its share, its attempt."""
    return f"{count:05d}-{share:05d}-{attempt}"


def share_files(paths: Sequence[str], count: int) -> dict[int, list[str]] | None:
    """State files by the share that wrote them, or None when they were not all
    written with ``count`` shares (then every task reads all and keeps its own)."""
    found: dict[int, list[str]] = {}
    for path in paths:
        named = _SHARE_NAME.search(path)
        if named is None or int(named.group(1)) != count:
            return None
        found.setdefault(int(named.group(2)), []).append(path)
    return found


@dataclass(frozen=True, slots=True)
class ShareInput:
    """What one pass task reads: its pushes, and the carried state it starts from."""

    #: Landed or staged files holding this share's pushes.
    pushes: tuple[str, ...]
    #: Whether ``pushes`` hold other shares' instances too (landed files do).
    filter_pushes: bool
    #: State files by ``carried`` tag.
    state: Mapping[str, tuple[str, ...]]
    #: Whether the state files hold other shares' instances too (the share count changed).
    filter_state: bool


def _read(
    paths: Sequence[str], schema: pa.Schema, tag: str | None, share: int, count: int, keep: bool
) -> pa.Table:
    parts = []
    for path in paths:
        table = read_parquet(path, schema)
        if keep:
            table = table.filter(pc.equal(shares(instance_of(table, tag), count), share))
        parts.append(table)
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _newest(received_at: pa.ChunkedArray) -> int | None:
    """The newest plausible of the pushes' ``received_at`` (µs), or None.

    A receipt time ``core.rejects`` refuses never moves ``silent``'s clock.
    """
    received = received_at.filter(pa.array(received_ok(received_at)))
    newest: int | None = pc.max(pc.cast(received, pa.int64())).as_py()
    return newest


def _pass(
    pushes: pa.Table,
    given: ShareInput,
    plan: PassPlan,
    where: tuple[int, int, int],
    received: int | None,
    rejected: pa.Table | None = None,
) -> pa.RecordBatch:
    """``run_pass`` over a share's pushes and its carried state (``where``: share, count, attempt).

    ``received`` is the newest push of the batch the task knows of: it moves
    ``silent``'s clock (``plan.as_of_us``) on. Pushes whose id, receipt time or
    size cannot be used are left out here (``core.rejects``), as dead letters,
    with those the caller found (``rejected``).
    """
    share, count, attempt = where
    screened = screen_pushes(pushes)
    rows = pass_input(
        screened.kept,
        {
            tag: _read(paths, CARRIED[tag], tag, share, count, given.filter_state)
            for tag, paths in given.state.items()
        },
    )
    plan = replace(plan, as_of_us=_later(plan.as_of_us, received))
    task = task_name(count, share, attempt)
    batches = iter(rows.to_batches(max_chunksize=GROUP_ROWS))
    letters = pa.concat_tables(
        [
            REJECTED_ARROW.empty_table(),
            screened.rejected,
            *([rejected] if rejected is not None else []),
        ]
    )
    return run_pass(batches, plan, task, share, received, letters)


def pass_share(
    given: ShareInput, plan: PassPlan, share: int, count: int, attempt: int
) -> pa.RecordBatch:
    """``run_pass`` over one share of the instances, read from the batch's files.

    Landed files hold every instance: the task keeps those of its share (a
    CRC-32 of the instance id, ``push_arrow.shares``), so an instance's pushes
    and state meet in one task without a shuffle. A landed file keeps its rows
    in row groups by share, so the task reads only its own (where its share
    count divides the file's); every task reads every file's receipt times,
    so each knows the batch's newest push.
    """
    parts, received, unreadable = [], None, []
    for path in given.pushes:
        try:
            table, received_at = read_landed_share(path, PUSH_COLUMNS, share, count)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            # Not the contract's Parquet: a dead letter (share 0's, once), and the batch
            # goes on. An I/O error (OSError) fails the batch, to be tried again.
            if share == 0:
                unreadable.append(unreadable_file(path, exc, modified_at(path)))
            continue
        received = _later(received, _newest(received_at))
        if given.filter_pushes:
            table = table.filter(pc.equal(shares(instance_of(table, None), count), share))
        parts.append(with_origin(table, source=path))
    pushes = pa.concat_tables(parts) if parts else PASS_PUSHES.empty_table()
    letters = pa.concat_tables([REJECTED_ARROW.empty_table(), *unreadable])
    return _pass(pushes, given, plan, (share, count, attempt), received, letters)


def pass_records(
    batches: Iterable[pa.RecordBatch],
    inputs: Mapping[int, ShareInput],
    plan: PassPlan,
    count: int,
    attempt: int,
) -> Iterator[pa.RecordBatch]:
    """``run_pass`` over one Kafka partition's records (``core.records.RECORDS_ARROW``).

    Records are keyed by instance, so a partition holds whole instances: it is
    share ``partition`` of ``count``, whose carried state ``inputs`` names.
    Yields the manifest, or nothing when there were no records (the driver
    then runs the share without pushes).
    """
    tables = [pa.Table.from_batches([batch]) for batch in batches if batch.num_rows]
    if not tables:
        return
    records = pa.concat_tables(tables)
    partitions = pc.unique(records.column("partition")).to_pylist()
    if len(partitions) != 1:
        raise ValueError(f"a pass task got the records of partitions {partitions}, not one")
    share = int(partitions[0])
    if share not in inputs:
        raise ValueError(
            f"a record of partition {share} of a topic counted with {count} partitions: the "
            "partition count of the pipeline's topic must not change (start again with a new "
            "checkpoint and tables)"
        )
    screened = screen_records(records)
    pushes = screened.kept.select(PASS_PUSHES.names)
    received = _newest(pushes.column("received_at"))
    manifest = _pass(
        pushes, inputs[share], plan, (share, count, attempt), received, screened.rejected
    )
    yield manifest


def rejected_counts(paths: Sequence[str]) -> dict[str, int]:
    """Records and points left out, by reason, in dead-letter files (``REJECTED_ARROW``)."""
    columns = pa.schema([REJECTED_ARROW.field("reason"), REJECTED_ARROW.field("count")])
    tables = [read_parquet(path, columns) for path in paths]
    return counts_by_reason(pa.concat_tables([columns.empty_table(), *tables]))


def judge_share(
    given: ShareInput, plan: PassPlan, share: int, count: int, attempt: int
) -> pa.RecordBatch:
    """A share's clients judged again with ``plan``'s clock (``core.batch.judge_clients``).

    ``given.state`` names the files the share's pass just wrote: its
    inventory (``client``) and open alerts (``alert``). What comes out
    replaces that pass's clients rows and alert state, and adds the alerts
    the later clock ends; there is no progress row (the pass had it).
    """
    kept = _read(given.state.get("client", ()), CARRIED["client"], "client", share, count, False)
    state = _read(given.state.get("alert", ()), CARRIED["alert"], "alert", share, count, False)
    clients, ended, alert_state = judge_clients(kept, state, plan.rules, plan.as_of_us)
    writer = _TaskWriter(plan, f"{task_name(count, share, attempt)}j", share)
    writer.add(
        GroupResult(
            POINTS_ARROW.empty_table(),
            {"clients": clients, "alert_state": alert_state, "alerts": ended},
            None,
        )
    )
    return writer.close(progress=False)
