"""What the broker plugin's tests read back: the topic's records and the witness's pushes."""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from clientmetrics.pipeline.core.records import RECORDS_ARROW
from clientmetrics.telemetry.otlp import metric_names
from tests.procs import wait_for


def kafka_uuid(text: str) -> uuid.UUID:
    """A Kafka ``Uuid.toString()`` (base64url, unpadded) as a UUID."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


@dataclass(frozen=True)
class Pushed:
    """One push as Kafka handed it to the launcher's recording plugin (the witness)."""

    instance: uuid.UUID
    terminating: bool
    push_interval_ms: int
    client_id: str
    principal: str
    payload: bytes


def witnessed(record_file: Path) -> list[Pushed]:
    if not record_file.exists():
        return []
    out = []
    # The plugin appends a line at a time: a last line with no newline yet is still
    # being written, and is read on the next look.
    for line in record_file.read_text().split("\n")[:-1]:
        push = json.loads(line)
        out.append(
            Pushed(
                kafka_uuid(push["instance_id"]),
                push["terminating"],
                push["push_interval_ms"],
                push["client_id"],
                push["principal"],
                base64.b64decode(push["data"]),
            )
        )
    return out


@dataclass(frozen=True)
class Record:
    """One record of the plugin's topic, decoded."""

    key: str
    headers: dict[str, str]
    header_names: tuple[str, ...]
    timestamp_ms: int
    value: bytes
    raw_headers: tuple[tuple[str, bytes], ...] = ()
    partition: int = -1

    def resource_attributes(self) -> list[dict[str, Any]]:
        request = ExportMetricsServiceRequest.FromString(self.value)
        return [
            {kv.key: getattr(kv.value, str(kv.value.WhichOneof("value"))) for kv in attrs}
            for attrs in (rm.resource.attributes for rm in request.resource_metrics)
        ]

    def metric_names(self) -> list[str]:
        return metric_names(self.value)


def as_source_records(records: list[Record]) -> pa.Table:
    """The records as Spark's Kafka source hands them to the pipeline (``RECORDS_ARROW``)."""
    return pa.table(
        {
            "key": [r.key.encode() for r in records],
            "value": [r.value for r in records],
            "topic": ["otlp_metrics"] * len(records),
            "partition": [0] * len(records),
            "offset": list(range(len(records))),
            "timestamp": [r.timestamp_ms * 1000 for r in records],
            "headers": [[{"key": k, "value": v} for k, v in r.raw_headers] for r in records],
        },
        schema=RECORDS_ARROW,
    )


class TopicReader:
    """A consumer of the whole topic from its start; ``read()`` returns everything so far."""

    def __init__(self, config: dict[str, str], topic: str) -> None:
        self.consumer = Consumer(
            {
                **config,
                "group.id": f"check-{uuid.uuid4()}",
                "auto.offset.reset": "earliest",
                "enable.metrics.push": False,
                # The plugin creates the topic when its first record comes: notice it soon.
                "topic.metadata.refresh.interval.ms": 1000,
                "log_level": 3,
            }
        )
        self.consumer.subscribe([topic])
        self.records: list[Record] = []

    def read(self, seconds: float = 0.5) -> list[Record]:
        for message in self.consumer.consume(500, seconds):
            if message.error() is not None:
                continue
            given = message.headers() or []  # a consumer's are a list (the type allows a dict)
            pairs = given.items() if isinstance(given, dict) else given
            raw = tuple((k, _bytes(v)) for k, v in pairs)
            headers = [(k, v.decode()) for k, v in raw]
            partition = message.partition()
            self.records.append(
                Record(
                    _bytes(message.key()).decode(),
                    dict(headers),
                    tuple(k for k, _ in headers),
                    message.timestamp()[1],
                    _bytes(message.value()),
                    raw,
                    -1 if partition is None else partition,
                )
            )
        return self.records

    def wait(self, predicate: Any, timeout: float, what: str) -> list[Record]:
        wait_for(lambda: predicate(self.read()), timeout, interval=0, what=what)
        return self.records

    def close(self) -> None:
        self.consumer.close()


def _bytes(value: str | bytes | None) -> bytes:
    """A key, value or header value as bytes (confluent-kafka types them loosely)."""
    if isinstance(value, str):
        return value.encode()
    return value or b""
