"""Experiment: what Spark's real-time mode (``trigger(realTime=...)``) takes on the Kafka source.

    .venv/bin/python bench/realtime_mode.py [--master local[2]] [--duration "5 seconds"]
        [--case NAME ...] [--min-batch-duration 1s] [--no-allowlist]

Starts Apache Kafka 4.4 (``peers.kafka``), writes records to a 2-partition topic
and, on one session with the connector jars the project pins
(``spark.connector``), starts one query per case below with
``trigger(realTime=…)`` on the pipeline's own Kafka source
(``jobs.sources.kafka_stream``): each case is a sink or an operator the alert
path would need. For each it prints whether Spark accepted it, the first line
of its refusal (at ``start()`` or as the query's exception), and for a query
that runs, the seconds from a record's production to the sink seeing it.

Cases:

* ``foreachBatch`` — the pipeline's sink today (``PipelineJob.process_batch``);
* ``foreach`` — a Python ``ForeachWriter`` per row, the only arbitrary sink;
* ``mapInArrow+foreach`` — a stateless Arrow step (where the rules could run)
  feeding a ``ForeachWriter``;
* ``memory`` / ``console`` / ``kafka`` sinks of a plain projection;
* ``groupBy.count`` (update mode) — Spark's own state;
* ``applyInPandasWithState`` and ``transformWithStateInPandas`` — per-key Python
  state, what "for more than N seconds" per client needs.

``--min-batch-duration`` lowers Spark's floor for the real-time batch
(``spark.sql.streaming.realTimeMode.minBatchDuration``, 5 s by default);
``--no-allowlist`` turns off its operator and sink allowlist check, which Spark
says is at one's own risk (to see what runs past it). The findings are in
docs/pipeline.md ("Real-time mode").
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOPIC = "rtm_probe"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0][:400] if lines else type(exc).__name__


class Seen:
    """Rows a ``ForeachWriter`` saw, with when (driver-side file: the writer runs in a worker)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def writer(self) -> Any:
        path = str(self.path)

        class Writer:
            def open(self, partition_id: int, epoch_id: int) -> bool:
                return True

            def process(self, row: Any) -> None:
                with open(path, "a", encoding="utf-8") as out:
                    out.write(f"{row['value_text']}\t{time.time()}\n")

            def close(self, error: BaseException | None) -> None:
                pass

        return Writer()

    def latencies(self) -> list[float]:
        """Produce → writer seconds of the records produced after the writer saw its first
        row (the backlog since ``earliest`` the first batch reads is not latency)."""
        if not self.path.exists():
            return []
        pairs = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            sent, _, seen = line.partition("\t")
            try:
                pairs.append((float(sent), float(seen)))
            except ValueError:
                continue
        if not pairs:
            return []
        first_seen = min(seen for _, seen in pairs)
        return [seen - sent for sent, seen in pairs if sent > first_seen]


def _produce(bootstrap: str, stop: threading.Event) -> None:
    """A record every 100 ms, its value the time it was produced."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    count = 0
    while not stop.is_set():
        producer.produce(TOPIC, key=f"client-{count % 4}", value=repr(time.time()))
        producer.poll(0)
        count += 1
        time.sleep(0.1)
    producer.flush(5)


def _cases(spark: Any, bootstrap: str, records: Any, seen: Seen) -> dict[str, Callable[[Any], Any]]:
    """Each case: from a writer's configuration to a started query (or a refusal)."""
    from pyspark.sql import functions as F

    text = records.select(
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value_text"),
        "partition",
        "offset",
    )

    def arrow_step(batches: Iterator[Any]) -> Iterator[Any]:
        yield from batches

    def pandas_state(key: Any, frames: Any, state: Any) -> Any:
        import pandas as pd

        total = (state.get[0] if state.exists else 0) + sum(len(f) for f in frames)
        state.update((total,))
        yield pd.DataFrame({"key": [key[0]], "count": [total]})

    def foreach_batch(frame: Any, batch_id: int) -> None:
        frame.count()

    def transform_with_state(writer: Any) -> Any:
        from pyspark.sql.streaming.stateful_processor import StatefulProcessor

        class Counter(StatefulProcessor):  # type: ignore[misc]
            def init(self, handle: Any) -> None:
                self.handle = handle

            def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
                import pandas as pd

                yield pd.DataFrame({"key": [key[0]], "count": [sum(len(r) for r in rows)]})

            def close(self) -> None:
                pass

        # transformWithState keeps its state in RocksDB only.
        spark.conf.set(
            "spark.sql.streaming.stateStore.providerClass",
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        )
        counted = text.groupBy("key").transformWithStateInPandas(
            Counter(), "key string, count long", "Update", "None"
        )
        return writer(counted).foreach(seen.writer())

    return {
        "foreachBatch": lambda w: w(text).foreachBatch(foreach_batch),
        "foreach": lambda w: w(text).foreach(seen.writer()),
        "mapInArrow+foreach": lambda w: w(text.mapInArrow(arrow_step, text.schema)).foreach(
            seen.writer()
        ),
        "memory": lambda w: w(text).format("memory").queryName("rtm_memory"),
        "console": lambda w: w(text).format("console"),
        "kafka sink": lambda w: (
            w(text.select(F.col("value_text").alias("value")))
            .format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", TOPIC + "_out")
        ),
        "groupBy.count (update)": lambda w: w(text.groupBy("key").count()).format("console"),
        "applyInPandasWithState": lambda w: w(
            text.groupBy("key").applyInPandasWithState(
                pandas_state, "key string, count long", "count long", "Update", "NoTimeout"
            )
        ).format("console"),
        "transformWithStateInPandas": transform_with_state,
    }


