"""The core in Spark: a batch's pushes and carried state, grouped by instance, in ``mapInArrow``.

Spark does no rule here. One Arrow call must see whole instances (their
pushes and their carried state: series, open windows, open alert episodes,
the inventory), which happens one of two ways:

* the tasks read the files (``run_pass_over_files``, with the arrow writer):
  Spark only names the batch's landed files and the state's; each task reads
  them all with pyarrow and keeps its share of the instances
  (``core.batch.shares``), so no row goes through a shuffle or the JVM;
* Spark reads them (``run_pass``, where pyarrow cannot open the locations):
  it unions the pushes with the state, partitions the rows by instance and
  sorts them, and the Python workers receive them as Arrow batches.

Either way the core runs in the Python workers (``files``), and the tasks
either write their rows with pyarrow and return a manifest of files, or
return the rows themselves, tagged by kind, for Spark's writer. The windows
the watermark closes are split the same two ways (``close_window_files``,
``close_windows``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from functools import partial

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from clientmetrics.pipeline.core.batch import PassPlan
from clientmetrics.pipeline.core.schemas import PASS_INPUT_ARROW, WINDOW_STATE_ARROW
from clientmetrics.pipeline.spark import files


def spark_schema(schema: pa.Schema) -> StructType:
    """A core schema as Spark's StructType."""
    converted: StructType = from_arrow_schema(schema)
    return converted


_PASS_INPUT = spark_schema(PASS_INPUT_ARROW)
MANIFEST = spark_schema(files.MANIFEST_ARROW)
TAGGED = spark_schema(files.TAGGED_ARROW)


def _task_name() -> str:
    context = TaskContext.get()
    return f"{context.partitionId():05d}-{context.attemptNumber()}" if context else "00000-0"


def _pass_task(plan: PassPlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield files.run_pass(batches, plan, _task_name())


def _pass_rows_task(plan: PassPlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from files.pass_rows(batches, plan)


def pass_input(pushes: DataFrame, state: dict[str, DataFrame]) -> DataFrame:
    """The pushes and the carried state (by ``carried`` tag), partitioned and sorted by instance."""
    names = _PASS_INPUT.names

    def rows(frame: DataFrame, carried: str | None, instance: Column) -> DataFrame:
        own = set(frame.columns) - {"client_instance_id", "carried"}
        given = {"client_instance_id": instance, "carried": F.lit(carried)}
        return frame.select(
            *(
                given.get(name, F.col(name) if name in own else F.lit(None))
                .cast(_PASS_INPUT[name].dataType)
                .alias(name)
                for name in names
            )
        )

    union = rows(pushes, None, F.col("client_instance_id"))
    for tag, frame in state.items():
        instance = (
            F.substring_index("series", "|", 1) if tag == "series" else F.col("client_instance_id")
        )
        union = union.unionByName(rows(frame, tag, instance))
    return union.repartition("client_instance_id").sortWithinPartitions("client_instance_id")


def run_pass(
    pushes: DataFrame, state: dict[str, DataFrame], plan: PassPlan, *, spark_writes: bool
) -> DataFrame:
    """The batch's pass over whole instances (``core.batch``).

    With ``spark_writes`` false the rows are the manifest of the files the
    tasks wrote under ``plan.staging`` (an action writes them); otherwise the
    core's rows themselves, tagged (``files.TAGGED_ARROW``).
    """
    grouped = pass_input(pushes, state)
    if spark_writes:
        return grouped.mapInArrow(partial(_pass_rows_task, plan), TAGGED)
    return grouped.mapInArrow(partial(_pass_task, plan), MANIFEST)


def _share_task(
    plan: PassPlan,
    pushes: Sequence[str],
    state: Mapping[str, Sequence[str]],
    count: int,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    context = TaskContext.get()
    attempt = context.attemptNumber() if context else 0
    for batch in batches:
        for share in batch.column(0).to_pylist():
            yield files.pass_share(pushes, state, plan, share, count, f"{share:05d}-{attempt}")


def run_pass_over_files(
    spark: SparkSession,
    pushes: Sequence[str],
    state: Mapping[str, Sequence[str]],
    plan: PassPlan,
    tasks: int,
) -> DataFrame:
    """``run_pass`` with the tasks reading the batch's files themselves (``files.pass_share``).

    ``pushes`` are the landed files, ``state`` the carried state's by tag;
    ``tasks`` tasks each take one share of the instances. No rows go through
    Spark: the manifest of the files written comes back, as ``run_pass``'s.
    """
    shares = spark.range(tasks, numPartitions=tasks)
    return shares.mapInArrow(
        partial(_share_task, plan, tuple(pushes), dict(state), tasks), MANIFEST
    )


def _close_task(
    staging: str, watermark_us: int | None, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    yield files.close_windows(batches, staging, watermark_us, _task_name())


def _close_rows_task(
    watermark_us: int | None, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    yield from files.close_rows(batches, watermark_us)


def close_windows(
    windows: DataFrame, staging: str, watermark_us: int | None, *, spark_writes: bool
) -> DataFrame:
    """The windows the watermark closed and those still open (``core.windows.split_windows``).

    As ``run_pass``: a manifest of files written under ``staging``, or tagged rows.
    """
    columns = windows.select(*WINDOW_STATE_ARROW.names)
    if spark_writes:
        return columns.mapInArrow(partial(_close_rows_task, watermark_us), TAGGED)
    return columns.mapInArrow(partial(_close_task, staging, watermark_us), MANIFEST)


def _close_files_task(
    staging: str,
    watermark_us: int | None,
    paths: Sequence[str],
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    context = TaskContext.get()
    attempt = context.attemptNumber() if context else 0
    for batch in batches:
        for index in batch.column(0).to_pylist():
            task = f"{index:05d}-{attempt}"
            yield files.close_window_file(paths[index], staging, watermark_us, task)


def close_window_files(
    spark: SparkSession, paths: Sequence[str], staging: str, watermark_us: int | None
) -> DataFrame:
    """``close_windows`` with the tasks reading the pass's window files, a file each.

    The manifest of the files written under ``staging``.
    """
    tasks = spark.range(len(paths), numPartitions=max(len(paths), 1))
    return tasks.mapInArrow(
        partial(_close_files_task, staging, watermark_us, tuple(paths)), MANIFEST
    )
