"""The pipeline job: pushes in (landed files or a Kafka topic), the tables out.

``run`` and ``stream`` are the same Structured Streaming query with one
checkpoint (``sources``): ``run`` uses ``Trigger.AvailableNow`` (everything
not yet processed, then stop), ``stream`` a processing-time trigger. The
checkpoint holds what was read (the landing directory's processed files, or
the topic's offsets), so a second ``run`` adds nothing and ``stream`` resumes
where ``run`` (or a killed ``stream``) stopped.

Each micro-batch goes through ``process_batch``: the core's pass over whole
instances in one Spark job (``spark.passes``), a second only where a share
needs one (a Kafka partition with no record this batch, or clients judged
by an earlier newest push than the batch's), then publishing what they wrote. State
between batches (series cumulative values, open windows, open alert
episodes, the client inventory, the progress) is kept per batch id, which
makes a replayed batch produce exactly what the first try would have (see
``storage``).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
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
from clientmetrics.pipeline.jobs.cohorts import keep_cohorts, read_cohorts
from clientmetrics.pipeline.jobs.notify import AlertNotifier
from clientmetrics.pipeline.jobs.reach import topic_partitions
from clientmetrics.pipeline.jobs.sources import KafkaSource
from clientmetrics.pipeline.spark import passes
from clientmetrics.pipeline.spark.files import absolute_location
from clientmetrics.pipeline.spark.storage import TableStore
from clientmetrics.pipeline.spark.tasks import ShareInput, rejected_counts, share_files

_log = structlog.get_logger(__name__)

#: Carried state: the store's name for it, its pass tag, and the pass's kind of rows for it.
_STATE = (
    ("series", "series", "series"),
    ("windows", "window", "windows"),
    ("alerts", "alert", "alert_state"),
    ("clients", "client", "inventory"),
    ("baselines", "baseline", "baselines"),
)
#: The tables a batch appends to, by the pass's kind of rows.
_APPENDED = ("points", "client_windows", "retired_clients", "alerts", "rejected")
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
            self._store = TableStore(absolute_location(config.output_path))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, ValueError) as exc:
            raise ValueError(f"cannot open the tables' location {config.output_path!r}") from exc
        self._notifier = AlertNotifier(
            config.alert_sink, config.rules.webhook, alertmanager=config.rules.alertmanager
        )
        #: Wall seconds per stage, summed over the batches this job has processed.
        self.stage_seconds: dict[str, float] = {}
        #: Micro-batches this job has processed.
        self.batches = 0
        #: Shares that needed the second job (``_follow_up``): ``idle`` and ``judged``.
        self.follow_ups: dict[str, int] = {"idle": 0, "judged": 0}
        #: Records and points left out (dead letters, ``core.rejects``), by reason.
        self.rejected: dict[str, int] = {}
        #: The topic's partitions, once counted (``_topic_partitions``).
        self._partitions: int | None = None
        #: Held while they are counted (the Kafka warm-up's thread may count them too).
        self._counting = threading.Lock()

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
        if not available_now:
            # While the query starts (the source's first offsets), not in its first batch;
            # first, so that building the stream (seconds on a cold JVM) overlaps it too.
            threading.Thread(target=self._warm, name="pipeline-warm-up", daemon=True).start()
            if config.kafka is not None:
                threading.Thread(
                    target=self._warm_kafka, args=(config.kafka,), name="pipeline-warm-kafka",
                    daemon=True,
                ).start()  # fmt: skip
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

    def _warm(self) -> None:
        started = time.perf_counter()
        try:
            passes.warm_workers(self._spark)
        except Exception as exc:  # best effort, on a thread of its own
            # A warm-up that fails costs only its time: the first batch starts the workers.
            # The session may be stopped under it (Ctrl-C during the start), which fails
            # in py4j, in pyspark or on a context already gone: never a traceback.
            _log.debug("pipeline warm-up failed", error=(str(exc).splitlines() or [""])[0])
            return
        _log.debug("pipeline warm-up", seconds=round(time.perf_counter() - started, 3))

    def _warm_kafka(self, kafka: KafkaSource) -> None:
        """Count the topic's partitions with Kafka's Java admin client while the query starts.

        The first batch then need not count them, and the driver's JVM has loaded
        and run the Kafka client classes the source's first offsets need (its
        admin client): seconds of a cold first batch, now beside the query's start.
        """
        started = time.perf_counter()
        try:
            count = sources.java_topic_partitions(self._spark, kafka)
        except Exception as exc:  # best effort, as ``_warm``: the first batch counts them
            _log.debug("pipeline kafka warm-up failed", error=(str(exc).splitlines() or [""])[0])
            return
        with self._counting:
            if self._partitions is None:
                self._partitions = count
        _log.debug("pipeline kafka warm-up", seconds=round(time.perf_counter() - started, 3))

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
            found = self._input(pushes)
        watermark = _minus(previous_max, config.lateness_seconds)
        plan = PassPlan(
            staging=store.staging_path("pass", batch_id),
            window_seconds=config.window_seconds,
            late_before_us=watermark,
            close_before_us=_NEVER if config.flush_windows else watermark,
            rules=config.rules.rules,
            # Each task moves it on to the newest push it reads (``spark.tasks``).
            as_of_us=_micros_or_none(previous_received),
            retire_before_us=_minus(previous_max, config.retention_seconds),
            cohorts=read_cohorts(store, config.rules, batch_id),
        )
        store.clear(plan.staging)
        with self._stage("pass", batch_id):
            inputs = self._share_inputs(found, batch_id)
            if config.kafka is None:
                rows = passes.run_share_pass(self._spark, inputs, plan).collect()
            else:
                rows = passes.run_records_pass(pushes, inputs, plan).collect()
            received = _latest(previous_received, *(row["max_received_at"] for row in rows))
        with self._stage("announce", batch_id):
            # The pass's alert events are final (a follow-up only adds its own): they
            # go out now, not after the follow-up job and the publishing.
            early = _events(rows)
            self._announce(early, batch_id)
        with self._stage("follow-up", batch_id):
            rows = self._follow_up(rows, inputs, replace(plan, as_of_us=_micros_or_none(received)))
        with self._stage("publish", batch_id):
            written = _by_kind(rows)
            published = {
                kind: store.publish(written.get(kind, []), kind, batch_id) for kind in _APPENDED
            }
            self._count_rejected(published["rejected"], batch_id)
            for name, _, kind in _STATE:
                store.adopt_state(written.get(kind, []), name, batch_id)
            store.replace_files(written.get("clients", []), "clients", batch_id)
            keep_cohorts(store, plan.cohorts, written.get("cohort_partials", []), batch_id)
            highest = _latest(previous_max, *(row["max_event_time"] for row in rows))
            self._write_progress(highest, received, batch_id)
            later = Counter(_events(rows))
            later.subtract(early)
            self._announce(list(later.elements()), batch_id, "follow-up")
        store.clear(plan.staging)
        self.batches += 1

    def _input(self, pushes: DataFrame) -> _BatchInput:
        """How many shares the pass has, and the landed files they read.

        Landed files hold every instance: each of the shares (as many as the
        session's default parallelism: its cores) reads its own row groups of
        every file (all of them where the count does not divide the files'
        ``LANDED_SHARES``) and keeps its own rows. The Kafka source's partition
        ``n`` is share ``n``.
        """
        if self._config.kafka is None:
            count = max(self._spark.sparkContext.defaultParallelism, 1)
            return _BatchInput(count, tuple(sources.landed_files(pushes)), True)
        return _BatchInput(self._topic_partitions(self._config.kafka), (), False)

    def _topic_partitions(self, kafka: KafkaSource) -> int:
        """The topic's partitions, counted once by its metadata: asked by the project's
        client (``reach.topic_partitions``), or by Kafka's Java admin client where the
        settings are ones only Java speaks (a JKS trust store, GSSAPI)."""
        with self._counting:
            if self._partitions is None:
                try:
                    self._partitions = topic_partitions(
                        kafka.bootstrap_servers, kafka.topic, kafka.properties
                    )
                except ConfigurationError:
                    self._partitions = sources.java_topic_partitions(self._spark, kafka)
            return self._partitions

    def _follow_up(self, rows: list[Row], inputs: list[ShareInput], plan: PassPlan) -> list[Row]:
        """The pass's manifests, completed by a second job where a share needs one.

        Each task judged its clients (``silent``, and the alerts of clients
        that went away) by the newest push it had read; ``plan``'s clock is
        the batch's. A share whose task saw an earlier one, and whose clients
        that clock would judge otherwise, is judged again; a share that had no
        task (a Kafka partition with no record this batch) runs its pass from
        its state. Landed files give every task the batch's newest push.
        """
        ran = {row["share"]: row for row in rows if row["kind"] == "progress"}
        idle = {share: given for share, given in enumerate(inputs) if share not in ran}
        judged = {}
        for share, done in ran.items():
            changes = _micros_or_none(done["clock_changes_at"])
            if changes is not None and plan.as_of_us is not None and plan.as_of_us >= changes:
                written = [row for row in rows if row["share"] == share]
                state = {
                    tag: tuple(row["path"] for row in written if row["kind"] == kind)
                    for tag, kind in (("client", "inventory"), ("alert", "alert_state"))
                }
                judged[share] = ShareInput((), False, state, False)
        self.follow_ups["idle"] += len(idle)
        self.follow_ups["judged"] += len(judged)
        if not idle and not judged:
            return rows
        more = passes.run_followup(self._spark, idle, judged, len(inputs), plan).collect()
        superseded = [
            row
            for row in rows
            if row["share"] in judged and row["kind"] in ("clients", "alert_state")
        ]
        return [row for row in rows if row not in superseded] + more

    def _share_inputs(self, found: _BatchInput, batch_id: int) -> list[ShareInput]:
        """What each share's task reads: its pushes (landed files), and its carried state."""
        count = found.count
        state_by_share: dict[str, dict[int, list[str]] | None] = {}
        everything: dict[str, list[str]] = {}
        for name, tag, _ in _STATE:
            everything[tag] = self._store.state_files(name, batch_id)
            state_by_share[tag] = share_files(everything[tag], count)
        resharded = any(found is None for found in state_by_share.values())
        if resharded and not found.filtered and any(everything.values()):
            raise ConfigurationError(
                f"the topic now has {count} partitions: the pipeline's state is kept by "
                "partition, so the partition count of its topic must not change "
                "(start again with a new checkpoint and tables)"
            )
        inputs = []
        for share in range(count):
            state = {
                tag: tuple(everything[tag] if resharded else (by_share or {}).get(share, []))
                for tag, by_share in state_by_share.items()
            }
            inputs.append(ShareInput(found.files, found.filtered, state, resharded))
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

    def _count_rejected(self, published: list[str], batch_id: int) -> None:
        """Add a batch's dead letters to ``rejected``, and say so in one line."""
        counts = rejected_counts(published)
        for reason, count in counts.items():
            self.rejected[reason] = self.rejected.get(reason, 0) + count
        if counts:
            _log.warning("pipeline skipped unusable input", batch=batch_id, rejected=counts)

    def _announce(self, lines: Sequence[str], batch_id: int, part: str = "") -> None:
        """Announce the batch's alert events once (a replayed batch must not do it again):
        those of its pass (``part`` empty), then those its follow-up job added."""
        marker = f"_state/notified/{batch_id:012d}" + (f"-{part}" if part else "")
        if lines and not self._store.exists(marker):
            self._notifier.notify_lines(sorted(lines))
            self._store.mark(marker)


@dataclass(frozen=True, slots=True)
class _BatchInput:
    """What the pass must know of a micro-batch before it runs."""

    #: How many shares the pass has (tasks; Kafka partitions).
    count: int
    #: Landed files every share reads (none for the Kafka source).
    files: tuple[str, ...]
    #: Whether the pushes a share reads hold other shares' too (landed files do).
    filtered: bool


def _events(rows: Sequence[Row]) -> list[str]:
    """The alert events (JSON lines) the manifests carry."""
    return [row["event"] for row in rows if row["kind"] == "alert_event"]


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


def trigger_active(query: StreamingQuery) -> bool:
    """Whether the query is inside a trigger (a batch): stopping it now cancels its jobs."""
    return bool(query.status.get("isTriggerActive"))
