"""The pipeline on a real Spark standalone cluster: from landed files, and scaled out.

A master and two workers are started from the pyspark wheel (``spark-class``),
on 127.0.0.1, and stopped by PID. The job ships itself to the executors (a zip
of the package, the driver's interpreter): nothing is installed for it.

``pipeline run`` over the golden landed files makes the golden tables. The
scale-out picture (docs/pipeline.md) runs whole: two gateways with no local
state (the required topic exporter, the topic store) in front of Apache Kafka
4.4, real clients and numbered pushers, ``pipeline stream --source kafka`` on
the cluster; a gateway and the driver are SIGKILLed under load and restarted.
Every acknowledged push is in ``points`` exactly once, and the tables equal
those a local run makes of the same pushes landed as files.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from subprocess import Popen
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pyspark
import pytest
from confluent_kafka import Producer
from peers.kafka import KafkaBroker
from pyspark.sql import SparkSession

from clientmetrics.pipeline.core.records import RECORDS_ARROW, landing_rows
from clientmetrics.pipeline.core.rules import load_rules
from clientmetrics.pipeline.jobs.job import PipelineConfig, PipelineJob
from clientmetrics.pipeline.jobs.sources import KafkaSource
from tests.gateway.test_stateless_gateways import gateway_toml
from tests.kadmin import set_subscription
from tests.kafka import kafka_broker
from tests.peers.clients import java
from tests.pipeline.conftest import KAFKA_SOURCE_MISSING
from tests.pipeline.golden import TABLES, canonical_rows, golden_rows, read_table
from tests.pipeline.test_golden import land_golden
from tests.pipeline.topic_records import produce
from tests.procs import GatewayProcess, free_port, stop_process, wait_for
from tests.pushers import METRIC, Outcomes, run_client
from tests.synthetic import Push, landing_table
from tests.topic_reader import read_topic

# A cluster start and a whole job on two shared cores can take longer than the default timeout.
pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(900)]

SPARK_HOME = Path(pyspark.__file__).parent
CLI = Path(sys.executable).parent / "clientmetrics"
RULES_TOML = """
[[rule]]
name = "slow"
metric = "org.apache.kafka.producer.node.request.latency.avg"
condition = "exceeded 5000 ms for more than 120 seconds"

[[rule]]
name = "c-high"
metric = "c"
op = ">="
threshold = 4
for = "15s"
"""


def _env(tmp: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp / "logs"),
        "SPARK_WORKER_DIR": str(tmp / "work"),
    }
    env.pop("PYSPARK_PYTHON", None)  # the job must choose the executors' Python itself
    return env


def _wait_for_line(log: Path, text: str, process: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        assert process.poll() is None, log.read_text(errors="replace")[-3000:]
        time.sleep(0.3)
    pytest.fail(f"{text!r} not in {log}")


@pytest.fixture(scope="module")
def cluster_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cluster")


def _executors_ran(tmp: Path) -> bool:
    """Whether both workers launched executors (an app directory in each work dir)."""
    return all(any((tmp / f"work-{index}").glob("app-*")) for index in range(2))


@pytest.fixture(scope="module")
def cluster(cluster_dir: Path) -> Iterator[str]:
    """spark://… of a standalone master with two one-core workers."""
    tmp = cluster_dir
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    env = _env(tmp)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    processes: list[subprocess.Popen[bytes]] = []
    try:
        master_log = tmp / "master.log"
        with master_log.open("wb") as out:
            processes.append(
                subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(port), "--webui-port", str(free_port())],
                    env=env, stdout=out, stderr=subprocess.STDOUT,
                )
            )  # fmt: skip
        _wait_for_line(master_log, "I have been elected leader", processes[0], 90)
        for index in range(2):
            log = tmp / f"worker-{index}.log"
            with log.open("wb") as out:
                worker = subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host",
                     "127.0.0.1", "--cores", "1", "--memory", "1g", "--webui-port",
                     str(free_port()), "--work-dir", str(tmp / f"work-{index}")],
                    env=env, stdout=out, stderr=subprocess.STDOUT,
                )  # fmt: skip
            processes.append(worker)
            _wait_for_line(log, "Successfully registered with master", worker, 90)
        yield url
    finally:
        for process in reversed(processes):  # the workers, then the master
            stop_process(process, 30)


