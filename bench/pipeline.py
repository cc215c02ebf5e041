"""Benchmark: `pipeline run` from landed files and from a Kafka topic, against the core alone.

    .venv/bin/python bench/pipeline.py [--points 5000000] [--master local[*]] [--rounds 3]
                                       [--partitions N] [--conf KEY=VALUE] [--decoders]
                                       [--no-topic]

1. Lands pushes of librdkafka's shape (a producer with per-broker latency
   copies: 18 data points per push with 5 brokers) following docs/landing.md,
   until at least ``--points`` data points are landed.
2. Unless ``--no-topic``: starts Apache Kafka 4.4 (``peers.kafka``) and produces
   the same pushes to a topic (as many partitions as the master has cores) as
   the topic exporter's records.
3. Then, ``--rounds`` times, interleaved (each round starts with the next of
   the three, so a change of the machine's load falls on all of them):

   * the core alone over the landed files, with no Spark: as many processes
     as Spark has cores, each running the very function the job's tasks run
     (``spark.tasks.pass_share``: read the landed files with pyarrow, keep one
     share of the instances, every rule, and the Parquet writing);
   * the pipeline job (the code behind ``clientmetrics pipeline run``) over
     the landed files, into fresh tables;
   * the same job with ``--source kafka`` over the topic.

   What is left between a pipeline and the core is Spark's: the streaming
   query, its jobs, getting the records out of the JVM, publishing.

Prints each run, then the medians, the points per second and each pipeline's
ratio to the core alone (of the medians, and per round). ``--decoders`` also
times the pure decoders (columnar ptars + Arrow compute against upb protobuf
+ a Python loop).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the landed pushes are the tests' (tests/synthetic.py)
sys.path.insert(0, str(ROOT / "bench"))

from cpu import tree_cpu  # noqa: E402
from tests.synthetic import (  # noqa: E402
    Push,
    land,
    points_per_producer_payload,
    producer_payload,
)

BROKERS = (1, 2, 3, 4, 5)
PUSHES_PER_FILE = 20_000
T0_US = 1_795_300_000_000_000


def land_pushes(data: Path, points: int, clients: int) -> int:
    """Land enough pushes for ``points`` data points; return the number of points landed."""
    per_push = points_per_producer_payload(len(BROKERS))
    pushes_needed = -(-points // per_push)
    instances = [str(uuid.uuid4()) for _ in range(clients)]
    batch: list[Push] = []
    landed = 0
    for index in range(pushes_needed):
        step, client = divmod(index, clients)
        at_us = T0_US + step * 5_000_000 + client * 1000
        latency = 6000.0 if client == 0 else None
        payload = producer_payload(at_us * 1000, step, BROKERS, latency=latency)
        batch.append(Push(at_us, instances[client], payload, client_id=f"app-{client}"))
        if len(batch) == PUSHES_PER_FILE:
            land(data, batch)
            landed += len(batch)
            batch = []
    if batch:
        land(data, batch)
        landed += len(batch)
    return landed * per_push


def _core_task(args: tuple[list[str], int, int, object]) -> int:
    """One process of the core alone: its share of the instances (``spark.tasks.pass_share``)."""
    from clientmetrics.pipeline.spark.tasks import ShareInput, pass_share

    landed, share, shares, plan = args
    given = ShareInput(tuple(landed), True, {}, False)
    manifest = pass_share(given, plan, share, shares, 0)  # type: ignore[arg-type]
    kinds = manifest.column(0).to_pylist()
    counts = manifest.column(2).to_pylist()
    return sum(count for kind, count in zip(kinds, counts, strict=True) if kind == "points")


def task_slots(master: str) -> int:
    """How many tasks a local master runs at once (its cores)."""
    import re

    found = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master)
    if found is None:
        raise SystemExit("the bench compares against the core on this machine: use a local master")
    threads = found.group(1) or "1"
    return (os.cpu_count() or 1) if threads == "*" else int(threads)


def _one_thread() -> None:
    pa.set_cpu_count(1)


class CoreAlone:
    """The core over the landed files on ``cores`` processes, no Spark (a warm process pool)."""

    def __init__(self, work: Path, cores: int, rules: object) -> None:
        import multiprocessing

        from clientmetrics.pipeline.core.batch import PassPlan

        self._staging = work / "core-alone"
        self._plan = PassPlan(staging=str(self._staging), window_seconds=60, rules=rules)  # type: ignore[arg-type]
        self._landed = sorted(str(p) for p in (work / "landing" / "pushes").rglob("*.parquet"))
        self._cores = cores
        # One pyarrow thread a process, as Spark gives its Python workers
        # (OMP_NUM_THREADS = spark.task.cpus): the same function on the same cores.
        self._pool = multiprocessing.get_context("spawn").Pool(cores, _one_thread)
        # Start the processes and warm their imports on one file.
        self._pool.map(_core_task, [(self._landed[:1], k, cores, self._plan) for k in range(cores)])
        shutil.rmtree(self._staging, ignore_errors=True)

    def run(self) -> tuple[int, float]:
        """Points and seconds of one run over every landed file."""
        jobs = [(self._landed, k, self._cores, self._plan) for k in range(self._cores)]
        started = time.perf_counter()
        points = sum(self._pool.map(_core_task, jobs))
        seconds = time.perf_counter() - started
        shutil.rmtree(self._staging, ignore_errors=True)
        return points, seconds

    def close(self) -> None:
        self._pool.close()
        self._pool.join()


def _start_python_workers(spark: SparkSession) -> None:
    """A tiny Arrow job on every core: Spark starts its Python workers once, then reuses them."""
    cores = spark.sparkContext.defaultParallelism

    def touch(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import clientmetrics.pipeline.spark.tasks  # noqa: F401  (what the job's workers import)

        yield from batches

    spark.range(cores, numPartitions=cores).mapInArrow(touch, "id long").collect()


def bench_decoders(payload_count: int = 20_000) -> None:
    """Pure decode throughput: columnar (kept) against upb + a Python loop (the baseline)."""
    from opentelemetry.proto.metrics.v1 import metrics_pb2

    from clientmetrics.telemetry.otlp_arrow import decode_points

    payloads = [producer_payload((T0_US + i) * 1000, i, BROKERS) for i in range(payload_count)]
    array = pa.array(payloads, pa.binary())
    started = time.perf_counter()
    points = decode_points(array).points.num_rows
    columnar = points / (time.perf_counter() - started)
    started = time.perf_counter()
    rows = []
    for row, payload in enumerate(payloads):
        data = metrics_pb2.MetricsData.FromString(payload)
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    kind = metric.WhichOneof("data")
                    for point in getattr(metric, kind).data_points:
                        rows.append(
                            (
                                row,
                                metric.name,
                                kind,
                                point.time_unix_nano,
                                point.as_double,
                                {kv.key: str(kv.value.int_value) for kv in point.attributes},
                            )
                        )
    loop = len(rows) / (time.perf_counter() - started)
    print(
        f"decode, 1 core: columnar {columnar:,.0f} points/s; upb + Python loop "
        f"{loop:,.0f} points/s ({columnar / loop:.1f}x)"
    )


class Topic:
    """Apache Kafka 4.4 holding the landed pushes as the topic exporter's records."""

    def __init__(self, work: Path, partitions: int) -> None:
        import pyarrow.parquet as pq
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
        from peers.kafka import KafkaBroker
        from tests.pipeline.topic_records import topic_records

        self.broker = KafkaBroker(work / "kafka").start()
        try:
            config = self.broker.client_config()
            admin = AdminClient(dict(config))
            admin.create_topics([NewTopic("bench", partitions, 1)])["bench"].result(30)
            # No telemetry: the bench's producer is not one of the measured clients.
            producer = Producer(
                {**config, "linger.ms": 50, "compression.type": "lz4", "enable.metrics.push": False}
            )
            started = time.perf_counter()
            for path in sorted((work / "landing" / "pushes").rglob("*.parquet")):
                for key, value, headers in topic_records(pq.read_table(path)):
                    while True:
                        try:
                            producer.produce("bench", value, key, headers=list(headers))
                            break
                        except BufferError:
                            producer.poll(0.1)
            assert producer.flush(120) == 0
            del producer
        except BaseException:
            self.broker.stop()
            raise
        seconds = time.perf_counter() - started
        print(f"produced to a {partitions}-partition topic in {seconds:.1f} s")

    def stop(self) -> None:
        self.broker.stop()


