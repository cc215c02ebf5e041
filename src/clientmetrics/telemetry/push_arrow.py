"""The landing contract's Arrow schema, derived from ``AcceptedPush``'s fields."""

from __future__ import annotations

import pyarrow as pa

from clientmetrics.telemetry.model import PUSH_FIELDS, Kind

#: Arrow type of each field kind (UUIDs as canonical text, times in UTC microseconds).
ARROW_TYPES: dict[Kind, pa.DataType] = {
    Kind.TIMESTAMP_MS: pa.timestamp("us", tz="UTC"),
    Kind.UUID: pa.string(),
    Kind.BOOL: pa.bool_(),
    Kind.INT8: pa.int8(),
    Kind.INT32: pa.int32(),
    Kind.TEXT: pa.string(),
    Kind.BYTES: pa.binary(),
}

#: The landing contract (docs/landing.md): one column per ``AcceptedPush`` field.
LANDING_ARROW = pa.schema([pa.field(f.column, ARROW_TYPES[f.kind]) for f in PUSH_FIELDS])
