"""Benchmark: push → alert latency through a Kafka topic (`pipeline stream --source kafka`).

    .venv/bin/python bench/alert_latency.py [--alerts 5] [--interval-ms 200] [--clients 20]
                                            [--partitions 2] [--master local[2]]
                                            [--trigger-seconds 0] [--profile DIR]
    .venv/bin/python bench/alert_latency.py --cold

1. Starts Apache Kafka 4.4 (``peers.kafka``) and a gateway (``clientmetrics
   serve``) whose topic exporter is required (a push is answered once the
   cluster has its record), landing off: the scalable path of docs/pipeline.md.
2. Streams from the topic as ``clientmetrics pipeline stream --source kafka
   --trigger-seconds 0`` does (the same ``PipelineJob``, in this process so that
   Spark's progress can be read), with one rule, the producer's node request
   latency "exceeded 5000 ms for more than 1 second", a JSON-lines sink and a
   webhook served here.
3. ``--clients`` healthy simulated clients (``clientmetrics simulate``'s) push
   every ``--interval-ms`` for the whole run; once the stream has processed
   their pushes for a while (warm), ``--alerts`` times one at a time an
   unhealthy simulated producer connects and pushes until its alert is
   announced.

For each alert it prints the seconds from the unhealthy client's first push
(the alert's ``started_at``: the event time of its first point, taken when
the push was sent) and from the push that fired it (``fired_at``) to the
alert's line in the sink and to the webhook's POST; and where they went: the
push interval and the rule's second, waiting for the trigger (from the
firing push to the start of the micro-batch that read it), Spark's own work
before the batch (``latestOffset``, the offset log), the batch's jobs and
publishing (``addBatch``: the summary job, the pass, publishing and the
announcement), from Spark's progress and the job's stage times. Then the
medians, and the slowest alert (the p99 of a run of fewer than 100 alerts).
All on this machine's wall clock. "Wait for the batch" runs to the end of
the batch's ``latestOffset`` (when it took its offsets), never below 0.

``--cold``: one alert from a cold start. The unhealthy client's first push comes
before the Spark session is built; it prints the first push → alert line, and in
it the Spark session's start and the first batch, then a timeline of the
job's start-up steps (the session, the query's start, the worker warm-up, the
first batch) from the first push.

Each alert is waited for up to ``--wait`` seconds (25, or 180 cold), never a
fixed time.

``--profile DIR``: Spark's UDF profiler over the pass's Python tasks, dumped
as pstats files (the tasks run slower under it: for where the time goes).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the gateway process helper is the tests' (tests/procs.py)

LATENCY = "org.apache.kafka.producer.node.request.latency.avg"
TOPIC = "otlp_metrics"


class Webhook:
    """An HTTP server that notes when each alert event's POST arrived."""

    def __init__(self) -> None:
        seen: dict[tuple[str, str], float] = {}
        self.seen = seen

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                arrived = time.time()
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                for event in json.loads(body):
                    seen.setdefault((event["alert_id"], event["status"]), arrived)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class SinkWatch:
    """Polls the JSON-lines sink and notes when each alert event's line appeared."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        offset = 0
        while not self._stop.is_set():
            if self.path.exists():
                with self.path.open("rb") as sink:
                    sink.seek(offset)
                    chunk = sink.read()
                now = time.time()
                complete = chunk[: chunk.rfind(b"\n") + 1]
                offset += len(complete)
                for line in complete.splitlines():
                    event = json.loads(line)
                    self.seen.setdefault((event["alert_id"], event["status"]), (now, event))
            time.sleep(0.005)

    def firing(self, client_instance_id: str) -> tuple[float, dict[str, Any]] | None:
        for (_, status), (when, event) in self.seen.items():
            if status == "firing" and event["client_instance_id"] == client_instance_id:
                return when, event
        return None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def _seconds(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _simulate(port: int, clients: int, seconds: float, unhealthy: int, seed: int) -> Any:
    from clientmetrics.reporter.simulate import SimConfig, run_process

    config = SimConfig(
        "127.0.0.1", port, clients, seconds, unhealthy=unhealthy, seed=seed, close_timeout_s=1
    )
    return run_process(config, range(clients))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alerts", type=int, default=5)
    parser.add_argument("--interval-ms", type=int, default=200)
    parser.add_argument("--clients", type=int, default=20, help="healthy clients beside")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--trigger-seconds", type=float, default=0.0,
        help="the stream's trigger (pipeline stream --trigger-seconds; 0: batches back to back)",
    )  # fmt: skip
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds before the first")
    parser.add_argument(
        "--cold", action="store_true",
        help="one alert from a cold start: the unhealthy client pushes before Spark starts",
    )  # fmt: skip
    parser.add_argument(
        "--wait", type=float, default=None,
        help="seconds to wait for each alert (default 25; 180 with --cold)",
    )  # fmt: skip
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--consumer", action="append", default=[], metavar="KEY=VALUE",
        help="a Kafka consumer setting of the stream's source (as --command-config gives them)",
    )  # fmt: skip
    parser.add_argument(
        "--profile", type=Path, default=None,
        help="profile the pass's Python tasks (Spark's UDF profiler) and dump them here "
        "(pstats files; times are then slower: for where, not how long)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.wait is None:
        args.wait = 180.0 if args.cold else 25.0

    from peers.kafka import KafkaBroker
    from tests.procs import GatewayProcess

    from clientmetrics.logs import configure_logging
    from clientmetrics.pipeline.core.rules import parse_rules
    from clientmetrics.pipeline.jobs.job import PipelineConfig, PipelineJob, trigger_active
    from clientmetrics.pipeline.jobs.sources import KafkaSource
    from clientmetrics.pipeline.spark.connector import with_connector
    from clientmetrics.pipeline.spark.session import build_session
    from clientmetrics.reporter.sim_net import set_subscription

    configure_logging("warning")  # the job's per-stage debug lines are in the breakdown
    work = args.workdir or Path(tempfile.mkdtemp(prefix="cm-latency-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    broker = KafkaBroker(work / "kafka").start()
    gateway = None
    webhook = Webhook()
    stages: dict[int, dict[str, float]] = {}
    #: When the job's start-up steps happened (wall clock), for ``--cold``'s timeline.
    marks: dict[str, float] = {}

    def spark_of() -> Any:
        conf = {"spark.ui.enabled": "false"}
        if args.profile is not None:
            conf["spark.sql.pyspark.udf.profiler"] = "perf"
        spark = build_session(args.master, conf=with_connector(conf))
        spark.sparkContext.setLogLevel("ERROR")
        return spark

    class Job(PipelineJob):
        """The pipeline job, noting each batch's stage times and when its start-up steps ran."""

        def start(self, *, available_now: bool) -> Any:
            marks.setdefault("query start", time.time())
            query = super().start(available_now=available_now)
            marks.setdefault("query started", time.time())
            return query

        def _warm(self) -> None:
            marks.setdefault("warm-up start", time.time())
            super()._warm()
            marks.setdefault("warm-up end", time.time())

        def process_batch(self, pushes: Any, batch_id: int) -> None:
            marks.setdefault("first batch in", time.time())
            before = dict(self.stage_seconds)
            super().process_batch(pushes, batch_id)
            stages[batch_id] = {
                name: seconds - before.get(name, 0.0)
                for name, seconds in self.stage_seconds.items()
            }

    try:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient(dict(broker.client_config()))
        admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])[TOPIC].result(30)
        del admin  # its connection would outlive the broker, and complain
        gateway = GatewayProcess(
            work / "gateway",
            "[exporters.landing]\nenabled = false\n"
            f"[exporters.topic]\nbootstrap_servers = '{broker.bootstrap}'\n"
            f"topic = '{TOPIC}'\nrequired = true\ncreate_topic = false\n",
        ).start()
        import asyncio

        asyncio.run(
            set_subscription(
                "127.0.0.1",
                gateway.port,
                "bench",
                {"metrics": "org.apache.kafka.", "interval.ms": str(args.interval_ms)},
            )
        )
        sink = work / "alerts.jsonl"
        config = PipelineConfig(
            input_path=str(work / "landing"),
            output_path=str(work / "tables"),
            checkpoint_path=str(work / "checkpoint"),
            rules=parse_rules(
                {
                    "webhook": webhook.url,
                    "rule": [
                        {
                            "name": "slow",
                            "metric": LATENCY,
                            "condition": "exceeded 5000 ms for more than 1 second",
                        }
                    ],
                }
            ),
            alert_sink=str(sink),
            trigger_seconds=args.trigger_seconds,
            kafka=KafkaSource(
                broker.bootstrap, TOPIC, dict(item.split("=", 1) for item in args.consumer)
            ),
        )
        watch = SinkWatch(sink)
        # Cold: one alert, then the healthy clients' thread is left to end with the process.
        total = args.wait + 10 if args.cold else args.warmup + args.alerts * (args.wait + 5) + 30
        results: list[dict[str, float]] = []
        background = threading.Thread(
            target=_simulate, args=(gateway.port, args.clients, total, 0, 1), daemon=True
        )
        background.start()
        if args.cold:
            query, spark = _cold(
                args, spark_of, lambda spark: Job(spark, config), watch, gateway.port, stages, marks
            )
            _timeline(marks, watch)
        else:
            spark = spark_of()
            query = Job(spark, config).start(available_now=False)
            time.sleep(args.warmup)
            for attempt in range(args.alerts):
                started = time.time()
                sick = threading.Thread(
                    target=_simulate,
                    args=(gateway.port, 1, 8.0, 1, 100 + attempt),
                    daemon=True,
                )
                sick.start()
                found = _wait_alert(watch, started, args.wait)
                sick.join()
                if found is None:
                    print(f"alert {attempt + 1}: none within {args.wait:.0f} s")
                    continue
                line_at, event = found
                time.sleep(0.5)  # the webhook is posted after the line
                hook_at = webhook.seen.get((event["alert_id"], "firing"))
                results.append(_breakdown(event, line_at, hook_at, query, stages))
                print(_line(attempt + 1, results[-1]))
        # The clients are done: let the stream finish its batches, then stop it between two.
        time.sleep(3)
        while trigger_active(query):
            time.sleep(0.05)
        query.stop()
        watch.stop()
        if args.profile is not None:
            spark.profile.dump(str(args.profile), type="perf")
        spark.stop()
        if not args.cold:
            background.join(total)
            _report(results, args)
    finally:
        webhook.stop()
        if gateway is not None:
            gateway.stop()
        broker.stop()
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


