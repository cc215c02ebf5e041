"""What the broker-added labels cost a topic record: bytes per record, raw and compressed.

Run by hand: ``.venv/bin/python bench/record_labels.py [--batch N]``.

Each push captured from a real client (``tests/data/*/*-push.otlp.bin``: the Java
client 4.4, librdkafka 2.16 and franz-go 1.22, producer and consumer) becomes the
topic record both writers produce (``exporters.topic.topic_record``, docs/record-format.md)
with three label sets: the old default (``client_id,client_instance_id``), the default
that gives the inventory a complete row (software name and version, source address and
port, principal as well) and every label. Per record it prints the record's size as
Kafka's record format v2 stores it (key, value, headers and their length prefixes; the
batch header of 61 bytes shared by a batch is left out) uncompressed, compressed alone
with LZ4 (the plugin's and the topic exporter's compression), and its share of
``--batch`` such records from as many client instances (each its own id, address, port
and principal) compressed together. The batch figure flatters: its payloads are all the
same push, which real instances' are not; the record alone is the firmer figure.
"""

from __future__ import annotations

import argparse
import json
import uuid
from collections.abc import Sequence
from pathlib import Path

import lz4.frame

from clientmetrics.exporters.topic import DEFAULT_LABELS, topic_record
from clientmetrics.telemetry.model import AcceptedPush

DATA = Path(__file__).resolve().parent.parent / "tests" / "data"
CAPTURED = {
    "java producer": ("java-4.4.0/producer-push.otlp.bin", "apache-kafka-java", "4.4.0"),
    "java consumer": ("java-4.4.0/consumer-push.otlp.bin", "apache-kafka-java", "4.4.0"),
    "librdkafka producer": ("librdkafka-2.16/producer-push.otlp.bin", "librdkafka", "2.16.0"),
    "librdkafka consumer": ("librdkafka-2.16/consumer-push.otlp.bin", "librdkafka", "2.16.0"),
    "franz-go producer": ("franz-go-1.22.3/producer-push.otlp.bin", "kgo", "v1.22.3"),
    "franz-go consumer": ("franz-go-1.22.3/consumer-push.otlp.bin", "kgo", "v1.22.3"),
}
OLD_DEFAULT = ("client_id", "client_instance_id")
EVERY = (
    *DEFAULT_LABELS,
    *(n for n in ("node_id", "listener", "security_protocol") if n not in DEFAULT_LABELS),
)


def varint_size(value: int) -> int:
    """Bytes of a zig-zag varint, as record format v2 writes its lengths."""
    zigzag = (value << 1) ^ (value >> 63)
    size = 1
    while zigzag >= 0x80:
        zigzag >>= 7
        size += 1
    return size


def v2_record(key: bytes, value: bytes, headers: Sequence[tuple[str, bytes]]) -> bytes:
    """One record as record format v2 lays it out (attributes, deltas 0), for its bytes."""
    body = bytearray(b"\x00\x00\x00")  # attributes, timestamp delta 0, offset delta 0

    def field(data: bytes) -> None:
        body.extend(b"\x00" * varint_size(len(data)))
        body.extend(data)

    field(key)
    field(value)
    body.extend(b"\x00" * varint_size(len(headers)))
    for name, data in headers:
        field(name.encode())
        field(data)
    return b"\x00" * varint_size(len(body)) + bytes(body)


def push(payload: bytes, software: tuple[str, str], index: int) -> AcceptedPush:
    """One client instance's push (its own id, address, port and principal)."""
    return AcceptedPush(
        received_at_ms=1_790_000_000_000 + index,
        client_instance_id=uuid.UUID(int=0x5F8B7C1E2A4D4E6F9B0A1C2D3E4F5A6B + index),
        subscription_id=1,
        terminating=False,
        client_id=f"orders-service-{index % 7}",
        client_software_name=software[0],
        client_software_version=software[1],
        client_source_address=f"10.{index % 3}.{index % 251}.{(index * 7) % 253 + 1}",
        client_source_port=32768 + (index * 131) % 28000,
        principal=f"User:orders-service-{index % 7}",
        node_id=1,
        listener="SASL_SSL",
        security_protocol="SASL_SSL",
        compression_type=4,
        push_interval_ms=60_000,
        payload=payload,
    )


def sizes(
    payload: bytes, software: tuple[str, str], labels: Sequence[str], batch: int
) -> tuple[float, float, float]:
    """Bytes per record: uncompressed, LZ4 alone, and its share of an LZ4 batch."""
    records = []
    for index in range(batch):
        record = topic_record(push(payload, software, index), labels)
        records.append(v2_record(record.key, record.value, record.headers))
    raw = sum(map(len, records)) / batch
    alone = sum(len(lz4.frame.compress(r)) for r in records) / batch
    together = len(lz4.frame.compress(b"".join(records))) / batch
    return raw, alone, together


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=100, help="records per compressed batch")
    args = parser.parse_args()
    sets = {"old default": OLD_DEFAULT, "default": DEFAULT_LABELS, "every label": EVERY}
    print(json.dumps(sets))
    print(f"bytes per record: raw / LZ4 alone / LZ4 in a batch of {args.batch} instances' records")
    head = "  ".join(f"{name:>22}" for name in sets)
    print(f"{'push':20} {'payload':>7}  {head}   default - old default")
    for name, (path, *software) in CAPTURED.items():
        payload = (DATA / path).read_bytes()
        got = {
            key: sizes(payload, (software[0], software[1]), labels, args.batch)
            for key, labels in sets.items()
        }
        cells = "  ".join(f"{a:7.0f}/{b:6.0f}/{c:6.0f}" for a, b, c in got.values())
        old, new = got["old default"], got["default"]
        deltas = " / ".join(
            f"{n - o:+.0f} B ({n / o - 1:+.0%})" for o, n in zip(old, new, strict=True)
        )
        print(f"{name:20} {len(payload):7d}  {cells}   {deltas}")


if __name__ == "__main__":
    main()
