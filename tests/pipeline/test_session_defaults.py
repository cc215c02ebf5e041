"""Local masters get a pass task per core and shuffle partitions at twice; clusters keep Spark's."""

from __future__ import annotations

import os

import pytest

from clientmetrics.pipeline.spark.session import local_defaults


@pytest.mark.parametrize(
    ("master", "cores"),
    [("local", 1), ("local[3]", 3), ("local[2,4]", 2), ("local[*]", os.cpu_count() or 1)],
)
def test_local_masters_get_a_task_per_core(master: str, cores: int) -> None:
    settings = local_defaults(master)
    assert settings["spark.default.parallelism"] == str(cores)  # the landing pass's shares
    assert settings["spark.sql.shuffle.partitions"] == str(2 * cores)
    # Nothing streaming turns off with a warning at every run.
    assert not any(key.startswith("spark.sql.adaptive.") for key in settings)


@pytest.mark.parametrize("master", [None, "spark://h:7077", "yarn", "k8s://https://h"])
def test_other_masters_keep_spark_settings(master: str | None) -> None:
    assert local_defaults(master) == {}
