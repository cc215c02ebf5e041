"""The core in Spark: the Spark jobs of a micro-batch, and nothing else.

Spark does no rule here, and no row of a push goes through a shuffle:

* ``run_share_pass`` — the batch's pass over landed files: one task per
  share of the client instances, each reading its share's pushes and
  carried state with pyarrow (``files.pass_share``), so an instance's
  pushes and state meet in one task;
* ``summarise_records`` — for the Kafka source, what the pass must know
  before it runs: which partitions have records and the batch's newest push
  (a small job over the records' headers);
* ``run_records_pass`` — the batch's pass over the Kafka source's records:
  records are keyed by instance, so a partition holds whole instances and
  its task is that share's pass as it is (``files.pass_records``; the
  records go from the Kafka source's task to the core in memory); shares
  whose partition has nothing this batch run from their state alone, in the
  same job.

The passes return the manifest (``files.MANIFEST_ARROW``) of what their tasks wrote.
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
from clientmetrics.pipeline.core.records import RECORDS_ARROW, SUMMARISED, SUMMARY_ARROW, summarise
from clientmetrics.pipeline.spark import files


def spark_schema(schema: pa.Schema) -> StructType:
    """A core schema as Spark's StructType."""
    converted: StructType = from_arrow_schema(schema)
    return converted


MANIFEST = spark_schema(files.MANIFEST_ARROW)
SUMMARY = spark_schema(SUMMARY_ARROW)


def _attempt() -> int:
    context = TaskContext.get()
    return context.attemptNumber() if context else 0


def _share_task(
    plan: PassPlan,
    inputs: Mapping[int, files.ShareInput],
    count: int,
    chosen: Sequence[int],
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        for index in batch.column(0).to_pylist():
            share = chosen[index]
            yield files.pass_share(inputs[share], plan, share, count, _attempt())


def _shares_pass(
    spark: SparkSession,
    inputs: Mapping[int, files.ShareInput],
    count: int,
    chosen: Sequence[int],
    plan: PassPlan,
) -> DataFrame:
    tasks = spark.range(len(chosen), numPartitions=max(len(chosen), 1))
    return tasks.mapInArrow(partial(_share_task, plan, inputs, count, tuple(chosen)), MANIFEST)


def run_share_pass(
    spark: SparkSession, inputs: Sequence[files.ShareInput], plan: PassPlan
) -> DataFrame:
    """The batch's pass (``files.pass_share``), share ``n`` reading ``inputs[n]``.

    No rows go through Spark: the tasks' manifests come back.
    """
    count = len(inputs)
    return _shares_pass(spark, dict(enumerate(inputs)), count, range(count), plan)


def _summary_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield summarise(batches)


def summarise_records(records: DataFrame) -> DataFrame:
    """Per partition of the batch's records: how many, and the newest push (``SUMMARY``)."""
    return records.select(*SUMMARISED).mapInArrow(_summary_task, SUMMARY)


def _records_task(
    plan: PassPlan,
    inputs: Mapping[int, files.ShareInput],
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    yield from files.pass_records(batches, inputs, plan, len(inputs), _attempt())


def run_records_pass(
    spark: SparkSession,
    records: DataFrame,
    inputs: Sequence[files.ShareInput],
    idle: Sequence[int],
    plan: PassPlan,
) -> DataFrame:
    """The batch's pass over the Kafka source's records: partition ``n`` is share ``n``.

    ``idle`` names the shares whose partition has no record this batch: they
    run too (their state is carried on, their clients may go silent), from
    their state alone, in the same job.
    """
    shares = dict(enumerate(inputs))
    task = partial(_records_task, plan, shares)
    passes = records.select(*RECORDS_ARROW.names).mapInArrow(task, MANIFEST)
    if idle:
        passes = passes.union(_shares_pass(spark, shares, len(inputs), idle, plan))
    return passes
