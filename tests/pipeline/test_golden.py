"""The job over the golden input makes exactly the golden tables (``golden.py``)."""

from __future__ import annotations

import os
from pathlib import Path

from pyspark.sql import SparkSession

from clientmetrics.pipeline.core.rules import parse_rules
from clientmetrics.pipeline.jobs.job import PipelineConfig, PipelineJob
from tests.pipeline.golden import (
    RULES,
    TABLES,
    canonical_rows,
    golden_batches,
    golden_rows,
    read_table,
)
from tests.synthetic import land


def land_golden(data: Path) -> None:
    """Land the golden files; the file source takes them in this order (by modification time)."""
    for index, pushes in enumerate(golden_batches()):
        landed = land(data, pushes)
        os.utime(landed, (1_800_000_000 + index, 1_800_000_000 + index))


def golden_config(data: Path, **overrides: object) -> PipelineConfig:
    values: dict[str, object] = {
        "input_path": str(data / "landing" / "pushes"),
        "output_path": str(data / "tables"),
        "checkpoint_path": str(data / "checkpoints"),
        "rules": parse_rules(RULES),
        "alert_sink": str(data / "alerts.jsonl"),
        "max_files_per_trigger": 1,
    }
    values.update(overrides)
    return PipelineConfig(**values)  # type: ignore[arg-type]


def assert_golden(tables: Path) -> None:
    for name in TABLES:
        assert canonical_rows(read_table(tables, name)) == golden_rows(name), name


def test_the_golden_input_makes_the_golden_tables(spark: SparkSession, tmp_path: Path) -> None:
    land_golden(tmp_path)
    PipelineJob(spark, golden_config(tmp_path)).run()
    assert_golden(tmp_path / "tables")
