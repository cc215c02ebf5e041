"""The pipeline's Kafka source against Apache Kafka 4.4 over SASL_SSL (SCRAM, TLS).

One broker for the module. The pipeline's consumer gets the settings the admin
tool reads (a Java properties file, ``--command-config``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from peers.kafka import KafkaBroker
from pyspark.sql import SparkSession

from clientmetrics.errors import ConfigurationError
from clientmetrics.pipeline.core.rejects import counts_by_reason
from clientmetrics.pipeline.core.rules import parse_rules
from clientmetrics.pipeline.jobs.job import PipelineJob
from clientmetrics.pipeline.jobs.reach import topic_partitions
from clientmetrics.pipeline.jobs.sources import KafkaSource
from tests.kafka import kafka_broker
from tests.pipeline.conftest import KAFKA_SOURCE_MISSING
from tests.pipeline.golden import (
    TABLES,
    canonical_rows,
    golden_batches,
    golden_rows,
    read_table,
)
from tests.pipeline.hostile import hostile_records
from tests.pipeline.test_golden import golden_config
from tests.pipeline.topic_records import produce
from tests.procs import MIN_DEADLINE_S
from tests.synthetic import Push, land, landing_table, producer_payload

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.integration]

T0_US = 1_795_300_000_000_000
LATENCY = "org.apache.kafka.producer.node.request.latency.avg"


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
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(MIN_DEADLINE_S)
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
    follow_ups = {"idle": 0, "judged": 0}
    for pushes in golden_batches():  # one micro-batch each, as the landed files are
        produce(producer, topic, landing_table(pushes))
        job = PipelineJob(spark_kafka, config)
        job.run()
        follow_ups = {k: v + job.follow_ups[k] for k, v in follow_ups.items()}
    # Some batch had a partition with no record (its share ran from its state), and
    # some share's task had read an earlier newest push than the batch's (its
    # clients were judged again by the batch's): the tables are the golden ones anyway.
    assert follow_ups["idle"] > 0
    assert follow_ups["judged"] > 0
    for name in TABLES:
        rows = canonical_rows(read_table(tmp_path / "tables", name))
        assert _in_millis(rows) == _in_millis(golden_rows(name)), name
    # Every alert event was announced once.
    alerts = read_table(tmp_path / "tables", "alerts").select(["alert_id", "status"]).to_pylist()
    sink = (tmp_path / "alerts.jsonl").read_text(encoding="utf-8").splitlines()
    announced = [json.loads(line) for line in sink]
    assert alerts
    assert sorted((e["alert_id"], e["status"]) for e in announced if "alert_id" in e) == sorted(
        (row["alert_id"], row["status"]) for row in alerts
    )
    # Three partitions, so three shares: each task read its partition's records only.
    state = tmp_path / "tables" / "_state" / "series"
    shares = {p.name.split("-")[2] for p in state.rglob("part-*.parquet")}
    assert shares <= {"00000", "00001", "00002"}
    assert len(shares) > 1


def _minutes(instance: str, minutes: range, latency: float) -> list[Push]:
    """An instance's pushes, one a minute from ``T0_US``."""
    return [
        Push(
            T0_US + minute * 60_000_000,
            instance,
            producer_payload((T0_US + minute * 60_000_000) * 1000, minute, latency=latency),
            push_interval_ms=60_000,
        )
        for minute in minutes
    ]


def test_alerts_a_follow_up_ends_are_announced_after_it(
    spark_kafka: SparkSession, broker: KafkaBroker, tmp_path: Path
) -> None:
    # A slow client fires on partition 0, then only partition 1 has records, from
    # minutes after the slow client's last push: partition 0's share runs in the
    # follow-up job from its state, where the client has gone silent and its alert
    # resolves as expired. That event comes from the follow-up, not from the pass.
    topic = _topic(broker, "silent", 2)
    slow, fast = str(uuid.UUID(int=1)), str(uuid.UUID(int=2))
    rule = {"name": "slow", "metric": LATENCY, "condition": "exceeded 5000 ms for more than 180 s"}
    config = golden_config(
        tmp_path, kafka=_source(broker, topic), rules=parse_rules({"rule": [rule]})
    )
    producer = Producer(broker.client_config())
    first = _minutes(slow, range(5), 6000.0) + _minutes(fast, range(5), 10.0)
    produce(producer, topic, landing_table(first), [0] * 5 + [1] * 5)
    PipelineJob(spark_kafka, config).run()
    sink = tmp_path / "alerts.jsonl"
    fired = [json.loads(line) for line in sink.read_text(encoding="utf-8").splitlines()]
    assert fired
    assert {(e["client_instance_id"], e["status"]) for e in fired} == {(slow, "firing")}
    produce(producer, topic, landing_table(_minutes(fast, range(5, 15), 10.0)), [1] * 10)
    job = PipelineJob(spark_kafka, config)
    job.run()
    assert job.follow_ups["idle"] == 1
    events = [json.loads(line) for line in sink.read_text(encoding="utf-8").splitlines()]
    assert events[: len(fired)] == fired
    assert sorted((e["alert_id"], e["status"], e["resolution"]) for e in events[len(fired) :]) == (
        sorted((e["alert_id"], "resolved", "expired") for e in fired)
    )


