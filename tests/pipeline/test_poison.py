"""Hostile pushes and records through the whole job: the golden tables, plus the dead letters.

Landed files: the golden input with hostile pushes in every file, processed by
``pipeline stream`` (which must keep running), then ``run`` again (nothing new,
no dead letter twice). The Kafka topic's half is in ``test_kafka_source.py``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from clientmetrics.pipeline.core.rejects import counts_by_reason
from clientmetrics.pipeline.jobs.job import PipelineJob
from tests.pipeline.golden import golden_batches, read_table
from tests.pipeline.hostile import hostile_pushes
from tests.pipeline.test_golden import assert_golden, golden_config
from tests.synthetic import land

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _wait_for(condition: Callable[[], bool], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail("timed out waiting for the stream")
        time.sleep(0.5)


def _rejected(tables: Path) -> pa.Table:
    return read_table(tables, "rejected") if (tables / "rejected").exists() else pa.table({})


def test_hostile_pushes_leave_the_golden_tables_and_the_stream_running(
    spark: SparkSession, tmp_path: Path
) -> None:
    expected: dict[str, int] = {}
    for index, pushes in enumerate(golden_batches()):
        # Received with the batch's first push: the silent clock is the golden one.
        hostile, counts = hostile_pushes(min(p.received_at_us for p in pushes), too_many=100_001)
        for reason, count in counts.items():
            expected[reason] = expected.get(reason, 0) + count
        landed = land(tmp_path, pushes[:1] + hostile + pushes[1:])
        os.utime(landed, (1_800_000_000 + index, 1_800_000_000 + index))
    config = golden_config(tmp_path, trigger_seconds=0.5)
    job = PipelineJob(spark, config)
    query = job.start(available_now=False)
    try:
        # Three batches, the last one committed too (its trigger over): stopped while its
        # commit was still to write, the run below would replay it.
        _wait_for(lambda: job.batches >= 3 and not query.status["isTriggerActive"])
        assert query.isActive
    finally:
        query.stop()
    assert_golden(tmp_path / "tables")
    # Three files of the same hostile kinds: three times each count (pinned in hostile.py).
    assert expected == {
        "point_time_out_of_range": 9,
        "payload_not_otlp": 3,
        "point_count_out_of_range": 3,
        "too_many_points": 3,
        "invalid_instance_id": 6,
    }
    letters = _rejected(tmp_path / "tables")
    assert counts_by_reason(letters) == expected
    assert job.rejected == expected  # the job's own counters
    assert {Path(s).parent.parent.name for s in letters.column("source").to_pylist()} == {
        "date=2026-11-21"
    }
    # Run again: nothing is new, no dead letter twice.
    rows = sorted(map(repr, letters.to_pylist()))
    again = PipelineJob(spark, config)
    again.run()
    assert again.batches == 0
    assert sorted(map(repr, _rejected(tmp_path / "tables").to_pylist())) == rows
    assert len(rows) == 21  # 7 a file: the points of one push and reason are one row
