"""The pipeline job: pushes in (landed files or a Kafka topic), the tables out.

``run`` and ``stream`` are the same Structured Streaming query with one
checkpoint (``sources``): ``run`` uses ``Trigger.AvailableNow`` (everything
not yet processed, then stop), ``stream`` a processing-time trigger. The
checkpoint holds what was read (the landing directory's processed files, or
the topic's offsets), so a second ``run`` adds nothing and ``stream`` resumes
where ``run`` (or a killed ``stream``) stopped.

Each micro-batch goes through ``process_batch``: at most two Spark jobs (the
landing source's names the batch's files, the Kafka source's stages its
records as landing rows, a file per partition), then the core's pass over
whole instances (``spark.passes``), then publishing what it wrote. State
between batches (series cumulative values, open windows, open alert
episodes, the client inventory, the progress) is kept per batch id, which
makes a replayed batch produce exactly what the first try would have (see
``storage``).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import structlog
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from clientmetrics.errors import ConfigurationError
from clientmetrics.pipeline.core.batch import PassPlan
from clientmetrics.pipeline.core.rules import RuleSet
from clientmetrics.pipeline.core.schemas import PROGRESS_ARROW
from clientmetrics.pipeline.jobs import sources
from clientmetrics.pipeline.jobs.notify import AlertNotifier
from clientmetrics.pipeline.jobs.sources import KafkaSource
from clientmetrics.pipeline.spark import passes
from clientmetrics.pipeline.spark.files import ShareInput, share_files
from clientmetrics.pipeline.spark.storage import TableStore

_log = structlog.get_logger(__name__)

#: Carried state: the store's name for it, its pass tag, and the pass's kind of rows for it.
_STATE = (
    ("series", "series", "series"),
    ("windows", "window", "windows"),
    ("alerts", "alert", "alert_state"),
    ("clients", "client", "inventory"),
)
#: The tables a batch appends to, by the pass's kind of rows.
_APPENDED = ("points", "client_windows", "retired_clients", "alerts")
#: A watermark past every window's end (``flush_windows``).
_NEVER = 2**63 - 1


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """Where the job reads and writes, and how it windows and alerts."""

    #: Landed pushes (the landing source; unused with ``kafka``).
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
    #: Instances that sent nothing for this long (in event time) retire: their
    #: carried state is dropped and their inventory row moves to ``retired_clients``.
    retention_seconds: int = 7 * 86_400
    #: Read the pushes from this topic instead of the landing directory.
    kafka: KafkaSource | None = None

    def __post_init__(self) -> None:
        if self.window_seconds <= 0 or self.lateness_seconds < 0:
            raise ValueError("window must be positive and lateness not negative")
        if self.retention_seconds <= 0:
            raise ValueError("retention must be positive")


class PipelineJob:
    """Runs the pipeline's streaming query and processes its micro-batches."""

    def __init__(self, spark: SparkSession, config: PipelineConfig) -> None:
        self._spark = spark
        self._config = config
        try:
            self._store = TableStore(_absolute(config.output_path))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, ValueError) as exc:
            raise ValueError(f"cannot open the tables' location {config.output_path!r}") from exc
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
        """Start the query over the landing directory or the topic."""
        config = self._config
        if config.kafka is not None:
            stream = sources.kafka_stream(self._spark, config.kafka)
        else:
            stream = sources.landing_stream(
                self._spark, config.input_path, config.max_files_per_trigger
            )
        writer = (
            stream.writeStream.foreachBatch(self.process_batch)
            .option("checkpointLocation", config.checkpoint_path)
            .queryName("clientmetrics-pipeline")
        )
        if available_now:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{config.trigger_seconds} seconds")
        return writer.start()

    def run(self) -> None:
        """Process everything not yet processed, then return."""
        self.start(available_now=True).awaitTermination()

    def process_batch(self, pushes: DataFrame, batch_id: int) -> None:
        """Turn one micro-batch (landed files' pushes, or topic records) into table rows.

        The core does every rule in one pass over whole instances
        (``spark.passes``); this only names the state, publishes what the
        pass's tasks wrote and keeps the state.
        """
        store, config = self._store, self._config
        previous_max, previous_received = self._progress(batch_id)
        with self._stage("input", batch_id):
            by_share, filtered, newest = self._pushes(pushes, batch_id)
        received = _latest(previous_received, newest)
        watermark = _minus(previous_max, config.lateness_seconds)
        plan = PassPlan(
            staging=store.staging_path("pass", batch_id),
            window_seconds=config.window_seconds,
            late_before_us=watermark,
            close_before_us=_NEVER if config.flush_windows else watermark,
            rules=config.rules.rules,
            as_of_us=_micros_or_none(received),
            retire_before_us=_minus(previous_max, config.retention_seconds),
        )
        store.clear(plan.staging)
        with self._stage("pass", batch_id):
            inputs = self._share_inputs(by_share, filtered, batch_id)
            rows = passes.run_share_pass(self._spark, inputs, plan).collect()
        with self._stage("publish", batch_id):
            written = _by_kind(rows)
            for kind in _APPENDED:
                store.publish(written.get(kind, []), kind, batch_id)
            for name, _, kind in _STATE:
                store.adopt_state(written.get(kind, []), name, batch_id)
            store.replace_files(written.get("clients", []), "clients", batch_id)
            highest = _latest(previous_max, *(row["max_event_time"] for row in rows))
            self._write_progress(highest, received, batch_id)
            self._announce([row["event"] for row in rows if row["kind"] == "alert_event"], batch_id)
        store.clear(plan.staging)
        store.clear(store.staging_path("records", batch_id))

    def _pushes(
        self, pushes: DataFrame, batch_id: int
    ) -> tuple[list[list[str]], bool, datetime | None]:
        """The batch's push files by share, whether they hold other shares too, the newest push.

        Landed files hold every instance: each of the shares (twice the cores,
        ``spark.sql.shuffle.partitions``) reads them all and keeps its own. The
        Kafka source's records are staged as landing rows, a file per
        partition: partition ``n`` is share ``n``.
        """
        kafka = self._config.kafka
        if kafka is None:
            newest, files = sources.landed_files(pushes)
            count = int(self._spark.conf.get("spark.sql.shuffle.partitions") or 1)
            return [files] * count, True, _aware(newest) if newest else None
        count = sources.batch_partitions(self._config.checkpoint_path, batch_id, kafka.topic)
        staging = self._store.staging_path("records", batch_id)
        self._store.clear(staging)
        rows = passes.stage_records(pushes, staging).collect()
        by_share: list[list[str]] = [[] for _ in range(count)]
        for row in rows:
            if row["kind"] == "records":
                by_share[row["share"]].append(row["path"])
        return by_share, False, _latest(*(row["max_received_at"] for row in rows))

    def _share_inputs(
        self, by_share: list[list[str]], filtered: bool, batch_id: int
    ) -> list[ShareInput]:
        """What each share's task reads: its pushes, and its carried state."""
        count = len(by_share)
        state_by_share: dict[str, dict[int, list[str]] | None] = {}
        everything: dict[str, list[str]] = {}
        for name, tag, _ in _STATE:
            everything[tag] = self._store.state_files(name, batch_id)
            state_by_share[tag] = share_files(everything[tag], count)
        resharded = any(found is None for found in state_by_share.values())
        if resharded and not filtered and any(everything.values()):
            raise ConfigurationError(
                f"the topic now has {count} partitions: the pipeline's state is kept by "
                "partition, so the partition count of its topic must not change "
                "(start again with a new checkpoint and tables)"
            )
        inputs = []
        for share in range(count):
            state = {
                tag: tuple(everything[tag] if resharded else (found or {}).get(share, []))
                for tag, found in state_by_share.items()
            }
            inputs.append(ShareInput(tuple(by_share[share]), filtered, state, resharded))
        return inputs

    def _progress(self, batch_id: int) -> tuple[datetime | None, datetime | None]:
        """The event-time high-water mark and the newest push, as the previous batch left them."""
        rows = self._store.read_state_table("progress", batch_id, PROGRESS_ARROW).to_pylist()
        if not rows:
            return None, None
        return rows[0]["max_event_time"], rows[0]["max_received_at"]

    def _write_progress(
        self, highest: datetime | None, received: datetime | None, batch_id: int
    ) -> None:
        rows = [(highest, received)] if highest is not None or received is not None else []
        table = pa.Table.from_arrays(
            [
                pa.array([_micros_or_none(row[index]) for row in rows], pa.int64()).cast(f.type)
                for index, f in enumerate(PROGRESS_ARROW)
            ],
            schema=PROGRESS_ARROW,
        )
        self._store.write_state_table(table, "progress", batch_id)

    def _announce(self, lines: Sequence[str], batch_id: int) -> None:
        """Announce the batch's alert events once (a replayed batch must not do it again)."""
        marker = f"_state/notified/{batch_id:012d}"
        if lines and not self._store.exists(marker):
            self._notifier.notify_lines(sorted(lines))
            self._store.mark(marker)


def _by_kind(rows: Sequence[Row]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for row in rows:
        if row["path"] is not None:
            found.setdefault(row["kind"], []).append(row["path"])
    return found


def _latest(*moments: datetime | None) -> datetime | None:
    return max((_aware(m) for m in moments if m is not None), default=None)


def _aware(moment: datetime) -> datetime:
    """A naive datetime is local time, as PySpark returns them."""
    return moment if moment.tzinfo is not None else moment.astimezone()


def _minus(moment: datetime | None, seconds: int) -> int | None:
    """``moment`` less ``seconds``, in µs since the epoch (None stays None)."""
    return None if moment is None else _micros_or_none(moment - timedelta(seconds=seconds))


def _micros_or_none(moment: datetime | None) -> int | None:
    if moment is None:
        return None
    return (_aware(moment) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def _absolute(path: str) -> str:
    """A local path made absolute (Spark and pyarrow must agree on it); URIs as they are."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", path):
        return path
    return os.path.abspath(path)