def _jks_trust_store(broker: KafkaBroker, tmp_path: Path) -> Path:
    """The broker's CA in a JKS trust store (keytool comes with the JDK Kafka runs on)."""
    assert broker.tls is not None
    store = tmp_path / "trust.jks"
    keytool = shutil.which("keytool")
    assert keytool is not None, "keytool (the JDK's) is not on PATH"
    subprocess.run(
        [keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", str(broker.tls.ca),
         "-keystore", str(store), "-storetype", "JKS", "-storepass", "changeit"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    return store


def test_a_fresh_start_with_a_jks_trust_store_runs_its_batches(
    spark_kafka: SparkSession, broker: KafkaBroker, tmp_path: Path
) -> None:
    # The project's client does not read JKS, so it cannot count the topic's
    # partitions; a fresh start (no state to tell) stopped at its first batch.
    topic = _topic(broker, "jks", 2)
    source = _source(broker, topic)
    properties = {**source.properties, "ssl.truststore.type": "JKS"}
    properties["ssl.truststore.location"] = str(_jks_trust_store(broker, tmp_path))
    properties["ssl.truststore.password"] = "changeit"
    source = KafkaSource(broker.bootstrap, topic, properties)
    with pytest.raises(ConfigurationError, match="JKS"):
        topic_partitions(broker.bootstrap, topic, properties)
    config = golden_config(tmp_path, kafka=source)
    first, second = golden_batches()[:2]
    for pushes in (first, second):  # a fresh start, then a restart
        produce(Producer(broker.client_config()), topic, landing_table(pushes))
        job = PipelineJob(spark_kafka, config)
        job.run()
        assert job.batches == 1
        if pushes is first:
            clients = read_table(tmp_path / "tables", "clients").column("client_instance_id")
            assert {str(i) for i in clients.to_pylist()} == {
                str(p.client_instance_id) for p in first
            }
    # Two partitions, two shares: the state is named by the count the Java client gave.
    state = tmp_path / "tables" / "_state" / "series"
    assert {p.name.split("-")[1] for p in state.rglob("part-*.parquet")} == {"00002"}


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


def test_hostile_records_on_the_topic_leave_the_tables_of_the_good_ones(
    spark_kafka: SparkSession, broker: KafkaBroker, tmp_path: Path
) -> None:
    """The issue's records (bad headers, a non-UTF-8 client id, a key that is no UUID, a
    point at 2^64 - 1 ns) among good ones: the tables of the good ones alone, plus the
    dead letters, counted by reason."""
    topic = _topic(broker, "hostile", 2)
    good = golden_batches()[0]
    hostile, expected = hostile_records(min(p.received_at_us for p in good))
    producer = Producer(broker.client_config())
    produce(producer, topic, landing_table(good[:5]))
    for key, value, headers in hostile:
        producer.produce(topic, value, key, headers=headers)
    produce(producer, topic, landing_table(good[5:]))
    on_topic = tmp_path / "topic"
    job = PipelineJob(spark_kafka, golden_config(on_topic, kafka=_source(broker, topic)))
    job.run()
    alone = tmp_path / "landed"
    land(alone, good)
    PipelineJob(spark_kafka, golden_config(alone)).run()
    for name in TABLES:
        rows = canonical_rows(read_table(on_topic / "tables", name))
        assert _in_millis(rows) == _in_millis(canonical_rows(read_table(alone / "tables", name)))
    letters = read_table(on_topic / "tables", "rejected")
    assert counts_by_reason(letters) == expected == job.rejected
    assert expected == {
        "invalid_header": 5,
        "header_not_utf8": 2,
        "invalid_instance_id": 1,
        "invalid_received_at": 1,
        "point_time_out_of_range": 3,
    }
    assert set(letters.column("topic").to_pylist()) == {topic}
    assert all(offset is not None for offset in letters.column("offset").to_pylist())