def run_job(spark: SparkSession, config: object, points: int, label: str) -> float:
    """Time ``pipeline run`` with ``config`` over fresh tables; check every point is written."""
    from clientmetrics.pipeline.jobs.job import PipelineJob

    for path in (config.output_path, config.checkpoint_path):  # type: ignore[attr-defined]
        shutil.rmtree(path, ignore_errors=True)
    Path(config.alert_sink).unlink(missing_ok=True)  # type: ignore[attr-defined]
    jvm = tree_cpu(spark._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]
    started = time.perf_counter()
    job = PipelineJob(spark, config)  # type: ignore[arg-type]
    query = job.start(available_now=True)
    query.awaitTermination()
    seconds = time.perf_counter() - started
    jvm = tree_cpu(spark._jvm.java.lang.ProcessHandle.current().pid()) - jvm  # type: ignore[union-attr]
    stages = ", ".join(f"{name} {secs:.1f}" for name, secs in job.stage_seconds.items())
    spark_ms: dict[str, int] = {}
    for progress in query.recentProgress:
        for name, ms in progress["durationMs"].items():
            spark_ms[name] = spark_ms.get(name, 0) + ms
    streaming = ", ".join(f"{name} {ms / 1000:.1f}" for name, ms in sorted(spark_ms.items()))
    print(
        f"  {label}: {seconds:.1f} s (job: {stages}; Spark's progress: {streaming}; "
        f"JVM CPU {jvm:.1f} s)"
    )
    written = spark.read.parquet(f"{config.output_path}/points").count()  # type: ignore[attr-defined]
    assert written == points, (written, points)
    return seconds


