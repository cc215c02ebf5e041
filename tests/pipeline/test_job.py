"""The job end to end on landed files: run, re-run, replay, stream and restart."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from clientmetrics.pipeline.core.rules import parse_rules
from clientmetrics.pipeline.jobs.job import PipelineConfig, PipelineJob
from clientmetrics.pipeline.jobs.sources import LANDED_FILE
from tests.golden import LIBRDKAFKA as FIXTURES
from tests.pipeline.golden import read_table
from tests.synthetic import (
    Push,
    land,
    points_per_producer_payload,
    producer_payload,
)

LATENCY = "org.apache.kafka.producer.node.request.latency.avg"
T0_US = 1_795_300_000_000_000
SLOW = str(uuid.UUID(int=1))
FAST = str(uuid.UUID(int=2))
PER_PAYLOAD = points_per_producer_payload()


def _pushes(start_minute: int, minutes: int, latency: float, instance: str) -> list[Push]:
    pushes = []
    for minute in range(start_minute, start_minute + minutes):
        at_us = T0_US + minute * 60_000_000
        payload = producer_payload(at_us * 1000, minute, latency=latency)
        pushes.append(
            Push(at_us, instance, payload, client_id=f"app-{instance[-1]}", push_interval_ms=60_000)
        )
    return pushes


def _config(data: Path, **overrides: object) -> PipelineConfig:
    rules = parse_rules(
        {
            "rule": [
                {
                    "name": "slow",
                    "metric": LATENCY,
                    "condition": "exceeded 5000 ms for more than 180 seconds",
                }
            ]
        }
    )
    values: dict[str, object] = {
        "input_path": str(data / "landing" / "pushes"),
        "output_path": str(data / "tables"),
        "checkpoint_path": str(data / "checkpoints"),
        "rules": rules,
        "alert_sink": str(data / "alerts.jsonl"),
        "max_files_per_trigger": 1,
        "trigger_seconds": 0.5,
    }
    values.update(overrides)
    return PipelineConfig(**values)  # type: ignore[arg-type]


def _land_in_order(data: Path, *batches: list[Push]) -> None:
    """Land one file per batch; the file source takes them in this order (by modification time)."""
    for index, pushes in enumerate(batches):
        landed = land(data, pushes)
        os.utime(landed, (1_800_000_000 + index, 1_800_000_000 + index))


def _counts(spark: SparkSession, data: Path) -> dict[str, int]:
    tables = data / "tables"
    return {
        name: spark.read.parquet(str(tables / name)).count()
        for name in ("points", "client_windows", "clients", "alerts")
        if (tables / name).exists()
    }


def _sink_lines(data: Path) -> list[dict[str, object]]:
    sink = data / "alerts.jsonl"
    if not sink.exists():
        return []
    return [json.loads(line) for line in sink.read_text().splitlines()]


def test_run_fills_all_four_tables_and_a_second_run_adds_nothing(
    spark: SparkSession, data_dir: Path
) -> None:
    golden = (FIXTURES / "consumer-push.otlp.bin").read_bytes()
    _land_in_order(
        data_dir,
        _pushes(0, 3, 6000.0, SLOW) + _pushes(0, 3, 10.0, FAST),
        [*_pushes(3, 3, 7000.0, SLOW), Push(T0_US + 400000000, FAST, b"")],
        [Push(T0_US + 500_000_000, str(uuid.UUID(int=3)), golden)],
    )
    PipelineJob(spark, _config(data_dir)).run()

    counts = _counts(spark, data_dir)
    golden_points = (FIXTURES / "consumer-push.txt").read_text().count("data_points {")
    assert counts["points"] == 9 * PER_PAYLOAD + golden_points
    assert counts["clients"] == 3
    assert counts["client_windows"] > 0
    alerts = spark.read.parquet(str(data_dir / "tables" / "alerts"))
    firing = alerts.where("status = 'firing'").collect()
    # One per broker copy of the latency metric (3 brokers + the coordinator, node.id -1).
    assert len(firing) == 4
    assert {row.client_instance_id for row in firing} == {SLOW}
    assert {row.attributes["node.id"] for row in firing} == {"1", "2", "3", "-1"}
    labels = firing[0].labels
    assert (labels["client_id"], labels["transactional_id"], labels["client_rack"]) == (
        "app-1",
        "tx-1",
        "rack-a",
    )
    # The last file's push (minute 8:20) comes 200 s after SLOW's last (minute 5), more than
    # 3 x its 60 s interval: SLOW went silent and its four open alerts resolve as expired.
    resolved = alerts.where("status = 'resolved'").collect()
    assert {(row.alert_id, row.resolution) for row in resolved} == {
        (row.alert_id, "expired") for row in firing
    }
    sink = _sink_lines(data_dir)
    assert sorted((line["alert_id"], line["status"]) for line in sink) == sorted(
        (row.alert_id, row.status) for row in firing + resolved
    )

    PipelineJob(spark, _config(data_dir)).run()
    assert _counts(spark, data_dir) == counts
    assert len(_sink_lines(data_dir)) == len(sink)


def test_a_replayed_batch_leaves_what_one_try_would(spark: SparkSession, data_dir: Path) -> None:
    first = land(data_dir, _pushes(0, 4, 6000.0, SLOW))
    second = land(data_dir, _pushes(4, 2, 6000.0, SLOW))

    def batch(path: Path) -> DataFrame:  # as the landing source gives it: a row per file
        return spark.createDataFrame([(f"file:{path}",)], [LANDED_FILE])

    job = PipelineJob(spark, _config(data_dir))
    job.process_batch(batch(first), 0)
    job.process_batch(batch(first), 0)  # the crash-and-replay case
    job.process_batch(batch(second), 1)
    once = data_dir.parent / "once"
    job_once = PipelineJob(spark, _config(once))
    job_once.process_batch(batch(first), 0)
    job_once.process_batch(batch(second), 1)
    assert _counts(spark, data_dir) == _counts(spark, once)
    assert _counts(spark, data_dir)["points"] == 6 * PER_PAYLOAD
    rates = spark.read.parquet(str(data_dir / "tables" / "points")).where(
        "metric_name LIKE '%request.total'"
    )
    # The first point rates from its start time (0 in an hour), then 10 a minute.
    assert {row.rate_per_second for row in rates.collect()} == {0.0, 10 / 60}
    assert len(_sink_lines(data_dir)) == len(_sink_lines(once)) == 4


def _wait_for(condition: Callable[[], bool], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail("timed out waiting for the stream")
        time.sleep(0.5)


def test_stream_picks_up_new_files_and_resumes_after_a_restart(
    spark: SparkSession, data_dir: Path
) -> None:
    (data_dir / "landing" / "pushes").mkdir(parents=True)
    query = PipelineJob(spark, _config(data_dir)).start(available_now=False)
    try:
        land(data_dir, _pushes(0, 2, 6000.0, SLOW))
        _wait_for(lambda: _counts(spark, data_dir).get("points") == 2 * PER_PAYLOAD)
        assert _sink_lines(data_dir) == []
        land(data_dir, _pushes(2, 3, 6000.0, SLOW))
        _wait_for(lambda: len(_sink_lines(data_dir)) == 4)
    finally:
        query.stop()
    land(data_dir, _pushes(5, 2, 100.0, SLOW))
    query = PipelineJob(spark, _config(data_dir)).start(available_now=False)
    try:
        _wait_for(lambda: len(_sink_lines(data_dir)) == 8)
    finally:
        query.stop()
    assert _counts(spark, data_dir)["points"] == 7 * PER_PAYLOAD
    statuses = sorted(line["status"] for line in _sink_lines(data_dir))
    assert statuses == ["firing"] * 4 + ["resolved"] * 4


def test_a_batch_spanning_midnight_is_split_by_event_day(
    spark: SparkSession, data_dir: Path
) -> None:
    midnight_us = 1_795_392_000_000_000  # 2026-11-23T00:00:00Z
    pushes = [
        Push(at_us, SLOW, producer_payload(at_us * 1000, step, latency=1.0))
        for step, at_us in enumerate((midnight_us - 30_000_000, midnight_us + 30_000_000))
    ]
    land(data_dir, pushes)
    PipelineJob(spark, _config(data_dir)).run()
    by_day = (
        spark.read.parquet(str(data_dir / "tables" / "points")).groupBy("date").count().collect()
    )
    assert {str(row["date"]): row["count"] for row in by_day} == {
        "2026-11-22": PER_PAYLOAD,
        "2026-11-23": PER_PAYLOAD,
    }


def test_a_landed_file_that_is_not_parquet_is_a_dead_letter_and_the_rest_goes_on(
    spark: SparkSession, data_dir: Path
) -> None:
    good = land(data_dir, _pushes(0, 2, 10.0, FAST))
    garbage = good.with_name("part-1-garbage.parquet")
    garbage.write_bytes(b"not a parquet file " * 8)
    truncated = good.with_name("part-2-truncated.parquet")
    truncated.write_bytes(good.read_bytes()[:-40])  # its footer cut off
    job = PipelineJob(spark, _config(data_dir))
    job.run()
    assert _counts(spark, data_dir)["points"] == 2 * PER_PAYLOAD
    assert job.rejected == {"unreadable_file": 2}
    letters = read_table(data_dir / "tables", "rejected").to_pylist()
    assert sorted((row["source"], row["reason"], row["count"]) for row in letters) == [
        (f"file:{garbage}", "unreadable_file", 1),
        (f"file:{truncated}", "unreadable_file", 1),
    ]
    assert all(row["excerpt"].startswith(b"ArrowInvalid: Parquet") for row in letters)
    # Dated by when the file landed (its modification time), as a push by its receipt.
    landed_on = {datetime.fromtimestamp(p.stat().st_mtime, UTC) for p in (garbage, truncated)}
    assert {row["received_at"] for row in letters} == landed_on
    PipelineJob(spark, _config(data_dir)).run()  # nothing new: no dead letter twice
    assert len(read_table(data_dir / "tables", "rejected")) == 2
