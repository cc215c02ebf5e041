"""Landed pushes to data points: one row per OTLP data point, with its push's labels."""

from __future__ import annotations

import pyarrow as pa

from clientmetrics.pipeline.core.schemas import DECODED_ARROW, LABEL_COLUMNS
from clientmetrics.telemetry.otlp_arrow import decode_points


def decode_pushes(pushes: pa.Table | pa.RecordBatch) -> pa.Table:
    """One row per data point (``DECODED_ARROW``), each with its push's labels.

    Empty pushes and payloads that are not valid OTLP contribute no rows.
    """
    decoded = decode_points(pushes.column("payload")).points
    rows = decoded.column("row")
    labels = [pushes.column(name).take(rows) for name in LABEL_COLUMNS]
    # Attribute names and values are already one label per meaning (naming.ATTRIBUTE_*).
    columns = list(decoded.columns[1:])
    return pa.Table.from_arrays(labels + columns, schema=DECODED_ARROW)
