"""Records and record-batch bytes of a Produce request, read off the batch headers.

The proxy forwards Produce requests undecoded; to count what each client produces
it walks the request's structure (no copy, no decompression): each partition's
``records`` is a sequence of record batches (magic 2), each ``12 + batchLength``
bytes with its record count at byte 57. Produce v3 to v13 (v9+ flexible, v13+
topic ids). A request that does not walk raises ``ProtocolError``; the caller
counts nothing for it (the broker judges the request, not this).
"""

from __future__ import annotations

import struct

from clientmetrics.wire.errors import ProtocolError

__all__ = ["produced"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
#: A record batch's header: baseOffset, batchLength, ... magic at 16, count at 57.
_BATCH_HEADER = 61


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: memoryview, pos: int) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int) -> int:
        start = self.pos
        if n < 0 or start + n > len(self.data):
            raise ProtocolError("Produce request ends early")
        self.pos = start + n
        return start

    def int16(self) -> int:
        return int(_I16.unpack_from(self.data, self.take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack_from(self.data, self.take(4))[0])

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.data[self.take(1)]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise ProtocolError("varint too long")

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def _batches(data: memoryview, start: int, end: int) -> tuple[int, int]:
    records = size = 0
    pos = start
    while pos + _BATCH_HEADER <= end:
        length = 12 + int(_I32.unpack_from(data, pos + 8)[0])
        if data[pos + 16] != 2 or pos + length > end:
            break  # an older magic, or a partial batch: the broker's to judge
        records += int(_I32.unpack_from(data, pos + 57)[0])
        size += length
        pos += length
    return records, size


def produced(frame: bytes | bytearray, body_offset: int, version: int) -> tuple[int, int]:
    """(records, record-batch bytes) of a Produce request of ``version`` in ``frame``."""
    if not 3 <= version <= 13:
        raise ProtocolError(f"Produce v{version} is not walked")
    flexible = version >= 9
    read = _Reader(memoryview(frame), body_offset)
    length = read.uvarint() - 1 if flexible else read.int16()
    read.take(max(length, 0))  # transactional_id
    read.take(6)  # acks, timeout_ms
    records = size = 0
    for _ in range(read.uvarint() - 1 if flexible else read.int32()):
        if version >= 13:
            read.take(16)  # topic_id
        else:
            read.take(read.uvarint() - 1 if flexible else read.int16())
        for _ in range(read.uvarint() - 1 if flexible else read.int32()):
            read.take(4)  # partition index
            length = read.uvarint() - 1 if flexible else read.int32()
            if length > 0:
                start = read.take(length)
                got = _batches(read.data, start, start + length)
                records, size = records + got[0], size + got[1]
            if flexible:
                read.skip_tags()
        if flexible:
            read.skip_tags()
    return records, size
