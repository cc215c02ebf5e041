"""The pipeline job: landed pushes in, points / client_windows / clients / alerts out.

``run`` and ``stream`` are the same Structured Streaming query over the landing
directory with one checkpoint: ``run`` uses ``Trigger.AvailableNow`` (every file
not yet processed, then stop), ``stream`` a processing-time trigger. The file
source's checkpoint log is the processed-files manifest, so a second ``run``
over the same data adds nothing and ``stream`` resumes where ``run`` stopped.

Each micro-batch goes through ``process_batch``: the core's pass over whole
instances (``spark.passes``), then publishing what it wrote. State between
batches (series cumulative values, open windows, open alert episodes, the
client inventory, the event-time high-water mark) is kept
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

import pyarrow as pa
import structlog
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import DateType, IntegerType, StructField, StructType

from clientmetrics.pipeline.core.batch import PassPlan
from clientmetrics.pipeline.core.rules import RuleSet
from clientmetrics.pipeline.core.schemas import (
    ALERT_STATE_ARROW,
    ALERTS_ARROW,
    INVENTORY_ARROW,
    LANDING_ARROW,
    PROGRESS_ARROW,
    SERIES_STATE_ARROW,
    WINDOW_STATE_ARROW,
)
from clientmetrics.pipeline.jobs.notify import AlertNotifier
from clientmetrics.pipeline.spark import files as task_files
from clientmetrics.pipeline.spark import passes
from clientmetrics.pipeline.spark.passes import spark_schema
from clientmetrics.pipeline.spark.storage import TableStore

_log = structlog.get_logger(__name__)

#: Carried state: the store's name for it, its pass tag and its schema.
_STATE = (
    ("series", "series", SERIES_STATE_ARROW),
    ("windows", "window", WINDOW_STATE_ARROW),
    ("alerts", "alert", ALERT_STATE_ARROW),
    ("clients", "client", INVENTORY_ARROW),
)


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
    #: Who writes the tables: ``arrow`` (the pass's tasks, with pyarrow:
    #: fast, needs an output location pyarrow can open too), ``spark`` (Spark's
    #: writer, any Hadoop path), or ``auto`` (arrow when pyarrow can open it).
    points_writer: str = "auto"
    #: Instances that sent nothing for this long (in event time) retire: their
    #: carried state is dropped and their inventory row moves to ``retired_clients``.
    retention_seconds: int = 7 * 86_400

    def __post_init__(self) -> None:
        if self.window_seconds <= 0 or self.lateness_seconds < 0:
            raise ValueError("window must be positive and lateness not negative")
        if self.retention_seconds <= 0:
            raise ValueError("retention must be positive")
        if self.points_writer not in WRITERS:
            raise ValueError(f"points writer must be one of {', '.join(WRITERS)}")


#: The column naming each push's landed file, when the pass's tasks read the files.
_FILE = "landed_file"

#: The ways the tables can be written (``PipelineConfig.points_writer``).
WRITERS = ("auto", "arrow", "spark")

LANDING = spark_schema(LANDING_ARROW)
LANDING_PARTITIONED = StructType(
    [*LANDING.fields, StructField("date", DateType()), StructField("hour", IntegerType())]
)
ALERTS = StructType([*spark_schema(ALERTS_ARROW).fields, StructField("date", DateType())])


class PipelineJob:
    """Runs the pipeline's streaming query and processes its micro-batches."""

    def __init__(self, spark: SparkSession, config: PipelineConfig) -> None:
        self._spark = spark
        self._config = config
        root = _absolute(config.output_path)
        self._store = TableStore(spark, root)
        self._arrow = arrow_writes_points(config.points_writer, root, _absolute(config.input_path))
        self._notifier = AlertNotifier(config.alert_sink, config.rules.webhook)
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
        landed = reader.parquet(self._config.input_path)
        if self._arrow:
            # The pass's tasks read the files themselves: Spark only names them.
            pushes = landed.select("received_at", F.col("_metadata.file_path").alias(_FILE))
        else:
            pushes = landed.select(*LANDING.names)
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
        """Who writes the tables in this job: ``arrow`` or ``spark``."""
        return "arrow" if self._arrow else "spark"

    def process_batch(self, pushes: DataFrame, batch_id: int) -> None:
        """Turn one micro-batch of landed pushes into rows of the four tables.

        The core does every rule in one pass over whole instances
        (``spark.passes``); this only reads the state, publishes what the
        pass's tasks wrote (or has Spark write their rows) and keeps the state.
        """
        store, config = self._store, self._config
        previous_max, previous_received = self._progress(batch_id)
        with self._stage("points", batch_id):
            newest, landed = self._landed(pushes)
            received = _latest(previous_received, newest)
            before = self._late_before(previous_max)
            retire = (
                None
                if previous_max is None
                else previous_max - timedelta(seconds=config.retention_seconds)
            )
            plan = PassPlan(
                staging=store.staging_path("pass", batch_id),
                window_seconds=config.window_seconds,
                late_before_us=_micros_or_none(before),
                rules=config.rules.rules,
                as_of_us=_micros_or_none(received),
                retire_before_us=_micros_or_none(retire),
            )
            store.clear(plan.staging)
            output = self._pass(pushes, landed, plan, batch_id)
            written, batch_max = self._collect(output, plan.staging)
            store.publish(written.get("points", []), "points", batch_id)
        with self._stage("series_state", batch_id):
            store.adopt_state(written.get("series", []), "series", batch_id)
        with self._stage("windows", batch_id):
            highest, watermark = self._watermark(previous_max, batch_max)
            staging = store.staging_path("close", batch_id)
            store.clear(staging)
            closed = self._close(written.get("windows", []), staging, _micros_or_none(watermark))
            store.publish(closed.get("client_windows", []), "client_windows", batch_id)
            store.adopt_state(closed.get("open_windows", []), "windows", batch_id)
            store.clear(staging)
            self._write_progress(highest, received, batch_id)
        with self._stage("clients", batch_id):
            store.adopt_state(written.get("inventory", []), "clients", batch_id)
            store.replace_files(written.get("clients", []), "clients", batch_id)
            store.publish(written.get("retired_clients", []), "retired_clients", batch_id)
        if config.rules.rules:
            with self._stage("alerts", batch_id):
                store.adopt_state(written.get("alert_state", []), "alerts", batch_id)
                alerts = store.publish(written.get("alerts", []), "alerts", batch_id)
                self._announce(alerts, batch_id)
        store.clear(plan.staging)

    def _landed(self, pushes: DataFrame) -> tuple[datetime | None, list[str]]:
        """The batch's newest push, and (when the tasks read them) its landed files."""
        if not self._arrow:
            newest = pushes.agg(F.max("received_at")).first()
            return (newest[0] if newest else None), []
        named = F.col(_FILE) if _FILE in pushes.columns else F.col("_metadata.file_path")
        found = pushes.agg(F.max("received_at"), F.collect_set(named)).first()
        return (found[0], sorted(found[1])) if found else (None, [])

    def _pass(
        self, pushes: DataFrame, landed: list[str], plan: PassPlan, batch_id: int
    ) -> DataFrame:
        """The batch's pass (``spark.passes``): its manifest, or its tagged rows."""
        store = self._store
        if self._arrow:
            # The tasks read the landed files and the state themselves, each
            # its share of the instances: no rows are shuffled.
            state = {tag: store.state_files(name, batch_id) for name, tag, _ in _STATE}
            tasks = int(self._spark.conf.get("spark.sql.shuffle.partitions") or 1)
            return passes.run_pass_over_files(self._spark, landed, state, plan, tasks)
        frames = {
            tag: store.read_state(name, batch_id, spark_schema(schema))
            for name, tag, schema in _STATE
        }
        return passes.run_pass(pushes, frames, plan, spark_writes=True)

    def _close(
        self, paths: list[str], staging: str, watermark_us: int | None
    ) -> dict[str, list[str]]:
        """Split the pass's open windows by the watermark: the files written, by kind."""
        if self._arrow:
            # The tasks read the pass's window files themselves, a file each.
            closing = passes.close_window_files(self._spark, paths, staging, watermark_us)
        else:
            merged = self._store.read_paths(paths, spark_schema(WINDOW_STATE_ARROW))
            closing = passes.close_windows(merged, staging, watermark_us, spark_writes=True)
        return self._collect(closing, staging)[0]

    def _collect(
        self, output: DataFrame, staging: str
    ) -> tuple[dict[str, list[str]], datetime | None]:
        """Run a pass; the files it left under ``staging`` by kind, and its highest event time."""
        if self._arrow:
            rows = output.collect()
            found: dict[str, list[str]] = {}
            for row in rows:
                if row["path"] is not None:
                    found.setdefault(row["kind"], []).append(row["path"])
            times = [row["max_event_time"] for row in rows if row["max_event_time"] is not None]
            return found, max(times, default=None)
        tagged = output.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            kinds = [row["kind"] for row in tagged.select("kind").distinct().collect()]
            found = {}
            for kind in kinds:
                if kind == "progress":
                    continue
                of_kind = tagged.where(F.col("kind") == kind)
                by_day = task_files.DAY_OF[kind] is not None
                found[kind] = self._store.write_rows(
                    of_kind.select(f"{kind}.*", "date") if by_day else of_kind.select(f"{kind}.*"),
                    f"{staging}/{kind}",
                    by_day=by_day,
                )
            top = tagged.where(F.col("kind") == "progress").agg(F.max("max_event_time")).first()
            return found, top[0] if top else None
        finally:
            tagged.unpersist()

    def _progress(self, batch_id: int) -> tuple[datetime | None, datetime | None]:
        """The event-time high-water mark and the newest push, as the previous batch left them."""
        paths = self._store.state_files("progress", batch_id)
        if not paths:
            return None, None
        if self._arrow:
            rows = pa.concat_tables(
                task_files.read_parquet(path, PROGRESS_ARROW) for path in paths
            ).to_pylist()
        else:
            frame = self._store.read_state("progress", batch_id, spark_schema(PROGRESS_ARROW))
            rows = [row.asDict() for row in frame.take(1)]
        if not rows:
            return None, None
        return rows[0]["max_event_time"], rows[0]["max_received_at"]

    def _late_before(self, previous_max: datetime | None) -> datetime | None:
        """Points before this are late: the watermark the previous batch left."""
        if previous_max is None:
            return None
        return previous_max - timedelta(seconds=self._config.lateness_seconds)

    def _watermark(
        self, previous_max: datetime | None, batch_max: datetime | None
    ) -> tuple[datetime | None, datetime | None]:
        """The highest event time seen so far, and the watermark it sets (None: nothing yet)."""
        highest = _latest(previous_max, batch_max)
        if highest is None:
            return None, None
        if self._config.flush_windows:
            return highest, datetime.max.replace(tzinfo=UTC)
        return highest, highest - timedelta(seconds=self._config.lateness_seconds)

    def _write_progress(
        self, highest: datetime | None, received: datetime | None, batch_id: int
    ) -> None:
        rows = [(highest, received)] if highest is not None or received is not None else []
        if not self._arrow:
            frame = self._spark.createDataFrame(rows, spark_schema(PROGRESS_ARROW))
            self._store.write_state(frame, "progress", batch_id)
            return
        # One row: written here with pyarrow rather than by a Spark job.
        table = pa.Table.from_arrays(
            [
                pa.array([_micros_or_none(row[index]) for row in rows], pa.int64()).cast(field.type)
                for index, field in enumerate(PROGRESS_ARROW)
            ],
            schema=PROGRESS_ARROW,
        )
        staging = self._store.staging_path("progress", batch_id)
        self._store.clear(staging)
        task_files.write_parquet(f"{staging}/part-00000.parquet", table)
        self._store.adopt_state([f"{staging}/part-00000.parquet"], "progress", batch_id)
        self._store.clear(staging)

    def _announce(self, written: list[str], batch_id: int) -> None:
        """Announce the batch's alert events once (a replayed batch must not do it again)."""
        marker = f"_state/notified/{batch_id:012d}"
        if written and not self._store.exists(marker):
            rows = self._store.read_files("alerts", written, ALERTS).collect()
            self._notifier.notify([row.asDict(recursive=True) for row in rows])
            self._store.mark(marker)