def _wait_alert(
    watch: SinkWatch, started: float, wait: float
) -> tuple[float, dict[str, Any]] | None:
    """The first firing alert line of an episode begun after ``started``, within ``wait`` s."""
    while time.time() - started < wait:
        for (_, status), (when, event) in list(watch.seen.items()):
            if status == "firing" and _seconds(event["started_at"]) >= started - 1:
                return when, event
        time.sleep(0.05)
    return None


def _progress_through(query: Any, line_at: float, wait: float = 60.0) -> list[Any]:
    """The query's progress reports once the batch that wrote the line at ``line_at`` has
    reported (a batch reports after its work, the alert line included)."""
    deadline = time.time() + wait
    while True:
        progress = list(query.recentProgress)
        ends = [
            _seconds(p["timestamp"].replace("Z", "+00:00"))
            + p["durationMs"]["triggerExecution"] / 1000
            for p in progress
        ]
        if any(end >= line_at for end in ends) or time.time() > deadline:
            return progress
        time.sleep(0.1)


def _cold(
    args: argparse.Namespace,
    spark_of: Any,
    job_of: Any,
    watch: SinkWatch,
    port: int,
    stages: dict[int, dict[str, float]],
    marks: dict[str, float],
) -> tuple[Any, Any]:
    """An unhealthy client pushes, then Spark starts: its first alert, and where the time went."""
    started = time.time()
    marks["first push"] = started
    sick = threading.Thread(target=_simulate, args=(port, 1, args.wait, 1, 100), daemon=True)
    sick.start()
    spark = spark_of()
    session_s = time.time() - started
    marks["session ready"] = time.time()
    query = job_of(spark).start(available_now=False)
    found = _wait_alert(watch, started, args.wait)
    if found is None:
        print(f"cold: no alert within {args.wait:.0f} s of the first push")
        return query, spark
    line_at, event = found
    progress = _progress_through(query, line_at)
    first = progress[0]["durationMs"]["triggerExecution"] / 1000 if progress else float("nan")
    batches = sum(1 for p in progress if _seconds(p["timestamp"].replace("Z", "+00:00")) <= line_at)
    load = Path("/proc/loadavg").read_text().split(" ", 1)[0]
    print(
        f"cold ({args.master}, load {load}): first push -> alert line "
        f"{line_at - started:.2f} s (rule + interval {_seconds(event['fired_at']) - started:.2f} s,"
        f" Spark session {session_s:.2f} s, first batch {first:.2f} s, "
        f"{batches} batches up to the alert)"
    )
    if progress:
        spark_ms = progress[0]["durationMs"]
        print(
            "  first batch, Spark's steps: "
            + ", ".join(f"{name} {ms / 1000:.2f} s" for name, ms in sorted(spark_ms.items()))
        )
        ours = stages.get(int(progress[0]["batchId"]), {})
        print(
            "  first batch, the job's stages: "
            + ", ".join(f"{name} {secs:.2f} s" for name, secs in ours.items())
        )
    return query, spark


