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

Whoever can write to the topic controls every byte of a record, so each value
is checked (``core.rejects``): a record with a header that is not UTF-8 or
not its column's type and range, or whose key, receipt time or size is
unusable, becomes a dead letter and the others go on. All of it on whole
columns: no Python loop per record (but for finding a bad UTF-8 value, once
a batch has one).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.core import rejects
from clientmetrics.pipeline.core.arrays import flags
from clientmetrics.pipeline.core.schemas import LANDING_ARROW, ORIGIN_ARROW, TIMESTAMP

#: What Spark's Kafka source gives (``includeHeaders``), as the pass reads it.
RECORDS_ARROW = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", TIMESTAMP),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    ]
)

#: The landing columns with the origin of each record: what ``screen_records`` keeps.
RECORD_ROWS_ARROW = pa.schema([*LANDING_ARROW, *ORIGIN_ARROW])

#: Integer headers whose meaning is narrower than their column's type.
_RANGES = {"client_source_port": (0, 65_535), "push_interval_ms": (0, 2**31 - 1)}
#: Decimal text an int64 holds (18 digits always do); ``received_at`` is one too.
_DECIMAL = "^-?[0-9]{1,18}$"
#: The latest millisecond of the year 9999: larger receipt times overflow the tables' µs.
_MAX_MILLIS = 253_402_300_799_999


def _header_values(records: pa.Table, names: list[str]) -> dict[str, pa.Array]:
    """Per header name, each record's value as bytes (null where absent; the last one wins)."""
    headers = records.column("headers").combine_chunks()
    size = len(headers)
    flat = pc.list_flatten(headers)
    parents = pc.list_parent_indices(headers).to_numpy(zero_copy_only=False)
    keys = pc.struct_field(flat, "key")
    values = pc.struct_field(flat, "value")
    found = {}
    for name in names:
        where = np.flatnonzero(pc.fill_null(pc.equal(keys, name), False).to_numpy(False))
        position = np.full(size, -1, dtype=np.int64)
        position[parents[where]] = where  # ascending: a repeated header's last value stays
        found[name] = values.take(pa.array(position, mask=position < 0))
    return found


def _utf8(raw: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The values as text (null where not UTF-8), and where they were not."""
    try:
        return pc.cast(raw, pa.string()), np.zeros(len(raw), dtype=bool)
    except pa.ArrowInvalid:  # slow path, a batch with a bad value only: find which
        bad = np.zeros(len(raw), dtype=bool)
        for index, value in enumerate(raw.to_pylist()):
            if value is not None:
                try:
                    value.decode("utf-8")
                except UnicodeDecodeError:
                    bad[index] = True
        cleaned = pc.if_else(pa.array(bad), pa.nulls(len(raw), pa.binary()), raw)
        return pc.cast(cleaned, pa.string()), bad


def _parsed(text: pa.Array, field: pa.Field) -> tuple[pa.Array, np.ndarray]:
    """Header text as its column's type (null where it is not one), and where it was not."""
    if pa.types.is_boolean(field.type):
        lowered = pc.utf8_lower(pc.utf8_trim_whitespace(text))
        ok = pc.is_in(lowered, value_set=pa.array(["true", "false"]))
        return pc.equal(lowered, "true"), pc.is_valid(text).to_numpy(False) & ~flags(ok)
    if pa.types.is_binary(field.type) or pa.types.is_string(field.type):
        return text.cast(field.type), np.zeros(len(text), dtype=bool)
    trimmed = pc.utf8_trim_whitespace(text)
    decimal = flags(pc.match_substring_regex(trimmed, _DECIMAL))
    numbers = pc.cast(pc.if_else(pa.array(decimal), trimmed, None), pa.int64())
    if pa.types.is_timestamp(field.type):
        low, high = 0, _MAX_MILLIS
    else:
        info = np.iinfo(field.type.to_pandas_dtype())
        low, high = _RANGES.get(field.name, (int(info.min), int(info.max)))
    inside = decimal & flags(pc.and_(pc.greater_equal(numbers, low), pc.less_equal(numbers, high)))
    bad = pc.is_valid(text).to_numpy(False) & ~inside
    numbers = pc.if_else(pa.array(inside), numbers, None)
    if pa.types.is_timestamp(field.type):
        return pc.multiply(numbers, 1000).cast(field.type), bad
    return pc.cast(numbers, field.type), bad


def _landing_column(
    records: pa.Table, parsed: dict[str, pa.Array], key: pa.Array, field: pa.Field
) -> pa.Array | pa.ChunkedArray:
    """One landing column of the records: its header, else what the record says, else null."""
    if field.name == "payload":
        return pc.fill_null(records.column("value"), b"")
    column = parsed[field.name]
    if field.name == "client_instance_id":
        return pc.coalesce(column, key)
    if field.name == "received_at":
        return pc.coalesce(column, pc.cast(records.column("timestamp"), field.type))
    if field.name == "terminating":
        return pc.fill_null(column, False)
    return column


def screen_records(records: pa.Table | pa.RecordBatch) -> rejects.Screened:
    """Topic records (``RECORDS_ARROW`` columns) as landing rows with their origin
    (``RECORD_ROWS_ARROW``), and the dead letters of those that cannot be used."""
    records = pa.table(records)
    names = [name for name in LANDING_ARROW.names if name != "payload"]
    raw = _header_values(records, names)
    checks: list[rejects.Check] = []
    parsed: dict[str, pa.Array] = {}
    for name in names:
        text, not_utf8 = _utf8(raw[name])
        checks.append(rejects.Check(not_utf8, rejects.HEADER_NOT_UTF8, name, raw[name]))
        parsed[name], bad = _parsed(text, LANDING_ARROW.field(name))
        checks.append(rejects.Check(bad, rejects.INVALID_HEADER, name, raw[name]))
    raw_key = records.column("key").combine_chunks()
    key, key_not_utf8 = _utf8(raw_key)
    # Only a key that is used must be text: the header names the instance otherwise.
    key_used = key_not_utf8 & ~flags(pc.is_valid(parsed["client_instance_id"]))
    checks.append(rejects.Check(key_used, rejects.HEADER_NOT_UTF8, "key", raw_key))
    columns = [_landing_column(records, parsed, key, field) for field in LANDING_ARROW]
    # Where each record was (``source`` names landed files; a record has none).
    columns += [
        pc.cast(records.column(f.name), f.type)
        if f.name in records.column_names and f.name != "source"
        else pa.nulls(records.num_rows, f.type)
        for f in ORIGIN_ARROW
    ]
    rows = pa.table(columns, schema=RECORD_ROWS_ARROW)
    checks += rejects.push_checks(rows)
    return rejects.screen(rows, checks)


def landing_rows(records: pa.Table | pa.RecordBatch) -> pa.Table:
    """The landing rows (``LANDING_ARROW``) of the usable topic records (``screen_records``)."""
    return screen_records(records).kept.select(LANDING_ARROW.names)
