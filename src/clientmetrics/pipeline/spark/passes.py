"""The core in Spark: the Spark jobs of a micro-batch, and nothing else.

Spark does no rule here, and no row of a push goes through a shuffle:

* ``run_share_pass`` — the batch's pass: one task per share of the client
  instances, each reading its share's pushes and carried state with pyarrow
  (``files.pass_share``), so an instance's pushes and state meet in one task;
* ``stage_records`` — for the Kafka source, the batch's records as landing
  rows, one file per Kafka partition (records are keyed by instance, so a
  partition holds whole instances and is a share as it is).

Both return the manifest (``files.MANIFEST_ARROW``) of what their tasks wrote.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from clientmetrics.pipeline.core.batch import PassPlan
from clientmetrics.pipeline.core.records import RECORDS_ARROW
from clientmetrics.pipeline.spark import files


def spark_schema(schema: pa.Schema) -> StructType:
    """A core schema as Spark's StructType."""
    converted: StructType = from_arrow_schema(schema)
    return converted


MANIFEST = spark_schema(files.MANIFEST_ARROW)


def _attempt() -> int:
    context = TaskContext.get()
    return context.attemptNumber() if context else 0


def _share_task(
    plan: PassPlan,
    inputs: Sequence[files.ShareInput],
    batches: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    count = len(inputs)
    for batch in batches:
        for share in batch.column(0).to_pylist():
            yield files.pass_share(inputs[share], plan, share, count, _attempt())


def run_share_pass(
    spark: SparkSession, inputs: Sequence[files.ShareInput], plan: PassPlan
) -> DataFrame:
    """The batch's pass (``files.pass_share``), share ``n`` reading ``inputs[n]``.

    No rows go through Spark: the tasks' manifests come back.
    """
    count = len(inputs)
    shares = spark.range(count, numPartitions=count)
    return shares.mapInArrow(partial(_share_task, plan, tuple(inputs)), MANIFEST)


def _stage_task(staging: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    context = TaskContext.get()
    task = f"{context.partitionId():05d}-{context.attemptNumber()}" if context else "00000-0"
    yield files.stage_records(batches, staging, task)


def stage_records(records: DataFrame, staging: str) -> DataFrame:
    """The Kafka source's records as landing rows under ``staging``: their manifest."""
    columns = records.select(*RECORDS_ARROW.names)
    return columns.mapInArrow(partial(_stage_task, staging), MANIFEST)
