"""Per-client windows (count, min, max, avg, last) in event time, closed by a watermark.

Batches arrive as files land, so a window can span several of them. Partial
aggregates of windows the watermark has not passed yet are carried between
batches as state; a window is written once, when the watermark (the highest
event time seen minus the allowed lateness) passes its end. Points older than
the previous watermark are late: they stay in the points table but no longer
change a window that has been written, as in Spark's own streaming windows.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from functools import partial

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from clientmetrics.pipeline import pass_files
from clientmetrics.pipeline.arrow_pass import CLIENT_WINDOWS_ARROW
from clientmetrics.pipeline.schemas import WINDOW_STATE_ARROW

#: The client_windows table, column by column.
WINDOW_COLUMNS = (*CLIENT_WINDOWS_ARROW.names, "date")

_STATE_COLUMNS = tuple(WINDOW_STATE_ARROW.names)


def _entries(attributes: str) -> Column:
    # A map cannot be a grouping key; its sorted entries can, and hash-aggregate.
    return F.array_sort(F.map_entries(F.col(attributes)))


def aggregate_window_partials(points: DataFrame, window_seconds: int) -> DataFrame:
    """Partial aggregates per series and event-time window (the state's shape)."""
    window = F.window("event_time", f"{window_seconds} seconds")
    return (
        points.where(F.col("value").isNotNull())
        .groupBy(
            "series",
            "client_instance_id",
            "metric_name",
            _entries("attributes").alias("entries"),
            window.alias("w"),
        )
        .agg(
            F.count("value").alias("count"),
            F.sum("value").alias("sum"),
            F.min("value").alias("min"),
            F.max("value").alias("max"),
            F.max_by("value", "event_time").alias("last"),
            F.max("event_time").alias("last_time"),
        )
        .select(
            "series",
            "client_instance_id",
            "metric_name",
            F.map_from_entries("entries").alias("attributes"),
            F.col("w.start").alias("window_start"),
            F.col("w.end").alias("window_end"),
            "count",
            "sum",
            "min",
            "max",
            "last",
            "last_time",
        )
    )


def merge_window_partials(state: DataFrame, partials: DataFrame) -> DataFrame:
    """Combine carried partial windows with this batch's partials for the same window."""
    return (
        state.select(*_STATE_COLUMNS)
        .unionByName(partials.select(*_STATE_COLUMNS))
        .groupBy(
            "series",
            "client_instance_id",
            "metric_name",
            _entries("attributes").alias("entries"),
            "window_start",
            "window_end",
        )
        .agg(
            F.sum("count").alias("count"),
            F.sum("sum").alias("sum"),
            F.min("min").alias("min"),
            F.max("max").alias("max"),
            F.max_by("last", "last_time").alias("last"),
            F.max("last_time").alias("last_time"),
        )
        .select(F.map_from_entries("entries").alias("attributes"), "*")
        .select(*_STATE_COLUMNS)
    )


def filter_on_time(points: DataFrame, watermark: datetime | None) -> DataFrame:
    """Drop points older than the watermark (late data) before they reach a window."""
    if watermark is None:
        return points.select("*")
    return points.where(F.col("event_time") >= F.lit(watermark)).select("*")


def select_closed_windows(merged: DataFrame, watermark: datetime | None) -> DataFrame:
    """The windows whose end the watermark has passed, as client_windows rows."""
    closed = (
        merged.where(F.lit(False))
        if watermark is None
        else merged.where(F.col("window_end") <= F.lit(watermark))
    )
    average = (F.col("sum") / F.col("count")).alias("avg")
    return closed.select(
        *(average if name == "avg" else F.col(name) for name in CLIENT_WINDOWS_ARROW.names),
        F.to_date("window_start").alias("date"),
    )


def select_open_windows(merged: DataFrame, watermark: datetime | None) -> DataFrame:
    """The windows still open: the state to carry into the next batch."""
    if watermark is None:
        return merged.select(*_STATE_COLUMNS)
    return merged.where(F.col("window_end") > F.lit(watermark)).select(*_STATE_COLUMNS)


def _close_task(
    staging: str, watermark_us: int | None, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    context = TaskContext.get()
    task = f"{context.partitionId():05d}-{context.attemptNumber()}" if context else "00000-0"
    yield pass_files.close_windows(batches, staging, watermark_us, task)


def close_windows_with_arrow(
    merged: DataFrame, staging: str, watermark_us: int | None
) -> DataFrame:
    """``select_closed_windows`` and ``select_open_windows`` written by pyarrow under ``staging``.

    The rows are the manifest of the files written (``pass_files.close_windows``);
    run an action to write them.
    """
    columns = merged.select(*_STATE_COLUMNS)
    return columns.mapInArrow(partial(_close_task, staging, watermark_us), _MANIFEST)


_MANIFEST = from_arrow_schema(pass_files.MANIFEST_ARROW)
