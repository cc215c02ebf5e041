"""Landed pushes to data points: one row per OTLP data point, with its push's labels."""

from __future__ import annotations

import pyarrow as pa

from clientmetrics.pipeline.core.schemas import DECODED_ARROW, LABEL_COLUMNS
from clientmetrics.telemetry.model import PUSH_LABELS
from clientmetrics.telemetry.otlp_arrow import decode_points


def decode_pushes(pushes: pa.Table | pa.RecordBatch) -> pa.Table:
    """One row per data point (``DECODED_ARROW``), each with its push's labels.

    Empty pushes and payloads that are not valid OTLP contribute no rows. The
    broker's labels are columns, so a resource attribute of a label's name
    (the topic's records carry them there too) is not kept in
    ``resource_attributes``: a push makes the same rows from either source.
    """
    decoded = decode_points(pushes.column("payload"), drop_resource_keys=PUSH_LABELS).points
    rows = decoded.column("row")
    labels = [pushes.column(name).take(rows) for name in LABEL_COLUMNS]
    # Attribute names and values are already one label per meaning (naming.ATTRIBUTE_*).
    columns = list(decoded.columns[1:])
    return pa.Table.from_arrays(labels + columns, schema=DECODED_ARROW)