def _timeline(marks: dict[str, float], watch: SinkWatch) -> None:
    """When each start-up step happened, in seconds from the first push."""
    begun = marks.get("first push")
    if begun is None:
        return
    lines = [when for when, _ in watch.seen.values()]
    if lines:
        marks["first alert line"] = min(lines)
    steps = sorted((when - begun, name) for name, when in marks.items() if name != "first push")
    print("  timeline from the first push: " + ", ".join(f"{n} {s:.2f} s" for s, n in steps))


def _breakdown(
    event: dict[str, Any],
    line_at: float,
    hook_at: float | None,
    query: Any,
    stages: dict[int, dict[str, float]],
) -> dict[str, float]:
    """Where one alert's seconds went, from its times and the batch that announced it."""
    started, fired = _seconds(event["started_at"]), _seconds(event["fired_at"])
    found: dict[str, float] = {
        "first push -> line": line_at - started,
        "first push -> webhook": (hook_at - started) if hook_at else float("nan"),
        "firing push -> line": line_at - fired,
        "rule + interval": fired - started,
    }
    for progress in query.recentProgress:
        begun = _seconds(progress["timestamp"].replace("Z", "+00:00"))
        took = progress["durationMs"]
        if begun <= line_at <= begun + took["triggerExecution"] / 1000 + 0.05:
            # The batch takes its offsets at the end of latestOffset, not at its
            # timestamp: a batch begun just before the firing push can still read it.
            took_offsets = begun + took.get("latestOffset", 0) / 1000
            found["wait for the batch"] = max(0.0, took_offsets - fired)
            found["spark before the batch"] = (
                took.get("latestOffset", 0)
                + took.get("walCommit", 0)
                + took.get("queryPlanning", 0)
            ) / 1000
            found["batch (addBatch)"] = took.get("addBatch", 0) / 1000
            for name, seconds in stages.get(int(progress["batchId"]), {}).items():
                found[f"  {name}"] = seconds
            break
    return found


def _line(number: int, found: dict[str, float]) -> str:
    return f"alert {number}: " + ", ".join(f"{k.strip()} {v:.2f} s" for k, v in found.items())


def _report(results: list[dict[str, float]], args: argparse.Namespace) -> None:
    load = Path("/proc/loadavg").read_text().split(" ", 1)[0]
    print(
        f"medians of {len(results)} alerts (push interval {args.interval_ms} ms, "
        f"{args.clients} healthy clients, {args.partitions} partitions, {args.master}, "
        f"trigger {args.trigger_seconds:g} s, "
        f"load {load}):"
    )
    keys = list(results[0]) if results else []
    for key in keys:
        values = [r[key] for r in results if key in r]
        print(f"  {key}: {statistics.median(values):.2f} s (slowest {max(values):.2f} s)")


if __name__ == "__main__":
    main()
