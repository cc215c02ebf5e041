"""The core in Spark: the Spark jobs of a micro-batch, and nothing else.

Spark does no rule here, and no row of a push goes through a shuffle:

* ``run_share_pass`` — the batch's pass over landed files: one task per
  share of the client instances, each reading its share's pushes and
  carried state with pyarrow (``tasks.pass_share``), so an instance's pushes
  and state meet in one task;
* ``run_records_pass`` — the batch's pass over the Kafka source's records:
  records are keyed by instance, so a partition holds whole instances and
  its task is that share's pass as it is (``tasks.pass_records``; the
  records go from the Kafka source's task to the core in memory);
* ``run_followup`` — only when a share needs it: the shares whose partition
  had no record this batch run from their state alone, and those whose task
  saw an earlier newest push than the batch's have their clients judged
  again with the batch's (``tasks.judge_share``).

Each returns the manifests (``files.MANIFEST_ARROW``) of what its tasks wrote.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from functools import partial

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from clientmetrics.pipeline.core.batch import PassPlan
from clientmetrics.pipeline.core.records import RECORDS_ARROW
from clientmetrics.pipeline.spark import tasks
from clientmetrics.pipeline.spark.files import MANIFEST_ARROW


def spark_schema(schema: pa.Schema) -> StructType:
    """A core schema as Spark's StructType."""
    converted: StructType = from_arrow_schema(schema)
    return converted


MANIFEST = spark_schema(MANIFEST_ARROW)

#: What a share's task of ``run_followup`` does.
PASS, JUDGE = "pass", "judge"


def _attempt() -> int:
    context = TaskContext.get()
    return context.attemptNumber() if context else 0


def _share_task(
    plan: PassPlan,
    work: Sequence[tuple[int, str, tasks.ShareInput]],
    count: int,
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for index in batch.column(0).to_pylist():
            share, what, given = work[index]
            run = tasks.pass_share if what == PASS else tasks.judge_share
            yield run(given, plan, share, count, _attempt())


def _shares_job(
    spark: SparkSession,
    work: Sequence[tuple[int, str, tasks.ShareInput]],
    count: int,
    plan: PassPlan,
) -> DataFrame:
    ranged = spark.range(len(work), numPartitions=max(len(work), 1))
    return ranged.mapInArrow(partial(_share_task, plan, tuple(work), count), MANIFEST)


def run_share_pass(
    spark: SparkSession, inputs: Sequence[tasks.ShareInput], plan: PassPlan
) -> DataFrame:
    """The batch's pass (``tasks.pass_share``), share ``n`` reading ``inputs[n]``.

    No rows go through Spark: the tasks' manifests come back.
    """
    work = [(share, PASS, given) for share, given in enumerate(inputs)]
    return _shares_job(spark, work, len(inputs), plan)


def _records_task(
    plan: PassPlan,
    inputs: Mapping[int, tasks.ShareInput],
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    yield from tasks.pass_records(batches, inputs, plan, len(inputs), _attempt())


def run_records_pass(
    records: DataFrame, inputs: Sequence[tasks.ShareInput], plan: PassPlan
) -> DataFrame:
    """The batch's pass over the Kafka source's records: partition ``n`` is share ``n``.

    A partition with no record this batch has no task (Spark plans none).
    """
    task = partial(_records_task, plan, dict(enumerate(inputs)))
    return records.select(*RECORDS_ARROW.names).mapInArrow(task, MANIFEST)


def _warm(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    # Unpickling this function imported this module, so the tasks' code and the core.
    for _ in batches:
        pass
    return iter(())


def warm_workers(spark: SparkSession) -> None:
    """Start a Python worker per core with the pass's code imported, as a pass task would.

    A stream's first batch otherwise pays for it (starting the workers and
    importing pyarrow, numpy, pandas and the core: seconds on a cold
    machine); Spark reuses an idle worker for the next task.
    """
    count = max(spark.sparkContext.defaultParallelism, 1)
    spark.range(count, numPartitions=count).mapInArrow(_warm, MANIFEST).collect()


def run_followup(
    spark: SparkSession,
    passes: Mapping[int, tasks.ShareInput],
    judged: Mapping[int, tasks.ShareInput],
    count: int,
    plan: PassPlan,
) -> DataFrame:
    """One job: the shares of ``passes`` run their pass (from their state), those of
    ``judged`` have their clients judged again, both with ``plan``'s clock."""
    work = [(share, PASS, given) for share, given in sorted(passes.items())]
    work += [(share, JUDGE, given) for share, given in sorted(judged.items())]
    return _shares_job(spark, work, count, plan)
