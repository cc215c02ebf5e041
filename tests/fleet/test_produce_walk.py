"""The Produce walk: records and batch bytes from the batch headers, any version."""

from __future__ import annotations

import struct
import uuid

import pytest

from clientmetrics.wire.errors import ProtocolError
from clientmetrics.wire.produce_walk import produced


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


def request(version: int, partitions: list[bytes | None]) -> bytes:
    flexible = version >= 9
    out = uvarint(0) if flexible else struct.pack(">h", -1)  # no transactional id
    out += struct.pack(">hi", -1, 30_000)
    out += uvarint(2) if flexible else struct.pack(">i", 1)  # one topic
    if version >= 13:
        out += uuid.uuid4().bytes
    else:
        out += uvarint(2) + b"t" if flexible else struct.pack(">h", 1) + b"t"
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
    assert produced(frame, 6, version) == (9, 81 + 161 + 61, 3)


def test_a_request_that_ends_early_or_an_unknown_version_is_refused() -> None:
    frame = request(9, [batch(3)])
    with pytest.raises(ProtocolError):
        produced(frame[:20], 6, 9)
    with pytest.raises(ProtocolError):
        produced(frame, 6, 2)
    # A partial batch at the end is not counted (the broker judges it).
    assert produced(request(8, [batch(2) + batch(4)[:40]]), 6, 8) == (2, 81, 1)
