"""Records and bytes of record batches, read off their headers: the one batch rule.

The proxy counts what each client produces and consumes without decoding what it
forwards: a Produce request's and a Fetch response's ``records`` fields are
sequences of record batches (magic 2), each ``12 + batchLength`` bytes with its
record count at byte 57 and its attributes at byte 21. A batch's bytes are its
whole size as on the wire (header included, compressed as sent): what the broker
counts in BytesIn/BytesOut and the Java producer in its byte totals. Compressed
batches are counted from the header, never decompressed. Control batches
(transaction markers, written by the broker) are not client records and are not
counted. Both walkers (``produce_walk``, ``fetch_walk``) read their messages with
``Walk``.
"""

from __future__ import annotations

import struct

from clientmetrics.wire.errors import ProtocolError

__all__ = ["BATCH_HEADER_BYTES", "Totals", "Walk", "batch_totals", "plus"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
#: A record batch's header: baseOffset, batchLength, ... magic at 16, attributes at 21,
#: record count at 57; the records follow.
BATCH_HEADER_BYTES = 61
_MAGIC_AT, _ATTRIBUTES_AT, _COUNT_AT = 16, 21, 57
_CONTROL = 0x20  # attributes bit 5: a control batch (transaction marker)


#: (records, bytes, batches) of a run of record batches.
Totals = tuple[int, int, int]


def plus(a: Totals, b: Totals) -> Totals:
    """``a`` and ``b`` added, measure by measure."""
    return a[0] + b[0], a[1] + b[1], a[2] + b[2]


def batch_totals(data: memoryview, start: int, end: int) -> Totals:
    """(records, bytes, batches) of the whole magic-2 batches in ``data[start:end]``.

    Stops at an older magic or a partial batch (a Produce request's is the broker's
    to judge; a Fetch response may end in one, which the client fetches again).
    """
    records = size = batches = 0
    pos = start
    while pos + BATCH_HEADER_BYTES <= end:
        length = 12 + int(_I32.unpack_from(data, pos + 8)[0])
        if data[pos + _MAGIC_AT] != 2 or length < BATCH_HEADER_BYTES or pos + length > end:
            break
        if not _I16.unpack_from(data, pos + _ATTRIBUTES_AT)[0] & _CONTROL:
            records += int(_I32.unpack_from(data, pos + _COUNT_AT)[0])
            size += length
            batches += 1
        pos += length
    return records, size, batches


class Walk:
    """A cursor over one message's bytes; ``ProtocolError`` when it ends early."""

    __slots__ = ("data", "flexible", "pos", "what")

    def __init__(self, data: memoryview, pos: int, *, flexible: bool, what: str) -> None:
        self.data = data
        self.pos = pos
        self.flexible = flexible
        self.what = what

    def take(self, n: int) -> int:
        """Skip ``n`` bytes; where they started."""
        start = self.pos
        if n < 0 or start + n > len(self.data):
            raise ProtocolError(f"{self.what} ends early")
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
                raise ProtocolError(f"{self.what}: varint too long")

    def count(self) -> int:
        """An array's length (compact when flexible); null (-1) is 0."""
        return max(self.uvarint() - 1 if self.flexible else self.int32(), 0)

    def skip_string(self) -> None:
        """A (nullable) string or bytes, compact when flexible."""
        self.take(max(self.uvarint() - 1 if self.flexible else self.int16(), 0))

    def skip_topic(self, by_id: bool) -> None:
        """A topic's name, or its 16-byte id where the version names topics by id."""
        if by_id:
            self.take(16)
        else:
            self.skip_string()

    def topic(self, by_id: bool) -> bytes:
        """A topic's name, or its 16-byte id where the version names topics by id: its bytes."""
        start = self.pos
        self.skip_topic(by_id)
        return bytes(self.data[start : self.pos])

    def batches(self) -> Totals:
        """A nullable ``records`` field: (records, bytes, batches) of its whole batches."""
        length = self.uvarint() - 1 if self.flexible else self.int32()
        if length <= 0:
            return 0, 0, 0
        start = self.take(length)
        return batch_totals(self.data, start, start + length)

    def skip_tags(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.take(self.uvarint())