def _latest(*moments: datetime | None) -> datetime | None:
    return max((_aware(m) for m in moments if m is not None), default=None)


def _aware(moment: datetime) -> datetime:
    """A naive datetime is local time, as PySpark returns them."""
    return moment if moment.tzinfo is not None else moment.astimezone()


def _micros_or_none(moment: datetime | None) -> int | None:
    return None if moment is None else _epoch_micros(moment)


def _absolute(path: str) -> str:
    """A local path made absolute (Spark and pyarrow must agree on it); URIs as they are."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", path):
        return path
    return os.path.abspath(path)


def arrow_writes_points(writer: str, root: str, landing: str) -> bool:
    """Whether the pass's tasks read the landed files and write the tables (pyarrow's filesystems).

    ``auto`` picks it for local paths only: opening other schemes (HDFS through
    libhdfs, S3, GCS) from pyarrow needs the executors set up for it, which an
    operator asks for with ``arrow``.
    """
    locations = (root, landing)
    if writer == "spark":
        return False
    if writer == "auto" and not all(p.startswith(("/", "file:")) for p in locations):
        return False
    for location in locations:
        if task_files.filesystem_for(location) is None:
            raise ValueError(
                f"the arrow points writer cannot open {location!r}: use the spark writer"
            )
    return True


def _epoch_micros(moment: datetime) -> int:
    """Microseconds since the epoch; a naive datetime is local time, as PySpark returns them."""
    aware = moment if moment.tzinfo is not None else moment.astimezone()
    return (aware - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
