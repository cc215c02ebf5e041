"""Fixtures for more than one test folder."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def shared_spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One Spark session for the whole run (tests/spark.py); pyspark is imported on first use."""
    from tests.spark import spark_session

    yield from spark_session(tmp_path_factory)


@pytest.fixture
def spark(shared_spark: Any) -> Iterator[Any]:
    """The shared session, left with no query or job of the test running on."""
    from tests.spark import left_clean

    yield shared_spark
    left_clean(shared_spark)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path/data/landing`` on a 4 MiB tmpfs (tests/disk.py; skipped where not allowed)."""
    from tests.disk import small_tmpfs

    with small_tmpfs(tmp_path / "data" / "landing") as landing:
        yield landing


def _weight(item: pytest.Item) -> int:
    """0 for a test starting Kafka or Spark, 1 for one starting other servers, else 2."""
    starts_spark = "spark" in getattr(item, "fixturenames", ())
    if starts_spark or item.get_closest_marker("kafka") or item.get_closest_marker("spark"):
        return 0
    return 1 if item.get_closest_marker("integration") else 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Test files that start Kafka or Spark first, then other servers, then the rest.

    ``make test`` runs the files in two processes, a file at a time each: the long files
    start together at the beginning, and the short ones even the two processes out at the
    end, instead of one long file running alone last. Within a file the order is kept.
    """
    weight: dict[object, int] = {}
    for item in items:
        weight[item.path] = min(weight.get(item.path, 2), _weight(item))
    items.sort(key=lambda item: weight[item.path])


@pytest.hookimpl(trylast=True)  # after pytest-cov started measuring (and set it up for children)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Coverage measures the test processes; the servers and tools they start only when asked.

    Measuring every Python child (coverage's subprocess patch) costs each one about a
    third of a second of CPU at start and slows what it runs: about an eighth of the
    suite's time. ``make coverage`` sets ``CLIENTMETRICS_COVER_CHILDREN=1`` to measure
    them too, so paths only a gateway process reaches count.
    """
    if os.environ.get("CLIENTMETRICS_COVER_CHILDREN") != "1":
        os.environ.pop("COVERAGE_PROCESS_CONFIG", None)
