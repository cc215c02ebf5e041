"""End to end: real librdkafka clients push through the gateway; the pipeline makes the tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from pyspark.sql import SparkSession

from clientmetrics.pipeline.core.rules import parse_rules
from clientmetrics.pipeline.jobs.job import PipelineConfig, PipelineJob
from tests.kadmin import set_subscription
from tests.landed import landed_rows
from tests.procs import GatewayProcess, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.spark]

FAST = """
[exporters.landing]
roll_seconds = 0.3
"""
LATENCY = "org.apache.kafka.producer.node.request.latency.avg"


def _push_until(clients: list[Producer | Consumer], data: Path, pushes: int) -> None:
    def enough() -> bool:
        for client in clients:
            client.poll(0.05)
        rows = [r for r in landed_rows(data) if r["client_id"] == "prod-e2e" and r["payload"]]
        return len(rows) >= pushes

    wait_for(enough, 90, interval=0.2, what=f"{pushes} producer pushes to land")


def test_librdkafka_pushes_become_tables_and_a_low_threshold_alert(
    spark: SparkSession, tmp_path: Path
) -> None:
    gateway = GatewayProcess(tmp_path / "data", FAST).start()
    try:
        set_subscription(
            gateway.bootstrap, "all", {"metrics": "org.apache.kafka.", "interval.ms": "1000"}
        )
        producer = Producer(
            {"bootstrap.servers": gateway.bootstrap, "client.id": "prod-e2e", "log_level": 3}
        )
        consumer = Consumer(
            {
                "bootstrap.servers": gateway.bootstrap,
                "client.id": "cons-e2e",
                "group.id": "group-e2e",
                "client.rack": "rack-9",
                "log_level": 3,
            }
        )
        consumer.subscribe(["no-such-topic"])
        _push_until([producer, consumer], gateway.data_dir, 4)
        consumer.close()
        producer.flush(1)
        del producer  # its terminating push is sent while the handle is destroyed
    finally:
        assert gateway.stop() == 0
    rules = parse_rules(
        {
            "rule": [
                {
                    "name": "any-latency",
                    "metric": LATENCY,
                    "condition": ">= 0 for at least 2 seconds",
                }
            ]
        }
    )
    data = gateway.data_dir
    config = PipelineConfig(
        input_path=str(data / "landing" / "pushes"),
        output_path=str(data / "tables"),
        checkpoint_path=str(data / "checkpoints"),
        rules=rules,
        alert_sink=str(data / "alerts.jsonl"),
        flush_windows=True,
    )
    PipelineJob(spark, config).run()

    tables = {
        name: spark.read.parquet(str(data / "tables" / name))
        for name in ("points", "client_windows", "clients", "alerts")
    }
    counts = {name: frame.count() for name, frame in tables.items()}
    assert all(counts.values()), counts
    brokers = tables["points"].where(f"metric_name = '{LATENCY}'").select("attributes").collect()
    assert {"node.id"} <= {key for row in brokers for key in row.attributes}
    clients = {row.client_id: row for row in tables["clients"].collect()}
    assert clients["prod-e2e"].client_software_name == "confluent-kafka-python"
    assert clients["prod-e2e"].terminated is True
    assert clients["cons-e2e"].group_id == "group-e2e"
    assert clients["cons-e2e"].client_rack == "rack-9"
    firing = tables["alerts"].where("status = 'firing'").collect()
    assert firing
    assert {row.labels["client_id"] for row in firing} == {"prod-e2e"}
    assert firing[0].labels["client_source_address"] == "127.0.0.1"
    assert firing[0].labels["client_software_name"] == "confluent-kafka-python"
    sink = [json.loads(line) for line in (data / "alerts.jsonl").read_text().splitlines()]
    assert {line["alert_id"] for line in sink} >= {row.alert_id for row in firing}

    PipelineJob(spark, config).run()
    assert {
        name: spark.read.parquet(str(data / "tables" / name)).count() for name in tables
    } == counts
