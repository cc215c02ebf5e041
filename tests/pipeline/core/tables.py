"""Tiny inline Arrow tables for the core's tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from clientmetrics.pipeline.core.schemas import DECODED_ARROW

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    """T0 plus some seconds."""
    return T0 + timedelta(seconds=seconds)


def at_us(seconds: float) -> int:
    """``at(seconds)`` in microseconds since the epoch (a push's ``received_at``)."""
    return int(at(seconds).timestamp() * 1_000_000)


def table(schema: pa.Schema, rows: list[dict[str, Any]], **defaults: Any) -> pa.Table:
    """Rows of ``schema`` (maps as dicts); unspecified columns are null or ``defaults``."""
    columns = {}
    for field in schema:
        column = [{**defaults, **row}.get(field.name) for row in rows]
        if pa.types.is_map(field.type):
            column = [None if v is None else list(v.items()) for v in column]
        columns[field.name] = pa.array(column, field.type)
    return pa.table(columns, schema=schema)


def decoded(rows: list[dict[str, Any]]) -> pa.Table:
    """Decoded points (``DECODED_ARROW``) of instance ``i-1`` received at T0, unless given."""
    return table(DECODED_ARROW, rows, client_instance_id="i-1", received_at=T0, attributes={})


def by_column(result: pa.Table, *names: str) -> list[tuple[Any, ...]]:
    """Some columns of a table as row tuples, in the table's order."""
    data = result.select(list(names)).to_pydict()
    return list(zip(*(data[name] for name in names), strict=True))
