"""Records of the telemetry topic as landing rows: one row per push, whichever way it came.

The topic exporter and the broker plugin write one record per accepted push
(docs/exporters.md): the value is an OTLP ``ExportMetricsServiceRequest`` (its
field 1 is ``MetricsData``'s, so it decodes as the landed payload does, the
broker's labels among its resource attributes), the key is the client
instance id, and the headers are named as the landing columns, values as text
(integers in decimal, booleans ``true``/``false`` in any case, ``received_at``
in epoch milliseconds). A column no header names is taken from the record
where it can be (``client_instance_id`` from the key, ``received_at`` from
the record's timestamp) and is null otherwise; ``terminating`` is then false.
All of it on whole columns: no Python loop per record.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.core.schemas import LANDING_ARROW, TIMESTAMP

#: What Spark's Kafka source gives (``includeHeaders``), as the pass reads it.
RECORDS_ARROW = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", TIMESTAMP),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    ]
)


def _header_text(records: pa.Table | pa.RecordBatch, names: list[str]) -> dict[str, pa.Array]:
    """Per header name, each record's value as text (null where absent; the last one wins)."""
    headers = records.column("headers")
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    size = len(headers)
    flat = pc.list_flatten(headers)
    parents = pc.list_parent_indices(headers).to_numpy(zero_copy_only=False)
    keys = pc.struct_field(flat, "key")
    values = pc.cast(pc.struct_field(flat, "value"), pa.string())
    found = {}
    for name in names:
        where = np.flatnonzero(pc.fill_null(pc.equal(keys, name), False).to_numpy(False))
        position = np.full(size, -1, dtype=np.int64)
        position[parents[where]] = where  # ascending: a repeated header's last value stays
        found[name] = values.take(pa.array(position, mask=position < 0))
    return found


def _typed(text: pa.Array, field: pa.Field) -> pa.Array:
    if pa.types.is_boolean(field.type):
        lowered = pc.utf8_lower(pc.utf8_trim_whitespace(text))
        return pc.if_else(pc.is_null(lowered), None, pc.equal(lowered, "true"))
    if pa.types.is_timestamp(field.type):
        return pc.multiply(pc.cast(text, pa.int64()), 1000).cast(field.type)
    if pa.types.is_binary(field.type) or pa.types.is_string(field.type):
        return text.cast(field.type)
    return pc.cast(pc.utf8_trim_whitespace(text), field.type)


def landing_rows(records: pa.Table | pa.RecordBatch) -> pa.Table:
    """The landing rows (``LANDING_ARROW``) of topic records (``RECORDS_ARROW`` columns).

    A header whose value does not parse as its column's type raises
    ``pyarrow.ArrowInvalid``; the caller decides what a bad record costs.
    """
    names = [name for name in LANDING_ARROW.names if name != "payload"]
    text = _header_text(records, names)
    key = records.column("key")
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    for field in LANDING_ARROW:
        if field.name == "payload":
            columns[field.name] = pc.fill_null(records.column("value"), b"")
            continue
        column = _typed(text[field.name], field)
        if field.name == "client_instance_id":
            column = pc.coalesce(column, pc.cast(key, pa.string()))
        elif field.name == "received_at":
            column = pc.coalesce(column, pc.cast(records.column("timestamp"), field.type))
        elif field.name == "terminating":
            column = pc.fill_null(column, False)
        columns[field.name] = column
    return pa.table([columns[name] for name in LANDING_ARROW.names], schema=LANDING_ARROW)