def _command(verb: str, url: str, data: Path, rules: Path, *extra: str) -> list[str]:
    return [
        str(CLI), "pipeline", verb, "--master", url, "--data-dir", str(data),
        "--rules", str(rules), "--max-files-per-trigger", "1",
        "--conf", "spark.executor.memory=512m", "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=2", *extra,
    ]  # fmt: skip


def _golden(tables: Path) -> bool:
    try:
        return all(canonical_rows(read_table(tables, n)) == golden_rows(n) for n in TABLES)
    except (OSError, ValueError):  # a table not (fully) written yet
        return False


def _prepare(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "cm-data"
    land_golden(data)
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES_TOML, encoding="utf-8")
    return data, rules


def test_pipeline_run_on_a_standalone_cluster_makes_the_golden_tables(
    cluster: str, cluster_dir: Path, tmp_path: Path
) -> None:
    data, rules = _prepare(tmp_path)
    done = subprocess.run(
        _command("run", cluster, data, rules),
        env=_env(tmp_path),
        capture_output=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    assert _executors_ran(cluster_dir)
    for name in TABLES:
        assert canonical_rows(read_table(data / "tables", name)) == golden_rows(name), name


# --- Scale-out: gateways -> topic -> the cluster --------------------------------------------

TOPIC = "pushes"
#: A rule the numbered pushers all meet (their gauge counts up), so alerts are made, and
#: must be made once, across the kills.
SCALE_RULES = """
[[rule]]
name = "count-high"
metric = "pushers.seq"
op = ">="
threshold = 10
for = "1s"
"""
PUSHERS = 30
PUSH_INTERVAL_MS = 200


@pytest.fixture(scope="module")
def kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaBroker]:
    yield from kafka_broker(request, tmp_path_factory)


def _stream(url: str, kafka: KafkaBroker, data: Path, rules: Path, log: Path) -> Popen[bytes]:
    command = [
        str(CLI), "pipeline", "stream", "--master", url, "--source", "kafka",
        "--bootstrap-servers", kafka.bootstrap, "--topic", TOPIC, "--data-dir", str(data),
        "--rules", str(rules), "--trigger-seconds", "1",
        "--conf", "spark.executor.memory=512m", "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=2",
    ]  # fmt: skip
    with log.open("ab") as out:
        return subprocess.Popen(
            command, env=_env(data.parent), stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,  # the driver and its JVM: one group to kill
        )  # fmt: skip


def _stop_driver(driver: Popen[bytes]) -> None:
    """Ctrl-C, as an operator stops it; SIGKILL to the group if it does not stop in time."""
    if driver.poll() is not None:
        return
    driver.send_signal(signal.SIGINT)
    try:
        driver.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()


def _pushes_done(data: Path) -> int:
    """How many pushes the published inventory has counted (every record is one push)."""
    try:
        clients = read_table(data / "tables", "clients")
    except (OSError, ValueError, pa.ArrowInvalid):  # nothing (fully) written yet
        return 0
    # The snapshot is replaced whole: between its two renames there are no files to read.
    if "pushes" not in clients.column_names:
        return 0
    return int(pc.sum(clients.column("pushes")).as_py() or 0)


def _produce_marker(kafka: KafkaBroker) -> None:
    """One empty, terminating push of a client of its own, straight to the topic."""
    at_us = time.time_ns() // 1000
    marker = Push(at_us, str(uuid.uuid4()), b"", terminating=True)
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    produce(producer, TOPIC, landing_table([marker]))


def _batches_done(data: Path) -> int:
    """How many micro-batches have published (the newest progress state's batch id + 1)."""
    done = (data / "tables" / "_state" / "progress").glob("batch=*/_SUCCESS")
    return max((int(path.parent.name.removeprefix("batch=")) + 1 for path in done), default=0)


def _numbered(points: pa.Table) -> Counter[tuple[str, int]]:
    """How many times each (instance, push number) of the pushers is in ``points``."""
    rows = points.filter(pc.equal(points.column("metric_name"), METRIC))
    return Counter(
        zip(
            rows.column("client_instance_id").to_pylist(),
            (int(v) for v in rows.column("value").to_pylist()),
            strict=True,
        )
    )


