"""Tiny inline frames for the transform tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StringType, StructField, StructType

from clientmetrics.pipeline.schemas import DECODED

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
SERIES_SCHEMA = StructType([*DECODED.fields, StructField("series", StringType())])


def at(seconds: float) -> datetime:
    """T0 plus some seconds."""
    return T0 + timedelta(seconds=seconds)


def naive(moment: datetime | None) -> datetime | None:
    """Spark hands timestamps back naive (in the session's UTC)."""
    return None if moment is None else moment.replace(tzinfo=None)


def points_frame(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    """Decoded points with a series key; unspecified columns are null."""
    defaults = {"client_instance_id": "i-1", "received_at": T0, "attributes": {}}
    full = []
    for row in rows:
        merged = {**defaults, **row}
        merged.setdefault("series", f"{merged['client_instance_id']}|{merged['metric_name']}")
        full.append(tuple(merged.get(name) for name in SERIES_SCHEMA.names))
    return spark.createDataFrame(full, SERIES_SCHEMA)
