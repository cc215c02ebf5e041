"""The pipeline tests' fixtures; their Spark session is ``spark`` (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.spark import KAFKA_SOURCE_MISSING

#: Still importable from here, where the Kafka source's tests take it.
__all__ = ["KAFKA_SOURCE_MISSING"]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "cm-data"


@pytest.fixture
def small_arrow_batches(spark: SparkSession) -> Iterator[None]:
    """Arrow batches of four rows: instances straddle batch ends."""
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, "4")
    yield
    spark.conf.set(key, before)
