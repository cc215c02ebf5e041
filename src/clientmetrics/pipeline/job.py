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

import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import structlog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import DateType, IntegerType, StructField, StructType

from clientmetrics.pipeline import alerts, clients, pass_files, points, windows
from clientmetrics.pipeline.arrow_alerts import EPISODES_ARROW
from clientmetrics.pipeline.arrow_pass import CLIENT_VIEW_ARROW, PassPlan
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
    #: Who writes the points table: ``arrow`` (the decode pass, with pyarrow:
    #: fast, needs an output location pyarrow can open too), ``spark`` (Spark's
    #: writer, any Hadoop path), or ``auto`` (arrow when pyarrow can open it).
    points_writer: str = "auto"

    def __post_init__(self) -> None:
        if self.window_seconds <= 0 or self.lateness_seconds < 0:
            raise ValueError("window must be positive and lateness not negative")
        if self.points_writer not in WRITERS:
            raise ValueError(f"points writer must be one of {', '.join(WRITERS)}")


#: The ways the points table can be written (``PipelineConfig.points_writer``).
WRITERS = ("auto", "arrow", "spark")


LANDING_PARTITIONED = StructType(
    [*LANDING.fields, StructField("date", DateType()), StructField("hour", IntegerType())]
)


class PipelineJob:
    """Runs the pipeline's streaming query and processes its micro-batches."""

    def __init__(self, spark: SparkSession, config: PipelineConfig) -> None:
        self._spark = spark
        self._config = config
        root = _absolute(config.output_path)
        self._store = TableStore(spark, root)
        self._arrow = arrow_writes_points(config.points_writer, root)
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

    @property
    def points_writer(self) -> str:
        """Who writes the points table in this job: ``arrow`` or ``spark``."""
        return "arrow" if self._arrow else "spark"

    def process_batch(self, pushes: DataFrame, batch_id: int) -> None:
        """Turn one micro-batch of landed pushes into rows of the four tables."""
        if self._arrow:
            self._process_in_pass(pushes, batch_id)
        else:
            self._process_on_spark(pushes, batch_id)

    def _process_in_pass(self, pushes: DataFrame, batch_id: int) -> None:
        """The decode pass writes the points and reduces them; Spark handles the reductions."""
        store, config = self._store, self._config
        previous_max = self._previous_max(batch_id)
        before = self._late_before(previous_max)
        plan = PassPlan(
            staging=store.staging_path("pass", batch_id),
            window_seconds=config.window_seconds,
            late_before_us=None if before is None else _epoch_micros(before),
            rules=config.rules.rules,
        )
        with self._stage("points", batch_id):
            store.clear(plan.staging)
            series_state = store.read_state("series", batch_id, SERIES_STATE)
            window_state = store.read_state("windows", batch_id, WINDOW_STATE)
            alert_state = store.read_state("alerts", batch_id, ALERT_STATE)
            manifest = points.decode_pass(
                pushes, series_state, window_state, alert_state, plan
            ).collect()
            files: dict[str, list[str]] = {}
            for row in manifest:
                if row["path"] is not None:
                    files.setdefault(row["kind"], []).append(row["path"])
            store.publish(files.get("points", []), "points", batch_id)
        batch_max = max(
            (row["max_event_time"] for row in manifest if row["max_event_time"] is not None),
            default=None,
        )
        with self._stage("series_state", batch_id):
            store.adopt_state(files.get("series", []), "series", batch_id)
        with self._stage("windows", batch_id):
            merged = store.read_paths(files.get("windows", []), WINDOW_STATE)
            highest, watermark = self._watermark(previous_max, batch_max)
            staging = store.staging_path("close", batch_id)
            store.clear(staging)
            marks = None if watermark is None else _epoch_micros(watermark)
            closing = windows.close_windows_with_arrow(merged, staging, marks).collect()
            written: dict[str, list[str]] = {}
            for row in closing:
                if row["path"] is not None:
                    written.setdefault(row["kind"], []).append(row["path"])
            store.publish(written.get("client_windows", []), "client_windows", batch_id)
            store.adopt_state(written.get("windows", []), "windows", batch_id)
            store.clear(staging)
            self._spark_progress(highest, batch_id)
        with self._stage("clients", batch_id):
            view = store.read_paths(files.get("clients", []), INVENTORY_STATE)
            inventory = self._update_clients(view, batch_id)
        if self._rules is not None:
            with self._stage("alerts", batch_id):
                episodes = store.read_paths(files.get("episodes", []), EPISODES)
                self._write_alerts(episodes, inventory, batch_id)
        store.clear(plan.staging)

    def _process_on_spark(self, pushes: DataFrame, batch_id: int) -> None:
        """Spark writes the points, and every later stage reads them back."""
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
            previous_max = self._previous_max(batch_id)
            top = batch_points.agg(F.max("event_time")).first()
            on_time = windows.filter_on_time(batch_points, self._late_before(previous_max))
            partials = windows.aggregate_window_partials(on_time, self._config.window_seconds)
            state = store.read_state("windows", batch_id, WINDOW_STATE)
            merged = windows.merge_window_partials(state, partials).persist()
            self._close_windows(merged, previous_max, top[0] if top else None, batch_id)
            merged.unpersist()
        with self._stage("clients", batch_id):
            view = clients.aggregate_client_pushes(pushes, batch_points)
            inventory = self._update_clients(view, batch_id)
        if self._rules is not None:
            with self._stage("alerts", batch_id):
                candidates = alerts.points_named_by(batch_points, self._config.rules.rules)
                self._update_alerts(candidates, inventory, batch_id)

    def _previous_max(self, batch_id: int) -> datetime | None:
        progress = self._store.read_state("progress", batch_id, PROGRESS).first()
        return progress[0] if progress is not None else None

    def _late_before(self, previous_max: datetime | None) -> datetime | None:
        """Points before this are late: the watermark the previous batch left."""
        if previous_max is None:
            return None
        return previous_max - timedelta(seconds=self._config.lateness_seconds)

    def _watermark(
        self, previous_max: datetime | None, batch_max: datetime | None
    ) -> tuple[datetime | None, datetime | None]:
        """The highest event time seen so far, and the watermark it sets (None: nothing yet)."""
        highest = max((t for t in (previous_max, batch_max) if t is not None), default=None)
        if highest is None:
            return None, None
        if self._config.flush_windows:
            return highest, datetime.max.replace(tzinfo=UTC)
        return highest, highest - timedelta(seconds=self._config.lateness_seconds)

    def _close_windows(
        self,
        windows_now: DataFrame,
        previous_max: datetime | None,
        batch_max: datetime | None,
        batch_id: int,
    ) -> None:
        """Write the windows the watermark has passed; keep the others as state.

        ``windows_now`` is every window not yet written: the carried ones
        merged with this batch's partials. It is read twice: persist it first
        if it is costly to compute.
        """
        store = self._store
        highest, watermark = self._watermark(previous_max, batch_max)
        closed = windows.select_closed_windows(windows_now, watermark)
        store.append(closed, "client_windows", batch_id)
        store.write_state(windows.select_open_windows(windows_now, watermark), "windows", batch_id)
        self._spark_progress(highest, batch_id)

    def _spark_progress(self, highest: datetime | None, batch_id: int) -> None:
        rows = [(highest,)] if highest is not None else []
        frame = self._spark.createDataFrame(rows, PROGRESS)
        self._store.write_state(frame, "progress", batch_id)

    def _update_clients(self, batch: DataFrame, batch_id: int) -> DataFrame:
        store = self._store
        inventory = store.read_state("clients", batch_id, INVENTORY_STATE)
        store.write_state(clients.merge_inventory(inventory, batch), "clients", batch_id)
        merged = store.read_state("clients", batch_id + 1, INVENTORY_STATE)
        now = datetime.now(UTC)
        store.replace(clients.with_client_status(merged, now), "clients", batch_id)
        return merged

    def _update_alerts(self, candidates: DataFrame, inventory: DataFrame, batch_id: int) -> None:
        assert self._rules is not None
        state = self._store.read_state("alerts", batch_id, ALERT_STATE)
        evaluated = alerts.evaluate_rules(candidates, self._rules)
        episodes = alerts.track_alert_episodes(evaluated, state, self._rules).persist()
        self._write_alerts(episodes, inventory, batch_id)
        episodes.unpersist()

    def _write_alerts(self, episodes: DataFrame, inventory: DataFrame, batch_id: int) -> None:
        """Append the batch's alert events, keep the open episodes, announce new alerts.

        ``episodes`` is read twice: persist it first if it is costly to compute.
        """
        assert self._rules is not None
        store = self._store
        events = alerts.select_alert_events(episodes, self._rules, inventory)
        written = store.append(events, "alerts", batch_id)
        store.write_state(alerts.select_open_episodes(episodes), "alerts", batch_id)
        # A replayed batch must not announce its alerts twice.
        marker = f"_state/notified/{batch_id:012d}"
        if written and not store.exists(marker):
            rows = store.read_files("alerts", written, events.schema).collect()
            self._notifier.notify([row.asDict(recursive=True) for row in rows])
            store.mark(marker)


