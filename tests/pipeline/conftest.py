"""One Spark session for every pipeline test (local[2], UI off, two shuffle partitions)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from clientmetrics.pipeline.spark.session import FAST_START_JAVA_OPTIONS, build_session


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    scratch = tmp_path_factory.mktemp("spark")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = build_session(
        "local[2]",
        app_name="clientmetrics-tests",
        conf={
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.extraJavaOptions": FAST_START_JAVA_OPTIONS,
            "spark.sql.codegen.wholeStage": "true",
            "spark.sql.adaptive.enabled": "false",
            "spark.local.dir": str(scratch / "local"),
            "spark.sql.warehouse.dir": str(scratch / "warehouse"),
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


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
