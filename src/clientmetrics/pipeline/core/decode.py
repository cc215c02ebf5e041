"""Landed pushes to data points: one row per OTLP data point, with its push's labels."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from clientmetrics.pipeline.core.schemas import DECODED_ARROW, LABEL_COLUMNS
from clientmetrics.telemetry.model import PUSH_LABELS
from clientmetrics.telemetry.otlp_arrow import decode_points

#: Data-point attribute names that mean the same thing, and the one name kept:
#: franz-go's ``node_id`` is librdkafka's (and Kafka's) ``node.id``.
SAME_ATTRIBUTE = {"node_id": "node.id"}


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
    columns = list(decoded.columns[1:])
    index = decoded.schema.get_field_index("attributes") - 1
    columns[index] = one_attribute_name(columns[index])
    return pa.Table.from_arrays(labels + columns, schema=DECODED_ARROW)


def one_attribute_name(attributes: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    """Attribute maps with each name of ``SAME_ATTRIBUTE`` spelled the one way.

    So a broker's series is keyed, windowed and alerted on the same way
    whichever client library sent it.
    """
    names = pa.array(list(SAME_ATTRIBUTE))
    chunks = []
    if isinstance(attributes, pa.Array):
        attributes = pa.chunked_array([attributes])
    for chunk in attributes.chunks:
        keys = chunk.keys  # of the maps in this (possibly sliced) chunk only
        if not pc.any(pc.is_in(keys, value_set=names)).as_py():
            chunks.append(chunk)
            continue
        for old, new in SAME_ATTRIBUTE.items():
            keys = pc.if_else(pc.equal(keys, old), new, keys)
        offsets = pc.subtract(chunk.offsets, chunk.offsets[0])
        chunks.append(pa.MapArray.from_arrays(offsets, keys, chunk.items, mask=pc.is_null(chunk)))
    return pa.chunked_array(chunks, attributes.type)
