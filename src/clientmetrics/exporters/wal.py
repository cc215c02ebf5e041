"""The landing exporter's write-ahead-log record format.

A segment file is ``MAGIC`` followed by records. A record is a little-endian
``uint32`` body length, a ``uint32`` CRC32C of the body, then the body: the fixed
fields of an ``AcceptedPush``, five ``uint32`` string lengths, the five UTF-8
strings, and the payload (the rest of the body). A crash can leave a torn record at
the tail; reading stops at the first record that is short or fails its CRC, and
everything before it is intact because every acknowledged record was fsynced.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import crc32c

from clientmetrics.telemetry.model import AcceptedPush

MAGIC = b"CMWAL001"
SUFFIX = ".wal"

_HEADER = struct.Struct("<II")
# received_at_ms, instance id, subscription_id, terminating, source port, node id,
# compression type, push interval, then the byte lengths of the five strings.
_FIXED = struct.Struct("<q16siBiibiIIIII")
_MS_PER_HOUR = 3_600_000


def encode_record(push: AcceptedPush) -> bytes:
    """One framed WAL record holding every column of ``push``."""
    texts = (
        push.client_id.encode(),
        push.client_software_name.encode(),
        push.client_software_version.encode(),
        push.client_source_address.encode(),
        push.principal.encode(),
    )
    body = b"".join(
        (
            _FIXED.pack(
                push.received_at_ms,
                push.client_instance_id.bytes,
                push.subscription_id,
                push.terminating,
                push.client_source_port,
                push.node_id,
                push.compression_type,
                push.push_interval_ms,
                *map(len, texts),
            ),
            *texts,
            push.payload,
        )
    )
    return _HEADER.pack(len(body), crc32c.crc32c(body)) + body


@dataclass(slots=True)
class Columns:
    """Decoded records, column by column, ready to become an Arrow table."""

    received_at_us: list[int] = field(default_factory=list)
    client_instance_id: list[str] = field(default_factory=list)
    subscription_id: list[int] = field(default_factory=list)
    terminating: list[bool] = field(default_factory=list)
    client_id: list[str] = field(default_factory=list)
    client_software_name: list[str] = field(default_factory=list)
    client_software_version: list[str] = field(default_factory=list)
    client_source_address: list[str] = field(default_factory=list)
    client_source_port: list[int] = field(default_factory=list)
    principal: list[str] = field(default_factory=list)
    node_id: list[int] = field(default_factory=list)
    compression_type: list[int] = field(default_factory=list)
    push_interval_ms: list[int] = field(default_factory=list)
    payload: list[bytes] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.received_at_us)


@dataclass(frozen=True, slots=True)
class SegmentContents:
    """What a segment file holds: its intact records and where they end."""

    columns: Columns
    valid_bytes: int
    total_bytes: int

    @property
    def torn_bytes(self) -> int:
        """Bytes after the last intact record (a torn tail, dropped)."""
        return self.total_bytes - self.valid_bytes


def decode_segment(data: bytes) -> SegmentContents:
    """Decode every intact record of a segment file; stop at the first bad one."""
    cols = Columns()
    if not data.startswith(MAGIC):
        return SegmentContents(cols, 0, len(data))
    view = memoryview(data)
    offset = len(MAGIC)
    end = len(data)
    while offset + _HEADER.size <= end:
        length, checksum = _HEADER.unpack_from(view, offset)
        start = offset + _HEADER.size
        if length < _FIXED.size or start + length > end:
            break
        body = view[start : start + length]
        if crc32c.crc32c(body) != checksum:
            break
        _decode_body(body, cols)
        offset = start + length
    return SegmentContents(cols, offset, end)


def _decode_body(body: memoryview, cols: Columns) -> None:
    (received_ms, instance, sub_id, terminating, port, node, compression, interval, *lengths) = (
        _FIXED.unpack_from(body)
    )
    pos = _FIXED.size
    texts = []
    for length in lengths:
        texts.append(str(body[pos : pos + length], "utf-8"))
        pos += length
    h = instance.hex()
    cols.received_at_us.append(received_ms * 1000)
    cols.client_instance_id.append(f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
    cols.subscription_id.append(sub_id)
    cols.terminating.append(bool(terminating))
    cols.client_id.append(texts[0])
    cols.client_software_name.append(texts[1])
    cols.client_software_version.append(texts[2])
    cols.client_source_address.append(texts[3])
    cols.client_source_port.append(port)
    cols.principal.append(texts[4])
    cols.node_id.append(node)
    cols.compression_type.append(compression)
    cols.push_interval_ms.append(interval)
    cols.payload.append(bytes(body[pos:]))


def segment_name(first_received_ms: int, writer_id: str, sequence: int) -> str:
    """The contract's ``<first received_at epoch ms>-<writer id>-<sequence>``."""
    return f"{first_received_ms}-{writer_id}-{sequence:08d}"


def segment_first_ms(name: str) -> int:
    """The first received_at (epoch ms) encoded in a segment name."""
    first, _, _ = name.partition("-")
    return int(first)


def utc_hour(epoch_ms: int) -> int:
    """Hours since the epoch, UTC; a segment never spans two of them."""
    return epoch_ms // _MS_PER_HOUR
