"""From landed pushes to the points table: decode, key series, normalise temporality.

Decoding runs in Python through ``mapInArrow`` (Arrow batches in, Arrow batches
out, no per-row UDF); the decoder itself is the pure
``clientmetrics.telemetry.otlp_arrow``. Everything after it runs in the JVM.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from clientmetrics.pipeline import arrow_pass
from clientmetrics.pipeline.arrow_pass import PassPlan, decode_pushes, instance_groups
from clientmetrics.pipeline.arrow_series import ACCUMULATING, RUNNING_FIELDS, with_running_values
from clientmetrics.pipeline.pass_files import MANIFEST_ARROW, run_pass
from clientmetrics.pipeline.schemas import DECODED, DECODED_ARROW, LABEL_COLUMNS

_RUNNING_ARROW = pa.schema([*DECODED_ARROW, *RUNNING_FIELDS])
_RUNNING = from_arrow_schema(_RUNNING_ARROW)

#: The points table, column by column, in order.
POINT_COLUMNS = (
    *DECODED.names,
    "series",
    "cumulative_value",
    "rate_per_second",
    "date",
)


def _decode(batch: pa.RecordBatch) -> pa.RecordBatch:
    decoded = decode_pushes(batch)
    return pa.RecordBatch.from_arrays(
        [column.combine_chunks() for column in decoded.columns], schema=DECODED_ARROW
    )


def _decode_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield _decode(batch)


def _decode_by_instance(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Decode a partition sorted by client instance, whole instances per call.

    A series is never split between two calls (``arrow_pass.instance_groups``).
    """
    for pushes in instance_groups(batches):
        points = decode_pushes(pushes)
        yield from with_running_values(points).cast(_RUNNING_ARROW).to_batches()


def explode_points(pushes: DataFrame) -> DataFrame:
    """One row per OTLP data point of every landed push, with the push's labels.

    Empty pushes and payloads that are not valid OTLP contribute no rows.
    """
    needed = pushes.select(*LABEL_COLUMNS, "payload")
    return needed.mapInArrow(_decode_batches, DECODED).select(*DECODED.names)


def attributes_text(attributes: Column) -> Column:
    """A map's entries as sorted ``key=value`` text: a groupable stand-in for the map."""
    entries = F.transform(
        F.array_sort(F.map_entries(attributes)),
        lambda entry: F.concat(entry["key"], F.lit("="), F.coalesce(entry["value"], F.lit(""))),
    )
    return F.array_join(entries, ",")


def with_series_key(points: DataFrame) -> DataFrame:
    """Add ``series``: client instance, metric name and data-point attributes, as one string.

    librdkafka sends one Metric per broker with an int ``node.id`` attribute;
    those copies get distinct keys.
    """
    series = F.concat_ws(
        "|", F.col("client_instance_id"), F.col("metric_name"), attributes_text(F.col("attributes"))
    )
    return points.select("*", series.alias("series"))


def _seconds_between(later: Column, earlier: Column) -> Column:
    return (F.unix_micros(later) - F.unix_micros(earlier)) / F.lit(1_000_000.0)


def _per_second(amount: Column, seconds: Column) -> Column:
    return F.when(seconds > 0, amount / seconds)


def with_normalised_values(points: DataFrame, series_state: DataFrame) -> DataFrame:
    """Add ``cumulative_value`` and ``rate_per_second`` per series, whatever the temporality.

    Delta points are summed onto the series' previous cumulative value (carried
    between batches in ``series_state``); cumulative points are their own
    cumulative value. The rate is the cumulative increase per second since the
    series' previous point; after a reset (a new start time, or a monotonic sum
    going down) it is the value over the time since the new start. Gauges have
    neither, and skip the per-series sort the others need.
    """
    accumulating = F.col("kind").isin(*ACCUMULATING)
    others = points.where(~accumulating | F.col("kind").isNull()).select(
        *DECODED.names,
        "series",
        F.lit(None).cast("double").alias("cumulative_value"),
        F.lit(None).cast("double").alias("rate_per_second"),
        F.to_date("event_time").alias("date"),
    )
    return _normalise_accumulating(points.where(accumulating), series_state).unionByName(others)


def _normalise_accumulating(points: DataFrame, series_state: DataFrame) -> DataFrame:
    state = series_state.select(
        "series", "last_time", "last_start", F.col("last_cumulative").alias("_carried")
    )
    joined = points.join(state, "series", "left")
    window = Window.partitionBy("series").orderBy("event_time", "received_at")
    running = window.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    delta = F.col("temporality") == "delta"
    cumulative = F.when(
        delta, F.coalesce(F.col("_carried"), F.lit(0.0)) + F.sum("value").over(running)
    ).otherwise(F.col("value"))
    step = joined.select("*", cumulative.alias("cumulative_value")).select(
        "*",
        F.coalesce(F.lag("cumulative_value").over(window), F.col("_carried")).alias("_prev"),
        F.coalesce(F.lag("event_time").over(window), F.col("last_time")).alias("_prev_time"),
    )
    return _with_rate(step)


