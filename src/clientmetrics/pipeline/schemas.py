"""Spark schemas of the landing zone, the decoded points and the pipeline's state.

State is defined once, in Arrow (the decode pass writes it), and read by Spark
through the derived StructTypes.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from clientmetrics.pipeline.arrow_alerts import ALERT_STATE_ARROW
from clientmetrics.telemetry import push_arrow
from clientmetrics.telemetry.otlp_arrow import POINT_SCHEMA

#: The landing contract (docs/landing.md), derived from AcceptedPush.
LANDING_ARROW = push_arrow.LANDING_ARROW

#: Landing columns copied onto every data point (the broker's labels).
LABEL_COLUMNS = tuple(
    name for name in LANDING_ARROW.names if name not in ("payload", "compression_type")
)

#: One row per data point as the decoder leaves it: labels, then the OTLP fields.
DECODED_ARROW = pa.schema(
    [LANDING_ARROW.field(name) for name in LABEL_COLUMNS]
    + [field for field in POINT_SCHEMA if field.name != "row"]
)

LANDING: StructType = from_arrow_schema(LANDING_ARROW)
DECODED: StructType = from_arrow_schema(DECODED_ARROW)

_TIMESTAMP = pa.timestamp("us", tz="UTC")

#: Per series, what the temporality normaliser carries from one batch to the next.
SERIES_STATE_ARROW = pa.schema(
    [
        ("series", pa.string()),
        ("last_time", _TIMESTAMP),
        ("last_start", _TIMESTAMP),
        ("last_cumulative", pa.float64()),
    ]
)

#: Open (not yet closed by the watermark) per-client windows: partial aggregates.
WINDOW_STATE_ARROW = pa.schema(
    [
        ("series", pa.string()),
        ("client_instance_id", pa.string()),
        ("metric_name", pa.string()),
        ("attributes", pa.map_(pa.string(), pa.string())),
        ("window_start", _TIMESTAMP),
        ("window_end", _TIMESTAMP),
        ("count", pa.int64()),
        ("sum", pa.float64()),
        ("min", pa.float64()),
        ("max", pa.float64()),
        ("last", pa.float64()),
        ("last_time", _TIMESTAMP),
    ]
)

# The same state as Spark reads and writes it: one definition for both sides.
SERIES_STATE: StructType = from_arrow_schema(SERIES_STATE_ARROW)
WINDOW_STATE: StructType = from_arrow_schema(WINDOW_STATE_ARROW)
#: Open alert episodes: the condition holds, and may or may not have fired yet.
ALERT_STATE: StructType = from_arrow_schema(ALERT_STATE_ARROW)

#: How far event time has got (one row).
PROGRESS = "max_event_time TIMESTAMP"
