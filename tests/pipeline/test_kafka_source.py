"""The pipeline's Kafka source against Apache Kafka 4.4 over SASL_SSL (SCRAM, TLS).

One broker for the module. The pipeline's consumer gets the settings the admin
tool reads (a Java properties file, ``--command-config``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from peers.kafka import KafkaBroker
from pyspark.sql import SparkSession

from clientmetrics.pipeline.jobs.job import PipelineJob
from clientmetrics.pipeline.jobs.sources import KafkaSource
from clientmetrics.pipeline.spark.session import FAST_START_JAVA_OPTIONS
from tests.kafka import kafka_broker
from tests.pipeline.conftest import KAFKA_SOURCE_MISSING
from tests.pipeline.golden import (
    TABLES,
    canonical_rows,
    golden_batches,
    golden_rows,
    read_table,
)
from tests.pipeline.test_golden import golden_config
from tests.pipeline.topic_records import produce, topic_records
from tests.procs import BIN, wait_for
from tests.synthetic import Push, landing_table, points_per_producer_payload, producer_payload

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.integration]

T0_US = 1_795_300_000_000_000


@pytest.fixture(scope="module")
def broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaBroker]:
    yield from kafka_broker(request, tmp_path_factory, listener="SASL_SSL")


@pytest.fixture
def spark_kafka(spark: SparkSession) -> SparkSession:
    if KAFKA_SOURCE_MISSING:
        pytest.skip(KAFKA_SOURCE_MISSING[0])
    return spark


def _topic(broker: KafkaBroker, name: str, partitions: int) -> str:
    admin = AdminClient(broker.client_config())
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    return name


def _source(broker: KafkaBroker, topic: str) -> KafkaSource:
    properties = dict(
        line.split("=", 1) for line in broker.command_config().read_text().splitlines()
    )
    return KafkaSource(broker.bootstrap, topic, properties)


def test_the_golden_pushes_from_a_topic_make_the_golden_tables(
    spark_kafka: SparkSession, broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = _topic(broker, "golden", 3)
    producer = Producer(broker.client_config())
    config = golden_config(tmp_path, kafka=_source(broker, topic))
    for pushes in golden_batches():  # one micro-batch each, as the landed files are
        produce(producer, topic, landing_table(pushes))
        PipelineJob(spark_kafka, config).run()
    for name in TABLES:
        rows = canonical_rows(read_table(tmp_path / "tables", name))
        assert _in_millis(rows) == _in_millis(golden_rows(name)), name
    # Three partitions, so three shares: each task read its partition's records only.
    state = tmp_path / "tables" / "_state" / "series"
    shares = {p.name.split("-")[2] for p in state.rglob("part-*.parquet")}
    assert shares <= {"00000", "00001", "00002"}
    assert len(shares) > 1


#: Columns holding a push's receipt time: the topic carries milliseconds (as the gateway
#: keeps them), the golden input has a few microseconds more.
_RECEIVED = ("received_at", "first_seen", "last_seen", "last_push")


def _in_millis(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    def millis(text: str | None) -> str | None:
        if text is None:
            return None
        moment = datetime.fromisoformat(text)
        return moment.replace(microsecond=moment.microsecond // 1000 * 1000).isoformat()

    coarse = [{k: millis(v) if k in _RECEIVED else v for k, v in row.items()} for row in rows]
    return sorted(coarse, key=lambda row: json.dumps(row, sort_keys=True))


class _Load:
    """Pushes produced to the topic until stopped, counting those the cluster acknowledged."""

    def __init__(self, broker: KafkaBroker, topic: str, instances: int = 40) -> None:
        self._producer = Producer({**broker.client_config(), "linger.ms": 5})
        self._topic = topic
        self._instances = [f"00000000-0000-0000-0000-{n:012d}" for n in range(instances)]
        self._stop = threading.Event()
        self.acked = 0
        self.failed = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error: object, _: object) -> None:
        if error is None:
            self.acked += 1
        else:
            self.failed += 1

    def _run(self) -> None:
        step = 0
        while not self._stop.is_set():
            at_us = T0_US + step * 1_000_000
            pushes = [
                Push(at_us, instance, producer_payload(at_us * 1000, step), push_interval_ms=1000)
                for instance in self._instances
            ]
            for key, value, headers in topic_records(landing_table(pushes)):
                self._producer.produce(
                    self._topic, value, key, headers=headers, on_delivery=self._delivered
                )
            self._producer.poll(0)
            step += 1
            time.sleep(0.2)
        self._producer.flush(30)

    def __enter__(self) -> _Load:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(60)


def _pipeline(broker: KafkaBroker, topic: str, data: Path, command: str) -> list[str]:
    return [
        str(BIN / "clientmetrics"),
        "pipeline",
        command,
        "--source",
        "kafka",
        "--bootstrap-servers",
        broker.bootstrap,
        "--topic",
        topic,
        "--command-config",
        str(broker.command_config()),
        "--data-dir",
        str(data),
        "--master",
        "local[2]",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        f"spark.driver.extraJavaOptions={FAST_START_JAVA_OPTIONS}",
        *(["--trigger-seconds", "1"] if command == "stream" else ["--flush-windows"]),
    ]


def _batches_done(data: Path) -> int:
    """How many micro-batches have published (the newest progress state's batch id + 1)."""
    done = (data / "tables" / "_state" / "progress").glob("batch=*/_SUCCESS")
    return max((int(path.parent.name.removeprefix("batch=")) + 1 for path in done), default=0)


def test_a_driver_killed_under_load_and_restarted_leaves_every_record_once(
    spark_kafka: SparkSession, broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = _topic(broker, "kills", 2)
    data = tmp_path / "data"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    kills = 0
    with _Load(broker, topic) as load:
        for delay in (0.3, 1.1):
            done = _batches_done(data)
            log = tmp_path / f"driver-{kills}.log"
            with log.open("wb") as output:
                driver = subprocess.Popen(
                    _pipeline(broker, topic, data, "stream"),
                    env=env,
                    start_new_session=True,  # the driver and the JVM it starts: one group to kill
                    stdout=output,
                    stderr=subprocess.STDOUT,
                )
            try:
                try:
                    wait_for(lambda d=done: _batches_done(data) > d, 120, what="a batch")
                except AssertionError:
                    print(log.read_text(errors="replace")[-4000:])
                    raise
                time.sleep(delay)  # somewhere inside a batch
            finally:
                os.killpg(driver.pid, signal.SIGKILL)
                driver.wait(30)
                kills += 1
    assert load.acked > 0
    assert load.failed == 0
    drained = subprocess.run(
        _pipeline(broker, topic, data, "run"),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert drained.returncode == 0, drained.stderr[-2000:]
    points = read_table(data / "tables", "points")
    assert points.num_rows == load.acked * points_per_producer_payload()
    keys = pc.binary_join_element_wise(
        points.column("series"), pc.cast(points.column("event_time"), "string"), "@"
    )
    assert pc.count_distinct(keys).as_py() == points.num_rows
    assert kills == 2