def _with_rate(step: DataFrame, accumulating: Column | None = None) -> DataFrame:
    """The points table's last columns, from ``cumulative_value``, ``_prev`` and ``_prev_time``.

    ``_prev`` and ``_prev_time`` are the series' previous cumulative value and
    event time (from this batch, else carried). Rows where ``accumulating`` is
    false get nulls.
    """
    delta = F.col("temporality") == "delta"
    since_start = _seconds_between(F.col("event_time"), F.col("start_time"))
    since_prev = _seconds_between(F.col("event_time"), F.col("_prev_time"))
    started = F.unix_micros(F.col("start_time")) > 0
    reset = (
        F.col("_prev").isNull()
        | (started & (F.col("start_time") > F.col("_prev_time")) & ~delta)
        | ((F.col("monotonic") == F.lit(True)) & (F.col("cumulative_value") < F.col("_prev")))
    )
    rate = (
        F.when(
            delta,
            F.when(started, _per_second(F.col("value"), since_start)).otherwise(
                _per_second(F.col("value"), since_prev)
            ),
        )
        .when(reset, F.when(started, _per_second(F.col("cumulative_value"), since_start)))
        .otherwise(_per_second(F.col("cumulative_value") - F.col("_prev"), since_prev))
    )
    cumulative = F.col("cumulative_value")
    if accumulating is not None:
        rate, cumulative = F.when(accumulating, rate), F.when(accumulating, cumulative)
    return step.select(
        *DECODED.names,
        "series",
        cumulative.alias("cumulative_value"),
        rate.alias("rate_per_second"),
        F.to_date("event_time").alias("date"),
    )


def normalised_points(pushes: DataFrame, series_state: DataFrame) -> DataFrame:
    """``with_normalised_values(with_series_key(explode_points(pushes)), series_state)``, faster.

    The pushes are partitioned and sorted by client instance (compact rows:
    one per push), so each instance's points are decoded in one Arrow call that
    also keys the series and takes each one's running sum and previous point
    (``arrow_series``). Spark then only joins the carried state (small: one row
    per series, so it is broadcast) and computes the rate: no sort or shuffle
    of point rows, and each payload is decoded once.
    """
    by_instance = (
        pushes.select(*LABEL_COLUMNS, "payload")
        .repartition("client_instance_id")
        .sortWithinPartitions("client_instance_id")
    )
    decoded = by_instance.mapInArrow(_decode_by_instance, _RUNNING)
    state = series_state.select(
        "series", F.col("last_time"), F.col("last_cumulative").alias("_carried")
    )
    joined = decoded.join(state, "series", "left")
    carried = F.coalesce(F.col("_carried"), F.lit(0.0))
    delta = F.col("temporality") == "delta"
    previous = F.when(
        F.col("_has_prev"),
        F.when(F.col("_prev_delta"), carried + F.col("_prev_run")).otherwise(F.col("_prev_value")),
    )
    step = joined.select(
        "*",
        F.when(delta, carried + F.col("_run")).otherwise(F.col("value")).alias("cumulative_value"),
        F.coalesce(previous, F.col("_carried")).alias("_prev"),
        F.coalesce(F.when(F.col("_has_prev"), F.col("_lag_time")), F.col("last_time")).alias(
            "_prev_time"
        ),
    )
    return _with_rate(step, F.col("kind").isin(*ACCUMULATING))


def latest_series_points(normalised: DataFrame) -> DataFrame:
    """Each accumulating series' latest point, in the series state's shape."""
    return (
        normalised.where(F.col("cumulative_value").isNotNull())
        .groupBy("series")
        .agg(
            F.max_by(
                F.struct(
                    F.col("event_time").alias("last_time"),
                    F.col("start_time").alias("last_start"),
                    F.col("cumulative_value").alias("last_cumulative"),
                ),
                F.struct("event_time", "received_at"),
            ).alias("s")
        )
        .select("series", "s.last_time", "s.last_start", "s.last_cumulative")
    )


def merge_series_state(series_state: DataFrame, latest: DataFrame) -> DataFrame:
    """The carried state with this batch's latest points in place of their series' rows."""
    kept = series_state.join(latest.select("series"), "series", "left_anti")
    return kept.unionByName(latest.select(*_STATE_NAMES)).select(*_STATE_NAMES)


def next_series_state(normalised: DataFrame, series_state: DataFrame) -> DataFrame:
    """The state to carry into the next batch: each accumulating series' latest point."""
    return merge_series_state(series_state, latest_series_points(normalised))


_STATE_NAMES = ("series", "last_time", "last_start", "last_cumulative")


def _pass_task(plan: PassPlan, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    context = TaskContext.get()
    task = f"{context.partitionId():05d}-{context.attemptNumber()}" if context else "00000-0"
    yield run_pass(batches, plan, task)


def decode_pass(
    pushes: DataFrame,
    series_state: DataFrame,
    window_state: DataFrame,
    alert_state: DataFrame,
    plan: PassPlan,
) -> DataFrame:
    """The batch's decode pass (``arrow_pass``); its rows are the manifest of files written.

    Each instance's pushes and carried state (series, open windows and open
    alert episodes) go to
    one partition, sorted by instance, so one Arrow call sees whole instances.
    Running an action on the result writes the files under ``plan.staging``.
    """
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

    instance_of_series = F.substring_index("series", "|", 1)
    union = (
        rows(pushes, None, F.col("client_instance_id"))
        .unionByName(rows(series_state, "series", instance_of_series))
        .unionByName(rows(window_state, "window", F.col("client_instance_id")))
        .unionByName(rows(alert_state, "alert", F.col("client_instance_id")))
        .repartition("client_instance_id")
        .sortWithinPartitions("client_instance_id")
    )
    return union.mapInArrow(partial(_pass_task, plan), _MANIFEST)


_PASS_INPUT = from_arrow_schema(arrow_pass.PASS_INPUT_ARROW)
_MANIFEST = from_arrow_schema(MANIFEST_ARROW)
