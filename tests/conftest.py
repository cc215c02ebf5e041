"""Fixtures for more than one test folder."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One Spark session for the whole run (tests/spark.py); pyspark is imported on first use."""
    from tests.spark import spark_session

    yield from spark_session(tmp_path_factory)