def _land_records(records: list[Any], data: Path) -> None:
    """The topic's records as one landed file (the gateway's landing layout)."""
    table = pa.table(
        {
            "key": [r.key() for r in records],
            "value": [r.value() for r in records],
            "topic": [r.topic() for r in records],
            "partition": [r.partition() for r in records],
            "offset": [r.offset() for r in records],
            "timestamp": [r.timestamp()[1] * 1000 for r in records],
            "headers": [[{"key": k, "value": v} for k, v in r.headers() or []] for r in records],
        },
        schema=RECORDS_ARROW,
    )
    landing = data / "landing" / "pushes" / "date=2026-11-26" / "hour=00"
    landing.mkdir(parents=True)
    pq.write_table(landing_rows(table), landing / "part-0-topic.parquet")


def _tables(spark: SparkSession, data: Path, rules: Path, **source: object) -> None:
    """A final run of the job in this test's Spark session: drains, then closes every window."""
    config = PipelineConfig(
        input_path=str(data / "landing" / "pushes"),
        output_path=str(data / "tables"),
        checkpoint_path=str(data / "checkpoints" / "pipeline"),
        rules=load_rules(rules),
        alert_sink=str(data / "alerts.jsonl"),
        flush_windows=True,
        **source,  # type: ignore[arg-type]
    )
    PipelineJob(spark, config).run()


async def _load_with_kills(
    gateways: list[GatewayProcess],
    kafka: KafkaBroker,
    driver: list[Popen[bytes]],
    restart_driver: Callable[[], Popen[bytes]],
    data: Path,
) -> tuple[Outcomes, int]:
    """Numbered pushers through both gateways; SIGKILL gateway a, then the driver, mid-load."""
    a, b = gateways
    addresses = [("127.0.0.1", a.port), ("127.0.0.1", b.port)]
    stop, outcomes = asyncio.Event(), Outcomes()
    clients = [
        asyncio.create_task(run_client(f"load-{i}", addresses, stop, outcomes, start_at=i))
        for i in range(PUSHERS)
    ]
    try:
        await asyncio.to_thread(wait_for, lambda: _batches_done(data) > 1, 240, what="batches")
        print(f"two batches done; acked {len(outcomes.acked)}")
        # Counts reached, not seconds slept: a busy machine only makes them later.
        await asyncio.to_thread(
            wait_for, lambda: len(outcomes.acked) > 100, 60, what="100 acknowledged pushes"
        )
        acked_before = len(outcomes.acked)
        a.kill()  # SIGKILL: its clients move to b
        await asyncio.to_thread(
            wait_for,
            lambda: (
                outcomes.transport_failures >= PUSHERS // 2 and len(outcomes.acked) > acked_before
            ),
            60,
            what="a's clients to move to b",
        )
        await asyncio.to_thread(a.start)
        done = _batches_done(data)
        await asyncio.to_thread(wait_for, lambda: _batches_done(data) > done, 120, what="a batch")
        await asyncio.sleep(0.5)  # somewhere inside the next batch
        os.killpg(driver[0].pid, signal.SIGKILL)
        driver[0].wait(30)
        driver[0] = await asyncio.to_thread(restart_driver)
        await asyncio.sleep(3)
    finally:
        stop.set()
        await asyncio.gather(*clients)
    assert len(outcomes.acked) > acked_before > 100
    assert outcomes.transport_failures >= PUSHERS // 2, "a's clients lost their gateway"
    return outcomes, acked_before


