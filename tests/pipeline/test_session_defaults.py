"""Local masters get shuffle partitions sized to their cores; cluster masters keep Spark's."""

from __future__ import annotations

import os

import pytest

from clientmetrics.pipeline.spark.session import local_defaults


@pytest.mark.parametrize(
    ("master", "partitions"),
    [("local", "2"), ("local[3]", "6"), ("local[2,4]", "4"), ("local[*]", None)],
)
def test_local_masters_get_twice_their_cores(master: str, partitions: str | None) -> None:
    expected = partitions or str(2 * (os.cpu_count() or 1))
    settings = local_defaults(master)
    assert settings["spark.sql.shuffle.partitions"] == expected
    # Nothing streaming turns off with a warning at every run.
    assert not any(key.startswith("spark.sql.adaptive.") for key in settings)


@pytest.mark.parametrize("master", [None, "spark://h:7077", "yarn", "k8s://https://h"])
def test_other_masters_keep_spark_settings(master: str | None) -> None:
    assert local_defaults(master) == {}