def _try(name: str, build: Callable[[Any], Any], work: Path, duration: str, seen: Seen) -> str:
    def writer(frame: Any) -> Any:
        return (
            frame.writeStream.outputMode("update")
            .option("checkpointLocation", str(work / "checkpoints" / name.replace(" ", "_")))
            .trigger(realTime=duration)
        )

    seen.path.unlink(missing_ok=True)
    try:
        query = build(writer).start()
    except Exception as exc:
        return f"refused at start(): {_first_line(exc)}"
    deadline = time.time() + 25
    try:
        while time.time() < deadline:
            if query.exception() is not None:
                return f"refused while running: {_first_line(query.exception())}"
            if not query.isActive:
                return "stopped without an exception"
            if len(seen.latencies()) >= 20:
                break
            time.sleep(0.5)
    finally:
        try:
            query.stop()
        except Exception as exc:
            return f"stop failed: {_first_line(exc)}"
    lat = sorted(seen.latencies())
    if not lat:
        rows = sum(p.get("numInputRows", 0) for p in query.recentProgress)
        return f"accepted: ran 25 s, {rows} input rows in its progress (no Python writer to time)"
    mid, p99 = lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    return f"ran: {len(lat)} rows, produce -> writer median {mid:.3f} s, p99 {p99:.3f} s"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--duration", default="5 seconds", help="the real-time batch duration")
    parser.add_argument("--case", action="append", help="only these cases")
    parser.add_argument(
        "--min-batch-duration", default=None,
        help="spark.sql.streaming.realTimeMode.minBatchDuration (Spark's default: 5 s)",
    )  # fmt: skip
    parser.add_argument(
        "--no-allowlist", action="store_true",
        help="also set spark.sql.streaming.realTimeMode.allowlistCheck=false (at one's own risk)",
    )  # fmt: skip
    args = parser.parse_args()

    from confluent_kafka.admin import AdminClient, NewTopic
    from peers.kafka import KafkaBroker

    from clientmetrics.pipeline.jobs.sources import KafkaSource, kafka_stream
    from clientmetrics.pipeline.spark.connector import connector_jars, with_connector
    from clientmetrics.pipeline.spark.session import build_session

    work = Path(tempfile.mkdtemp(prefix="cm-rtm-"))
    broker = KafkaBroker(work / "kafka").start()
    stop = threading.Event()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for topic in (TOPIC, TOPIC + "_out"):
            admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        del admin
        producer = threading.Thread(target=_produce, args=(broker.bootstrap, stop), daemon=True)
        producer.start()
        conf = with_connector({"spark.ui.enabled": "false"})
        spark = build_session(args.master, conf=conf)
        spark.sparkContext.setLogLevel("OFF")
        if args.min_batch_duration:
            spark.conf.set(
                "spark.sql.streaming.realTimeMode.minBatchDuration", args.min_batch_duration
            )
        if args.no_allowlist:
            spark.conf.set("spark.sql.streaming.realTimeMode.allowlistCheck", "false")
        import pyspark

        print(f"pyspark {pyspark.__version__}; connector jars:")
        for jar in connector_jars():
            print(f"  {jar.name}")
        records = kafka_stream(spark, KafkaSource(broker.bootstrap, TOPIC))
        seen = Seen(work / "seen.tsv")
        for name, build in _cases(spark, broker.bootstrap, records, seen).items():
            if args.case and name not in args.case:
                continue
            print(f"{name}: {_try(name, build, work, args.duration, seen)}", flush=True)
        spark.stop()
    finally:
        stop.set()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
