"""The command line: options, errors, and the documented spark-submit command."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from click.testing import CliRunner
from pyspark.sql import SparkSession

from clientmetrics.cli import cli
from clientmetrics.pipeline.jobs import submit
from tests.synthetic import (
    Push,
    land,
    points_per_producer_payload,
    producer_payload,
)

BIN = Path(sys.executable).parent
T0_US = 1_795_300_000_000_000


def test_pipeline_commands_are_registered_with_their_options() -> None:
    result = CliRunner().invoke(cli, ["pipeline", "run", "--help"])
    assert result.exit_code == 0, result.output
    for option in (
        "--data-dir",
        "--master",
        "--input",
        "--output",
        "--rules",
        "--checkpoint",
        "--flush-windows",
        "--webhook",
    ):
        assert option in result.output
    result = CliRunner().invoke(cli, ["pipeline", "stream", "--help"])
    assert "--trigger-seconds" in result.output


def test_a_bad_rules_file_is_a_usage_error_before_spark_starts(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nname = "x"\nmetric = "m"\ncondition = "sometimes"\n')
    result = CliRunner().invoke(
        cli, ["pipeline", "run", "--data-dir", str(tmp_path), "--rules", str(rules)]
    )
    assert result.exit_code == 2
    assert "cannot parse condition" in result.output


def test_spark_submit_runs_the_job_as_documented(spark: SparkSession, tmp_path: Path) -> None:
    data = tmp_path / "cm-data"
    instance = str(uuid.UUID(int=9))
    pushes = [
        Push(
            T0_US + i * 60_000_000,
            instance,
            producer_payload((T0_US + i * 60_000_000) * 1000, i, latency=9000.0),
        )
        for i in range(5)
    ]
    land(data, pushes)
    rules = tmp_path / "rules.toml"
    rules.write_text(
        '[[rule]]\nname = "slow"\nmetric = "org.apache.kafka.producer.node.request.latency."\n'
        'condition = "exceeded 5000 ms for more than 180 seconds"\n'
    )
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    command = [
        str(BIN / "spark-submit"),
        "--master",
        "local[1]",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        submit.__file__,
        "run",
        "--data-dir",
        str(data),
        "--rules",
        str(rules),
        "--flush-windows",
    ]
    done = subprocess.run(command, env=env, capture_output=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    tables = data / "tables"
    points = spark.read.parquet(str(tables / "points")).count()
    assert points == 5 * points_per_producer_payload()
    assert spark.read.parquet(str(tables / "client_windows")).count() > 0
    assert spark.read.parquet(str(tables / "clients")).count() == 1
    alerts = spark.read.parquet(str(tables / "alerts")).collect()
    assert {row.status for row in alerts} == {"firing"}
    assert (data / "alerts.jsonl").read_text().count("\n") == len(alerts) == 8
