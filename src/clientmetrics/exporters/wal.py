"""The landing exporter's write-ahead-log record format.

A segment file is ``MAGIC`` followed by records. A record is a little-endian
``uint32`` body length, a ``uint32`` CRC32C of the body, then the body: the fixed-width
fields of an ``AcceptedPush`` in field order, one ``uint32`` length per text
field, the UTF-8 texts, and the payload (the rest of the body). The layout is
derived from ``AcceptedPush``'s fields; a change to them changes the layout, so
``MAGIC`` must change with it (a test pins today's layout). A crash can leave a torn record at
the tail; reading stops at the first record that is short or fails its CRC, and
everything before it is intact because every acknowledged record was fsynced. The
writer zero-fills a segment ahead of its records (``landing_wal.PREALLOCATE_BYTES``)
and cuts the zeros off when it seals it: zeros after the last record are padding
(a segment of a writer that died), not a torn tail.
"""

from __future__ import annotations

import operator
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import crc32c

from clientmetrics.telemetry.model import PUSH_FIELDS, AcceptedPush, Kind, PushField

MAGIC = b"CMWAL002"
SUFFIX = ".wal"

_HEADER = struct.Struct("<II")
_MS_PER_HOUR = 3_600_000
_PACKED = {
    Kind.TIMESTAMP_MS: "q",
    Kind.UUID: "16s",
    Kind.BOOL: "B",
    Kind.INT8: "b",
    Kind.INT32: "i",
}
# The record layout follows AcceptedPush's fields: the fixed-width ones in order,
# one uint32 byte length per text field, the texts in order, then the payload.
# (Today: received_at_ms, instance id, subscription_id, terminating, source port,
# node id, compression type, push interval, then five string lengths.)
_FIXED_FIELDS = tuple(f for f in PUSH_FIELDS if f.kind in _PACKED)
_TEXT_FIELDS = tuple(f for f in PUSH_FIELDS if f.kind is Kind.TEXT)
_PAYLOAD = PUSH_FIELDS[-1]
_FIXED = struct.Struct(
    "<" + "".join(_PACKED[f.kind] for f in _FIXED_FIELDS) + "I" * len(_TEXT_FIELDS)
)
if len(_FIXED_FIELDS) + len(_TEXT_FIELDS) + 1 != len(PUSH_FIELDS):
    raise TypeError("an AcceptedPush field kind has no WAL encoding")
_FIXED_NAMES = tuple(f.name for f in _FIXED_FIELDS)
_TEXT_NAMES = tuple(f.name for f in _TEXT_FIELDS)


@dataclass(frozen=True, slots=True)
class _Layout:
    """The text fields one segment version carries, and its fixed-width struct."""

    text_fields: tuple[PushField, ...]
    fixed: struct.Struct
    #: Columns an older version lacks, with the value its records read as.
    missing: tuple[tuple[str, str], ...] = ()


#: Segments written by earlier versions are still read, so an upgrade that finds
#: unconverted WAL loses none of it. CMWAL001 had no listener labels.
_V1_MISSING = (("listener", "PLAINTEXT"), ("security_protocol", "PLAINTEXT"))
_V1_TEXT = tuple(f for f in _TEXT_FIELDS if f.name not in dict(_V1_MISSING))
_LAYOUTS = {
    MAGIC: _Layout(_TEXT_FIELDS, _FIXED),
    b"CMWAL001": _Layout(
        _V1_TEXT,
        struct.Struct(_FIXED.format[: -len(_TEXT_FIELDS)] + "I" * len(_V1_TEXT)),
        _V1_MISSING,
    ),
}


# One C call each for the fields of a record (a getattr per field, and a check per
# fixed field for a UUID, were ~5 % of a push on the event loop).
_get_texts = operator.attrgetter(*_TEXT_NAMES)
_get_fixed = operator.attrgetter(*_FIXED_NAMES)
_UUID_AT = tuple(i for i, f in enumerate(_FIXED_FIELDS) if f.kind is Kind.UUID)


def encode_record(push: AcceptedPush) -> bytes:
    """One framed WAL record holding every column of ``push``."""
    texts = [text.encode() for text in _get_texts(push)]
    fixed = list(_get_fixed(push))
    for i in _UUID_AT:
        fixed[i] = fixed[i].bytes
    body = b"".join((_FIXED.pack(*fixed, *map(len, texts)), *texts, push.payload))
    return _HEADER.pack(len(body), crc32c.crc32c(body)) + body


def _canonical_uuid(raw: bytes) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


#: How a decoded fixed value becomes its landing column's value.
_COLUMN_VALUE: dict[Kind, Callable[[Any], Any]] = {
    Kind.TIMESTAMP_MS: lambda ms: ms * 1000,
    Kind.UUID: _canonical_uuid,
    Kind.BOOL: bool,
}


