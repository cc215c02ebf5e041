"""The Produce walk: records and batch bytes from the batch headers, any version."""

from __future__ import annotations

import importlib
import struct
import uuid

import pytest

from clientmetrics.wire import ErrorCode
from clientmetrics.wire.build import build
from clientmetrics.wire.codec import write_entity
from clientmetrics.wire.errors import ProtocolError
from clientmetrics.wire.produce_walk import acknowledged, produced_parts, total

TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def batch(records: int, body: int = 20) -> bytes:
    """A magic-2 record batch of ``records`` records, ``61 + body`` bytes in all."""
    head = struct.pack(">qiib", 0, 49 + body, 0, 2) + bytes(40) + struct.pack(">i", records)
    assert len(head) == 61
    return head + bytes(body)


def uvarint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def request(version: int, partitions: list[bytes | None], topic: str = "t") -> bytes:
    flexible = version >= 9
    out = uvarint(0) if flexible else struct.pack(">h", -1)  # no transactional id
    out += struct.pack(">hi", -1, 30_000)
    out += uvarint(2) if flexible else struct.pack(">i", 1)  # one topic
    if version >= 13:
        out += TOPIC_ID.bytes
    else:
        name = topic.encode()
        out += uvarint(len(name) + 1) + name if flexible else struct.pack(">h", len(name)) + name
    out += uvarint(len(partitions) + 1) if flexible else struct.pack(">i", len(partitions))
    for index, records in enumerate(partitions):
        out += struct.pack(">i", index)
        if flexible:
            out += uvarint(0 if records is None else len(records) + 1) + (records or b"")
            out += uvarint(0)  # tagged fields
        else:
            out += struct.pack(">i", -1 if records is None else len(records)) + (records or b"")
    if flexible:
        out += uvarint(0) + uvarint(0)
    return b"HEADER" + out


@pytest.mark.parametrize("version", [3, 8, 9, 12, 13])
def test_records_and_bytes_of_every_batch_of_every_partition(version: int) -> None:
    frame = request(version, [batch(3) + batch(5, body=100), None, batch(1, body=0)])
    assert total(produced_parts(frame, 6, version)) == (9, 81 + 161 + 61, 3)


def test_a_request_that_ends_early_or_an_unknown_version_is_refused() -> None:
    frame = request(9, [batch(3)])
    with pytest.raises(ProtocolError):
        total(produced_parts(frame[:20], 6, 9))
    with pytest.raises(ProtocolError):
        total(produced_parts(frame, 6, 2))
    # A partial batch at the end is not counted (the broker judges it).
    assert total(produced_parts(request(8, [batch(2) + batch(4)[:40]]), 6, 8)) == (2, 81, 1)


def response(version: int, codes: dict[int, ErrorCode], topic: str = "t") -> bytes:
    """A Produce response body as Kafka's schema writes it (kio), one topic, a
    partition per ``codes`` entry; refused ones carry a record error and a message."""
    refused = [{"batch_index": 0, "batch_index_error_message": "refused"}]
    partitions = [
        {
            "index": index,
            "error_code": code,
            "base_offset": 40 + index,
            "log_start_offset": 0,
            "record_errors": () if code == ErrorCode.NONE else refused,
            "error_message": None if code == ErrorCode.NONE else "not the leader",
            "current_leader": {"leader_id": 2, "leader_epoch": 7},
        }
        for index, code in codes.items()
    ]
    topic_key = {"topic_id": TOPIC_ID} if version >= 13 else {"name": topic}
    body = {"responses": [{**topic_key, "partition_responses": partitions}], "throttle_time": 0}
    schema = importlib.import_module(f"kio.schema.produce.v{version}.response").ProduceResponse
    return b"HEAD" + write_entity(build(schema, body, blank=True))


@pytest.mark.parametrize("version", [3, 5, 8, 9, 10, 12, 13])
def test_only_the_partitions_the_broker_acknowledged_count(version: int) -> None:
    """Partition 1 refused (NOT_LEADER_OR_FOLLOWER): its 5 records are not produced;
    a partition the request did not carry counts nothing, whatever its code."""
    sent = produced_parts(request(version, [batch(3), batch(5, body=100), batch(1)]), 6, version)
    codes = {0: ErrorCode.NONE, 1: ErrorCode.NOT_LEADER_OR_FOLLOWER, 2: ErrorCode.NONE}
    assert acknowledged(response(version, codes), 4, version, sent) == (4, 81 + 81, 2)
    all_ok = dict.fromkeys(range(4), ErrorCode.NONE)
    assert acknowledged(response(version, all_ok), 4, version, sent) == (9, 81 + 161 + 81, 3)
    other = {0: ErrorCode.NONE}
    assert acknowledged(response(version, other, topic="u"), 4, version, sent) == (
        (3, 81, 1) if version >= 13 else (0, 0, 0)  # v13 names topics by id
    )


def test_a_response_that_ends_early_counts_nothing() -> None:
    sent = produced_parts(request(9, [batch(3)]), 6, 9)
    whole = response(9, {0: ErrorCode.NONE})
    assert acknowledged(whole, 4, 9, sent) == (3, 81, 1)
    with pytest.raises(ProtocolError):
        acknowledged(whole[:12], 4, 9, sent)
