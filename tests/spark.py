"""One Spark session for every test that needs one (local[2], UI off, two shuffle partitions).

The pipeline's tests and the broker plugin's golden test share it through the ``spark``
fixture (tests/conftest.py): one JVM for the whole run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from clientmetrics.errors import ConfigurationError
from clientmetrics.pipeline.spark.connector import connector_jars
from clientmetrics.pipeline.spark.session import FAST_START_JAVA_OPTIONS, build_session

#: Why the Kafka source cannot run in this session (empty: its jars are on the classpath).
KAFKA_SOURCE_MISSING: list[str] = []


def spark_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """Build the session (with the Kafka connector's jars when they are here), yield, stop."""
    session = _build(tmp_path_factory)
    yield session
    session.stop()


def left_clean(session: SparkSession) -> None:
    """After a test: no query of it runs on, no job of it holds the two cores.

    A test stopped by its timeout inside a call into the JVM leaves that call
    running there (a streaming query, a job): the next test on this worker would
    wait for cores it holds, and time out in turn.
    """
    for query in session.streams.active:
        query.stop()
    session.sparkContext.cancelAllJobs()


def _build(tmp_path_factory: pytest.TempPathFactory) -> SparkSession:
    scratch = tmp_path_factory.mktemp("spark")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    try:  # `make peers` fetches them; the Kafka source's tests skip without them
        jars = {"spark.jars": ",".join(str(jar) for jar in connector_jars())}
    except ConfigurationError as exc:
        jars = {}
        KAFKA_SOURCE_MISSING.append(str(exc))
    session = build_session(
        "local[2]",
        app_name="clientmetrics-tests",
        conf={
            **jars,
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
    return session