class Columns:
    """Decoded records, column by column (landing column names), ready for Arrow.

    ``columns.client_id`` and ``columns["client_id"]`` are the same list;
    ``received_at`` holds epoch microseconds.
    """

    __slots__ = ("lists",)

    def __init__(self) -> None:
        self.lists: dict[str, list[Any]] = {f.column: [] for f in PUSH_FIELDS}

    def __getitem__(self, column: str) -> list[Any]:
        return self.lists[column]

    def __getattr__(self, column: str) -> list[Any]:
        if column == "received_at_us":
            column = "received_at"
        try:
            return self.lists[column]
        except KeyError:
            raise AttributeError(column) from None

    def __len__(self) -> int:
        return len(self.lists[_PAYLOAD.column])


@dataclass(frozen=True, slots=True)
class SegmentContents:
    """What a segment file holds: its intact records and where they end."""

    columns: Columns
    valid_bytes: int
    total_bytes: int
    #: Zeros after the last intact record, up to the end: preallocated, never written.
    padding_bytes: int = 0

    @property
    def torn_bytes(self) -> int:
        """Bytes after the last intact record that are not padding (a torn tail, dropped)."""
        return self.total_bytes - self.valid_bytes - self.padding_bytes


def decode_segment(data: bytes) -> SegmentContents:
    """Decode every intact record of a segment file; stop at the first bad one."""
    cols = Columns()
    data = bytes(data)  # texts are looked up by their bytes: hashable slices
    layout = _LAYOUTS.get(data[: len(MAGIC)])
    if layout is None:
        return SegmentContents(cols, 0, len(data))
    rows, texts, payloads, offset = _records(data, layout)
    # Column by column once all records are read: a list append per field per
    # record made decoding ~19 us a record, most of the converter's work.
    for f, values in zip(_FIXED_FIELDS, zip(*rows, strict=True), strict=False):
        convert = _COLUMN_VALUE.get(f.kind)
        cols[f.column].extend(values if convert is None else map(convert, values))
    # No rows: zip(*texts) is empty and the text columns stay empty.
    for f, values in zip(layout.text_fields, zip(*texts, strict=True), strict=False):
        cols[f.column].extend(values)
    cols[_PAYLOAD.column].extend(payloads)
    for column, value in layout.missing:
        cols[column].extend([value] * len(cols))
    end = len(data)
    rest = end - offset
    padding = rest if rest and data.count(0, offset) == rest else 0
    return SegmentContents(cols, offset, end, padding)


def _records(
    data: bytes, layout: _Layout
) -> tuple[list[tuple[Any, ...]], list[tuple[str, ...]], list[bytes], int]:
    """The intact records' fixed values, texts and payloads, and where they end."""
    rows: list[tuple[Any, ...]] = []
    texts: list[tuple[str, ...]] = []
    payloads: list[bytes] = []
    #: A connection's records carry the same texts: each distinct run is decoded once.
    decoded: dict[tuple[tuple[int, ...], bytes], tuple[str, ...]] = {}
    view = memoryview(data)
    offset, end = len(MAGIC), len(data)
    fixed = layout.fixed
    n_fixed = len(_FIXED_FIELDS)
    while offset + _HEADER.size <= end:
        length, checksum = _HEADER.unpack_from(view, offset)
        start = offset + _HEADER.size
        if length < fixed.size or start + length > end:
            break
        if crc32c.crc32c(view[start : start + length]) != checksum:
            break
        values = fixed.unpack_from(view, start)
        lengths = values[n_fixed:]
        pos = start + fixed.size
        stop = pos + sum(lengths)
        if stop > start + length:
            break  # text lengths past the record: not a record this writer made
        key = (lengths, data[pos:stop])
        known = decoded.get(key)
        if known is None:
            known = decoded[key] = _texts(key[1], lengths)
        rows.append(values)
        texts.append(known)
        payloads.append(data[stop : start + length])
        offset = start + length
    return rows, texts, payloads, offset


def _texts(raw: bytes, lengths: tuple[int, ...]) -> tuple[str, ...]:
    out: list[str] = []
    pos = 0
    for length in lengths:
        out.append(str(raw[pos : pos + length], "utf-8"))
        pos += length
    return tuple(out)


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


def decode_record(body: bytes | memoryview) -> AcceptedPush:
    """One record's body (after its length and CRC) back into the ``AcceptedPush``."""
    values = _FIXED.unpack_from(body)
    fields: dict[str, object] = {}
    for f, value in zip(_FIXED_FIELDS, values, strict=False):
        fields[f.name] = uuid.UUID(bytes=value) if f.kind is Kind.UUID else value
    fields["terminating"] = bool(fields["terminating"])
    pos = _FIXED.size
    for f, length in zip(_TEXT_FIELDS, values[len(_FIXED_FIELDS) :], strict=True):
        fields[f.name] = str(body[pos : pos + length], "utf-8")
        pos += length
    fields[_PAYLOAD.name] = bytes(body[pos:])
    return AcceptedPush(**fields)  # type: ignore[arg-type]


#: Size of a record's length + CRC header.
RECORD_HEADER = _HEADER


def check_record(header: bytes, body: bytes) -> bool:
    """Whether ``body`` is intact for the length + CRC ``header`` that framed it."""
    length, checksum = _HEADER.unpack(header)
    return bool(length == len(body) and crc32c.crc32c(body) == checksum)