@pytest.mark.kafka
def test_gateways_topic_and_a_cluster_keep_every_acknowledged_push_once(
    cluster: str, kafka: KafkaBroker, spark: SparkSession, tmp_path: Path
) -> None:
    if KAFKA_SOURCE_MISSING:
        pytest.skip(KAFKA_SOURCE_MISSING[0])
    # The inventory's software columns come from the records' headers: the topic exporter
    # must be asked for them (its default labels are client_id and client_instance_id).
    labels = '\nlabels = ["client_id", "client_instance_id", "client_software_name"]\n'
    gateways = [
        GatewayProcess(tmp_path / f"gw-{name}", gateway_toml(kafka.bootstrap) + labels).start()
        for name in "ab"
    ]
    t0 = time.monotonic()

    def phase(what: str) -> None:
        print(f"{time.monotonic() - t0:6.1f} s  {what}")

    a, b = gateways
    set_subscription(
        a.bootstrap, "load",
        {"metrics": METRIC, "interval.ms": str(PUSH_INTERVAL_MS), "match": "client_id=load-.*"},
    )  # fmt: skip
    set_subscription(
        b.bootstrap, "peers",
        {"metrics": "org.apache.kafka.", "interval.ms": "1000", "match": "client_id=peer-.*"},
    )  # fmt: skip
    data, rules = tmp_path / "cm-data", tmp_path / "rules.toml"
    rules.write_text(SCALE_RULES, encoding="utf-8")
    log = tmp_path / "driver.log"

    def start_driver() -> Popen[bytes]:
        return _stream(cluster, kafka, data, rules, log)

    driver = [start_driver()]
    rdkafka = Producer({"bootstrap.servers": b.bootstrap, "client.id": "peer-rdkafka"})
    codes: list[int] = []
    try:
        with java(b.bootstrap, tmp_path, "--client-id", "peer-java", "--role", "producer",
                  "--messages", "0") as client:  # fmt: skip
            java_instance = client.instance_ids()["producer"]
            outcomes, acked_before = asyncio.run(
                _load_with_kills(gateways, kafka, driver, start_driver, data)
            )
        rdkafka.close()
        codes = [gw.stop() for gw in gateways]  # nothing more reaches the topic
        phase("clients and gateways stopped")
        records = len(read_topic(kafka.bootstrap, TOPIC))
        try:
            wait_for(lambda: _pushes_done(data) == records, 240, what="the stream caught up")
        except AssertionError:
            print(log.read_text(errors="replace")[-4000:])
            raise
        phase("the stream caught up")
        batches = _batches_done(data)
    finally:
        _stop_driver(driver[0])
        for gw in gateways:
            gw.stop()
    phase("caught up, stopped")
    assert codes == [0, 0]
    assert [gw.tracebacks() for gw in gateways] == [[], []]

    # A final run closes every window (``--flush-windows``). It closes them at the end of
    # each of its batches, so it must be one batch: one record after the stream stopped.
    _produce_marker(kafka)
    on_topic = read_topic(kafka.bootstrap, TOPIC)
    _tables(spark, data, rules, kafka=KafkaSource(kafka.bootstrap, TOPIC))
    assert _batches_done(data) == batches + 1
    # Every acknowledged push once, no push twice (a replayed batch replaced its points).
    phase("final run")
    numbered = _numbered(read_table(data / "tables", "points"))
    print(
        f"acknowledged pushes: {len(outcomes.acked)} ({acked_before} before the kills); "
        f"records on the topic: {len(on_topic)}; numbered points: {sum(numbered.values())}; "
        f"other answers: {dict(outcomes.errors)}; connections lost: "
        f"{outcomes.transport_failures}; batches: {_batches_done(data)}"
    )
    acked = {(str(instance), number) for instance, number in outcomes.acked}
    assert acked <= set(numbered), "an acknowledged push is missing"
    assert max(numbered.values()) == 1, "a push is in points twice"
    clients = read_table(data / "tables", "clients").to_pylist()
    software = {row["client_instance_id"]: row["client_software_name"] for row in clients}
    assert software[java_instance] == "apache-kafka-java"
    assert "confluent-kafka-python" in software.values()

    # The same pushes landed as files and run locally make the same tables.
    local = tmp_path / "local"
    _land_records(on_topic, local)
    _tables(spark, local, rules)
    phase("local run")
    for name in TABLES:
        assert _rounded(read_table(data / "tables", name)) == _rounded(
            read_table(local / "tables", name)
        ), name


def _rounded(table: pa.Table) -> list[dict[str, Any]]:
    """Canonical rows, floats to 12 significant digits: a window's partial sums are added in
    the order its batches came, so its average may differ in the last bit."""

    def plain(value: object) -> object:
        return float(f"{value:.12g}") if isinstance(value, float) else value

    return canonical_rows(
        pa.Table.from_pylist(
            [{k: plain(v) for k, v in row.items()} for row in table.to_pylist()],
            schema=table.schema,
        )
    )
