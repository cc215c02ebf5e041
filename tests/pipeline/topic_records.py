"""Pushes as the telemetry topic's records: value, key and headers as the topic exporter writes.

The value is ``telemetry.otlp.export_request`` of the payload with the broker's labels
(what ``exporters.topic`` sends), the key the instance id, and one header per landing
column (``core.records``): the labels as the exporter sends them, and the push's other
fields (``received_at`` in epoch milliseconds) that the pipeline needs to make the same
rows as from the landed file.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import pyarrow as pa

from clientmetrics.telemetry.model import PUSH_LABELS
from clientmetrics.telemetry.otlp import export_request


def _text(value: object) -> bytes:
    if isinstance(value, datetime):
        return str(int(value.timestamp() * 1000)).encode()
    if isinstance(value, bool):
        return b"true" if value else b"false"
    return str(value).encode()


def topic_records(landing: pa.Table) -> list[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
    """(key, value, headers) of each landing row, in order."""
    records = []
    for row in landing.to_pylist():
        labels = [(name, row[name]) for name in PUSH_LABELS]
        value = export_request([(row["payload"], labels)]) if row["payload"] else b""
        headers = [(name, _text(v)) for name, v in row.items() if name != "payload"]
        records.append((row["client_instance_id"].encode(), value, headers))
    return records


def produce(producer: object, topic: str, landing: pa.Table, partitions: Sequence[int] = ()) -> int:
    """Produce the rows' records (``partitions``: one per row, else the key decides); wait."""
    count = 0
    for index, (key, value, headers) in enumerate(topic_records(landing)):
        extra = {"partition": partitions[index]} if partitions else {}
        producer.produce(topic, value, key, headers=headers, **extra)  # type: ignore[attr-defined]
        count += 1
    assert producer.flush(30) == 0  # type: ignore[attr-defined]
    return count
