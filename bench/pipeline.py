"""Benchmark: `pipeline run` end to end against the core alone, in the same run.

    .venv/bin/python bench/pipeline.py [--points 5000000] [--master local[*]] [--decoders]
                                       [--no-topic]

1. Lands pushes of librdkafka's shape (a producer with per-broker latency
   copies: 18 data points per push with 5 brokers) following docs/landing.md,
   until at least ``--points`` data points are landed.
2. Runs the pipeline job (the code behind ``clientmetrics pipeline run``) over
   them: decode, normalise, points / client_windows / clients / alerts.
3. Runs the core alone over the same landed files, with no Spark: as many
   processes as Spark has cores, each running the very function the job's
   tasks run (``spark.files.pass_share``: read the landed files with pyarrow,
   keep one share of the instances, every rule, and the Parquet writing).
   What is left between the two is Spark's: the streaming query, the jobs of
   a micro-batch, splitting the windows by the watermark, publishing.

4. Unless ``--no-topic``: starts Apache Kafka 4.4 (``peers.kafka``), produces the
   same pushes to a topic of twice the cores' partitions as the topic exporter's
   records, and runs the job with ``--source kafka`` over it.

Prints every rate and each pipeline's ratio to the core alone. ``--decoders``
also times the pure decoders (columnar ptars + Arrow compute against upb
protobuf + a Python loop).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the landed pushes are the tests' (tests/synthetic.py)

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
    """One process of the core alone: its share of the instances (``spark.files.pass_share``)."""
    from clientmetrics.pipeline.spark.files import ShareInput, pass_share

    landed, share, shares, plan = args
    given = ShareInput(tuple(landed), True, {}, False)
    manifest = pass_share(given, plan, share, shares, 0)  # type: ignore[arg-type]
    kinds = manifest.column(0).to_pylist()
    counts = manifest.column(2).to_pylist()
    return sum(count for kind, count in zip(kinds, counts, strict=True) if kind == "points")


def task_slots(master: str) -> int:
    """How many tasks a local master runs at once (its cores)."""
    import os
    import re

    found = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master)
    if found is None:
        raise SystemExit("the bench compares against the core on this machine: use a local master")
    threads = found.group(1) or "1"
    return (os.cpu_count() or 1) if threads == "*" else int(threads)


def core_alone(work: Path, cores: int, rules: object) -> tuple[int, float]:
    """The core over the landed files on ``cores`` processes, no Spark: points, seconds."""
    import multiprocessing

    from clientmetrics.pipeline.core.batch import PassPlan

    staging = work / "core-alone"
    shutil.rmtree(staging, ignore_errors=True)
    plan = PassPlan(staging=str(staging), window_seconds=60, rules=rules)  # type: ignore[arg-type]
    landed = sorted(str(path) for path in (work / "landing" / "pushes").rglob("*.parquet"))
    jobs = [(landed, k, cores, plan) for k in range(cores)]
    context = multiprocessing.get_context("spawn")
    with context.Pool(cores) as pool:
        # Start the processes and warm their imports on one file.
        pool.map(_core_task, [(landed[:1], k, cores, plan) for k in range(cores)])
        started = time.perf_counter()
        points = sum(pool.map(_core_task, jobs))
        seconds = time.perf_counter() - started
    shutil.rmtree(staging, ignore_errors=True)
    return points, seconds


def _start_python_workers(spark: SparkSession) -> None:
    """A tiny Arrow job on every core: Spark starts its Python workers once, then reuses them."""
    cores = spark.sparkContext.defaultParallelism

    def touch(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import clientmetrics.pipeline.spark.files  # noqa: F401  (what the job's workers import)

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


def run_from_topic(
    spark: SparkSession, work: Path, landed: object, cores: int, points: int
) -> float:
    """Produce the landed pushes to a topic on Kafka 4.4 and time ``run`` over it."""
    import dataclasses

    import pyarrow.parquet as pq
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from peers.kafka import KafkaBroker
    from tests.pipeline.topic_records import topic_records

    from clientmetrics.pipeline.jobs.job import PipelineJob
    from clientmetrics.pipeline.jobs.sources import KafkaSource

    broker = KafkaBroker(work / "kafka").start()
    try:
        partitions = 2 * cores
        admin = AdminClient(broker.client_config())
        admin.create_topics([NewTopic("bench", partitions, 1)])["bench"].result(30)
        producer = Producer({**broker.client_config(), "linger.ms": 50, "compression.type": "lz4"})
        started = time.perf_counter()
        for path in sorted((work / "landing" / "pushes").rglob("*.parquet")):
            for key, value, headers in topic_records(pq.read_table(path)):
                while True:
                    try:
                        producer.produce("bench", value, key, headers=headers)
                        break
                    except BufferError:
                        producer.poll(0.1)
            producer.flush(120)
        print(
            f"produced to a {partitions}-partition topic in {time.perf_counter() - started:.1f} s"
        )
        config = dataclasses.replace(
            landed,  # type: ignore[type-var]
            output_path=str(work / "tables-topic"),
            checkpoint_path=str(work / "checkpoints-topic"),
            alert_sink=str(work / "alerts-topic.jsonl"),
            kafka=KafkaSource(broker.bootstrap, "bench"),
        )
        started = time.perf_counter()
        job = PipelineJob(spark, config)
        job.run()
        seconds = time.perf_counter() - started
        stages = ", ".join(f"{name} {secs:.1f} s" for name, secs in job.stage_seconds.items())
        print(f"stages (kafka): {stages}")
        written = spark.read.parquet(str(work / "tables-topic" / "points")).count()
        assert written == points, (written, points)
        return seconds
    finally:
        broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=5_000_000)
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--decoders", action="store_true")
    parser.add_argument("--no-topic", action="store_true", help="skip the Kafka source")
    args = parser.parse_args()
    if args.decoders:
        bench_decoders()

    from clientmetrics.pipeline.core.rules import parse_rules
    from clientmetrics.pipeline.jobs.job import PipelineConfig, PipelineJob
    from clientmetrics.pipeline.spark.connector import with_connector
    from clientmetrics.pipeline.spark.session import build_session

    work = args.workdir or Path(tempfile.mkdtemp(prefix="cm-bench-"))
    shutil.rmtree(work, ignore_errors=True)
    started = time.perf_counter()
    points = land_pushes(work, args.points, args.clients)
    print(f"landed {points:,} data points in {time.perf_counter() - started:.1f} s ({work})")

    conf = {"spark.ui.enabled": "false"}
    if not args.no_topic:
        conf = with_connector(conf)
    spark = build_session(args.master, conf=conf)
    spark.sparkContext.setLogLevel("ERROR")
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
    config = PipelineConfig(
        input_path=str(work / "landing" / "pushes"),
        output_path=str(work / "tables"),
        checkpoint_path=str(work / "checkpoints"),
        rules=rules,
        alert_sink=str(work / "alerts.jsonl"),
    )
    # Warm the JVM and start the Python workers (a tiny Arrow job), so that
    # neither side's timing includes process start-up.
    spark.range(1000).write.format("noop").mode("overwrite").save()
    started = time.perf_counter()
    _start_python_workers(spark)
    print(f"python workers started in {time.perf_counter() - started:.1f} s (not timed below)")
    started = time.perf_counter()
    job = PipelineJob(spark, config)
    job.run()
    pipeline_seconds = time.perf_counter() - started
    stages = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in job.stage_seconds.items())
    print(f"stages (landing): {stages}")
    written = spark.read.parquet(str(work / "tables" / "points")).count()
    assert written == points, (written, points)
    topic_seconds = None if args.no_topic else run_from_topic(spark, work, config, cores, points)
    spark.stop()

    core_points, core_seconds = core_alone(work, cores, rules.rules)
    assert core_points == points, (core_points, points)

    pipeline_rate = points / pipeline_seconds
    core_rate = points / core_seconds
    print(
        f"pipeline run ({args.master}, {cores} cores): {points:,} points in "
        f"{pipeline_seconds:.1f} s = {pipeline_rate:,.0f} points/s"
    )
    print(
        f"core alone (pyarrow, {cores} processes, no Spark): {points:,} points in "
        f"{core_seconds:.1f} s = {core_rate:,.0f} points/s"
    )
    print(f"ratio (landing): {pipeline_rate / core_rate:.3f} of the core alone")
    if topic_seconds is not None:
        topic_rate = points / topic_seconds
        print(
            f"pipeline run --source kafka: {points:,} points in {topic_seconds:.1f} s = "
            f"{topic_rate:,.0f} points/s; ratio: {topic_rate / core_rate:.3f} of the core alone"
        )
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
