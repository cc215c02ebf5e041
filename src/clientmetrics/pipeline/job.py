"""The pipeline job: landed pushes in, points / client_windows / clients / alerts out.

``run`` and ``stream`` are the same Structured Streaming query over the landing
directory with one checkpoint: ``run`` uses ``Trigger.AvailableNow`` (every file
not yet processed, then stop), ``stream`` a processing-time trigger. The file
source's checkpoint log is the processed-files manifest, so a second ``run``
over the same data adds nothing and ``stream`` resumes where ``run`` stopped.

Each micro-batch goes through ``process_batch``: the only place that reads or
writes. State between batches (series cumulative values, open windows, open
alert episodes, the client inventory, the event-time high-water mark) is kept
per batch id, which makes a replayed batch produce exactly what the first try
would have (see ``storage``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import structlog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import DateType, IntegerType, StructField, StructType

from clientmetrics.pipeline import alerts, clients, points, windows
from clientmetrics.pipeline.notify import AlertNotifier
from clientmetrics.pipeline.rules import RuleSet
from clientmetrics.pipeline.schemas import (
    ALERT_STATE,
    LANDING,
    PROGRESS,
    SERIES_STATE,
    WINDOW_STATE,
)
from clientmetrics.pipeline.storage import TableStore

_log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """Where the job reads and writes, and how it windows and alerts."""

    input_path: str
    output_path: str
    checkpoint_path: str
    rules: RuleSet = field(default_factory=RuleSet)
    #: JSON-lines file new alerts are appended to.
    alert_sink: str | None = None
    window_seconds: int = 60
    #: How late a point may arrive and still count in its window.
    lateness_seconds: int = 60
    max_files_per_trigger: int | None = None
    trigger_seconds: float = 5.0
    #: Close every open window at the end of each batch (for a final ``run``).
    flush_windows: bool = False

    def __post_init__(self) -> None:
        if self.window_seconds <= 0 or self.lateness_seconds < 0:
            raise ValueError("window must be positive and lateness not negative")


LANDING_PARTITIONED = StructType(
    [*LANDING.fields, StructField("date", DateType()), StructField("hour", IntegerType())]
)


class PipelineJob:
    """Runs the pipeline's streaming query and processes its micro-batches."""

    def __init__(self, spark: SparkSession, config: PipelineConfig) -> None:
        self._spark = spark
        self._config = config
        self._store = TableStore(spark, config.output_path)
        self._notifier = AlertNotifier(config.alert_sink, config.rules.webhook)
        self._rules = alerts.rules_frame(spark, config.rules.rules) if config.rules.rules else None
        #: Wall seconds per stage, summed over the batches this job has processed.
        self.stage_seconds: dict[str, float] = {}

    @contextmanager
    def _stage(self, name: str, batch_id: int) -> Iterator[None]:
        # Spark is lazy: a stage's time is that of the actions inside it.
        started = time.perf_counter()
        yield
        seconds = time.perf_counter() - started
        self.stage_seconds[name] = self.stage_seconds.get(name, 0.0) + seconds
        _log.debug("pipeline stage", stage=name, batch=batch_id, seconds=round(seconds, 3))

    def start(self, *, available_now: bool) -> StreamingQuery:
        """Start the query over the landing directory."""
        # The partition columns are part of the schema: a stream started on an
        # empty landing directory would otherwise not know them, and fail when
        # the first date=/hour= directory appears.
        reader = self._spark.readStream.schema(LANDING_PARTITIONED)
        if self._config.max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", self._config.max_files_per_trigger)
        pushes = reader.parquet(self._config.input_path).select(*LANDING.names)
        writer = (
            pushes.writeStream.foreachBatch(self.process_batch)
            .option("checkpointLocation", self._config.checkpoint_path)
            .queryName("clientmetrics-pipeline")
        )
        if available_now:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{self._config.trigger_seconds} seconds")
        return writer.start()

    def run(self) -> None:
        """Process every landed file not yet processed, then return."""
        self.start(available_now=True).awaitTermination()

    def process_batch(self, pushes: DataFrame, batch_id: int) -> None:
        """Turn one micro-batch of landed pushes into rows of the four tables."""
        store = self._store
        series_state = store.read_state("series", batch_id, SERIES_STATE)
        normalised = points.normalised_points(pushes, series_state)
        with self._stage("points", batch_id):
            written = store.append_by_day(normalised, "points", batch_id, "event_time")
        batch_points = store.read_files("points", written, normalised.schema)
        with self._stage("series_state", batch_id):
            next_state = points.next_series_state(batch_points, series_state)
            store.write_state(next_state, "series", batch_id)
        with self._stage("windows", batch_id):
            self._update_windows(batch_points, batch_id)
        with self._stage("clients", batch_id):
            inventory = self._update_clients(pushes, batch_points, batch_id)
        if self._rules is not None:
            with self._stage("alerts", batch_id):
                self._update_alerts(batch_points, inventory, batch_id)

    def _update_windows(self, batch_points: DataFrame, batch_id: int) -> None:
        store, config = self._store, self._config
        progress = store.read_state("progress", batch_id, PROGRESS).first()
        previous_max = progress[0] if progress is not None else None
        batch_max = batch_points.agg(F.max("event_time")).first()
        highest = max(
            (t for t in (previous_max, batch_max[0] if batch_max else None) if t is not None),
            default=None,
        )
        lateness = timedelta(seconds=config.lateness_seconds)
        before = previous_max - lateness if previous_max is not None else None
        watermark = highest - lateness if highest is not None else None
        if config.flush_windows and highest is not None:
            watermark = datetime.max.replace(tzinfo=UTC)
        state = store.read_state("windows", batch_id, WINDOW_STATE)
        on_time = windows.filter_on_time(batch_points, before)
        partials = windows.aggregate_window_partials(on_time, config.window_seconds)
        merged = windows.merge_window_partials(state, partials).persist()
        store.append(windows.select_closed_windows(merged, watermark), "client_windows", batch_id)
        store.write_state(windows.select_open_windows(merged, watermark), "windows", batch_id)
        merged.unpersist()
        self._spark_progress(highest, batch_id)

    def _spark_progress(self, highest: datetime | None, batch_id: int) -> None:
        rows = [(highest,)] if highest is not None else []
        frame = self._spark.createDataFrame(rows, PROGRESS)
        self._store.write_state(frame, "progress", batch_id)

    def _update_clients(
        self, pushes: DataFrame, batch_points: DataFrame, batch_id: int
    ) -> DataFrame:
        store = self._store
        inventory = store.read_state("clients", batch_id, INVENTORY_STATE)
        batch = clients.aggregate_client_pushes(pushes, batch_points)
        store.write_state(clients.merge_inventory(inventory, batch), "clients", batch_id)
        merged = store.read_state("clients", batch_id + 1, INVENTORY_STATE)
        now = datetime.now(UTC)
        store.replace(clients.with_client_status(merged, now), "clients", batch_id)
        return merged

    def _update_alerts(self, batch_points: DataFrame, inventory: DataFrame, batch_id: int) -> None:
        assert self._rules is not None
        store = self._store
        state = store.read_state("alerts", batch_id, ALERT_STATE)
        candidates = alerts.points_named_by(batch_points, self._config.rules.rules)
        evaluated = alerts.evaluate_rules(candidates, self._rules)
        episodes = alerts.track_alert_episodes(evaluated, state, self._rules).persist()
        events = alerts.select_alert_events(episodes, self._rules, inventory)
        written = store.append(events, "alerts", batch_id)
        store.write_state(alerts.select_open_episodes(episodes), "alerts", batch_id)
        episodes.unpersist()
        # A replayed batch must not announce its alerts twice.
        marker = f"_state/notified/{batch_id:012d}"
        if written and not store.exists(marker):
            rows = store.read_files("alerts", written, events.schema).collect()
            self._notifier.notify([row.asDict(recursive=True) for row in rows])
            store.mark(marker)


_INT_LABELS = ("client_source_port", "node_id", "push_interval_ms")

#: The client inventory state's schema.
INVENTORY_STATE = (
    "client_instance_id STRING, "
    + ", ".join(
        f"{name} {'INT' if name in _INT_LABELS else 'STRING'}" for name in clients.PUSH_LABELS
    )
    + ", resource_attributes MAP<STRING, STRING>, resource_seen TIMESTAMP,"
    " first_seen TIMESTAMP, last_seen TIMESTAMP, last_push TIMESTAMP, pushes BIGINT,"
    " terminated BOOLEAN"
)