def _load() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 1)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=5_000_000)
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--rounds", type=int, default=3, help="repeat the three, interleaved")
    parser.add_argument("--partitions", type=int, default=None, help="topic partitions (cores)")
    parser.add_argument("--conf", action="append", default=[], help="extra Spark KEY=VALUE")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--decoders", action="store_true")
    parser.add_argument("--no-topic", action="store_true", help="skip the Kafka source")
    args = parser.parse_args()
    if args.decoders:
        bench_decoders()

    import dataclasses

    from clientmetrics.pipeline.core.rules import parse_rules
    from clientmetrics.pipeline.jobs.job import PipelineConfig
    from clientmetrics.pipeline.jobs.sources import KafkaSource
    from clientmetrics.pipeline.spark.connector import with_connector
    from clientmetrics.pipeline.spark.session import build_session

    work = args.workdir or Path(tempfile.mkdtemp(prefix="cm-bench-"))
    shutil.rmtree(work, ignore_errors=True)
    started = time.perf_counter()
    points = land_pushes(work, args.points, args.clients)
    print(f"landed {points:,} data points in {time.perf_counter() - started:.1f} s ({work})")
    cores = task_slots(args.master)
    rules = parse_rules(
        {
            "rule": [
                {
                    "name": "slow",
                    "metric": "org.apache.kafka.producer.node.request.latency.",
                    "condition": "exceeded 5000 ms for more than 180 seconds",
                }
            ]
        }
    )
    conf = {"spark.ui.enabled": "false", **dict(item.split("=", 1) for item in args.conf)}
    topic = None if args.no_topic else Topic(work, args.partitions or cores)
    try:
        spark = build_session(args.master, conf=conf if args.no_topic else with_connector(conf))
        spark.sparkContext.setLogLevel("ERROR")
        # Warm the JVM and start the Python workers (a tiny Arrow job), so that
        # neither side's timing includes process start-up.
        spark.range(1000).write.format("noop").mode("overwrite").save()
        _start_python_workers(spark)
        core = CoreAlone(work, cores, rules.rules)
        landing = PipelineConfig(
            input_path=str(work / "landing" / "pushes"),
            output_path=str(work / "tables"),
            checkpoint_path=str(work / "checkpoints"),
            rules=rules,
            alert_sink=str(work / "alerts.jsonl"),
        )
        kafka = None
        if topic is not None:
            kafka = dataclasses.replace(
                landing,
                output_path=str(work / "tables-topic"),
                checkpoint_path=str(work / "checkpoints-topic"),
                alert_sink=str(work / "alerts-topic.jsonl"),
                kafka=KafkaSource(topic.broker.bootstrap, "bench"),
            )
        runs: dict[str, list[float]] = {"core": [], "landing": [], "kafka": []}

        def run_core() -> None:
            found, seconds = core.run()
            assert found == points, (found, points)
            print(f"  core alone: {seconds:.1f} s")
            runs["core"].append(seconds)

        steps: list[Callable[[], None]] = [
            run_core,
            lambda: runs["landing"].append(run_job(spark, landing, points, "landing")),
        ]
        if kafka is not None:
            steps.append(lambda: runs["kafka"].append(run_job(spark, kafka, points, "kafka")))
        for round_ in range(args.rounds):
            print(f"round {round_ + 1} (load {_load()}):")
            for step in steps[round_ % len(steps) :] + steps[: round_ % len(steps)]:
                step()
        core.close()
        spark.stop()
    finally:
        if topic is not None:
            topic.stop()
    _report(runs, points, cores, args.master)
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


def _report(runs: dict[str, list[float]], points: int, cores: int, master: str) -> None:
    import statistics

    core = statistics.median(runs["core"])
    print(f"medians of {len(runs['core'])} interleaved rounds, {points:,} points:")
    print(
        f"  core alone ({cores} processes, no Spark): {core:.1f} s = {points / core:,.0f} points/s"
    )
    for name in ("landing", "kafka"):
        if not runs[name]:
            continue
        seconds = statistics.median(runs[name])
        per_round = [c / s for c, s in zip(runs["core"], runs[name], strict=True)]
        print(
            f"  pipeline run ({master}) from {name}: {seconds:.1f} s = "
            f"{points / seconds:,.0f} points/s; {core / seconds:.3f} of the core alone "
            f"(per round: {', '.join(f'{r:.3f}' for r in per_round)})"
        )


if __name__ == "__main__":
    main()
