"""Spark schemas of the landing zone, the decoded points and the pipeline's state.

State schemas are DDL strings: parsing DDL needs a running session.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from clientmetrics.telemetry.otlp_arrow import POINT_SCHEMA

#: The landing contract (docs/landing.md), in Arrow.
LANDING_ARROW = pa.schema(
    [
        ("received_at", pa.timestamp("us", tz="UTC")),
        ("client_instance_id", pa.string()),
        ("subscription_id", pa.int32()),
        ("terminating", pa.bool_()),
        ("client_id", pa.string()),
        ("client_software_name", pa.string()),
        ("client_software_version", pa.string()),
        ("client_source_address", pa.string()),
        ("client_source_port", pa.int32()),
        ("principal", pa.string()),
        ("node_id", pa.int32()),
        ("compression_type", pa.int8()),
        ("push_interval_ms", pa.int32()),
        ("payload", pa.binary()),
    ]
)

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

#: Per series, what the temporality normaliser carries from one batch to the next.
SERIES_STATE = "series STRING, last_time TIMESTAMP, last_start TIMESTAMP, last_cumulative DOUBLE"

#: Open (not yet closed by the watermark) per-client windows.
WINDOW_STATE = (
    "series STRING, client_instance_id STRING, metric_name STRING,"
    " attributes MAP<STRING, STRING>, window_start TIMESTAMP, window_end TIMESTAMP,"
    " count BIGINT, sum DOUBLE, min DOUBLE, max DOUBLE, last DOUBLE, last_time TIMESTAMP"
)

#: Open alert episodes: the condition holds, and may or may not have fired yet.
ALERT_STATE = (
    "rule STRING, series STRING, client_instance_id STRING, metric_name STRING,"
    " attributes MAP<STRING, STRING>, started_at TIMESTAMP,"
    " last_true_at TIMESTAMP, high DOUBLE, low DOUBLE, fired_at TIMESTAMP"
)

#: How far event time has got (one row).
PROGRESS = "max_event_time TIMESTAMP"