#: The client inventory state's schema (the decode pass's inventory rows have it too).
INVENTORY_STATE: StructType = from_arrow_schema(CLIENT_VIEW_ARROW)

#: The decode pass's alert episodes, as Spark reads them back.
EPISODES: StructType = from_arrow_schema(EPISODES_ARROW)


def _absolute(path: str) -> str:
    """A local path made absolute (Spark and pyarrow must agree on it); URIs as they are."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", path):
        return path
    return os.path.abspath(path)


def arrow_writes_points(writer: str, root: str) -> bool:
    """Whether the decode pass writes the points (with pyarrow's filesystems).

    ``auto`` picks it for local paths only: opening other schemes (HDFS through
    libhdfs, S3, GCS) from pyarrow needs the executors set up for it, which an
    operator asks for with ``arrow``.
    """
    if writer == "spark":
        return False
    if writer == "auto" and not (root.startswith("/") or root.startswith("file:")):
        return False
    if pass_files.filesystem_for(root) is None:
        raise ValueError(f"the arrow points writer cannot open {root!r}: use the spark writer")
    return True


def _epoch_micros(moment: datetime) -> int:
    """Microseconds since the epoch; a naive datetime is local time, as PySpark returns them."""
    aware = moment if moment.tzinfo is not None else moment.astimezone()
    return (aware - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
