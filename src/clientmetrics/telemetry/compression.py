"""PushTelemetry payload codecs, with a hard bound on the decompressed size.

Compression ids are Kafka's ``CompressionType``: 0 none, 1 gzip, 2 snappy,
3 lz4, 4 zstd. Decompression never allocates more than ``max_bytes + 1`` bytes
of output (plus one codec block), so a decompression bomb costs nothing: every
codec is driven through a streaming or max-output API and stops as soon as the
bound is crossed.

Work is linear in the input and bounded per payload: input is fed to the
codecs in slices of a memoryview (never "the rest of the buffer" per member,
which made many tiny gzip members or lz4 frames quadratic), and gzip members,
lz4 frames and snappy blocks or chunks are counted against ``MAX_FRAMES``. Real
clients send one member or frame (snappy: one block per 32-64 KiB).

Snappy arrives in three framings and is detected, not assumed: a raw block
(librdkafka), a xerial snappy-java stream (the Java client) and the snappy
framing format.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Callable

import cramjam
import crc32c
import lz4.frame
import zstandard

from clientmetrics.errors import ClientMetricsError

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4
#: Every id Kafka's ``CompressionType.forId`` knows.
KNOWN_COMPRESSION_TYPES = (NONE, GZIP, SNAPPY, LZ4, ZSTD)

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_LEN = len(XERIAL_MAGIC) + 8  # magic, int32 version, int32 min compatible version
_FRAMED_MAGIC = b"\xff\x06\x00\x00sNaPpY"
# Output is pulled, and input fed, in slices of this size so an oversize payload
# is noticed early and no step copies more than a slice.
_CHUNK = 64 * 1024
#: Most gzip members, lz4 frames or snappy blocks/chunks one payload may hold,
#: besides one per 16 KiB of allowed output (snappy blocks hold 32-64 KiB).
MAX_FRAMES = 64


class CompressionError(ClientMetricsError):
    """A payload that cannot be compressed or decompressed with the named codec."""


class TelemetryTooLarge(ClientMetricsError):
    """The decompressed payload would exceed ``telemetry.max.bytes``."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"decompressed telemetry payload exceeds {max_bytes} bytes")
        self.max_bytes = max_bytes


class _Sink:
    """Collects decompressed output and raises as soon as it passes the bound."""

    __slots__ = ("_frames", "_max", "_parts", "_size")

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._parts: list[bytes] = []
        self._size = 0
        self._frames = MAX_FRAMES + max_bytes // (16 * 1024)

    def count_frame(self) -> None:
        """One more member, frame, block or chunk; a payload of too many is refused."""
        self._frames -= 1
        if self._frames < 0:
            raise CompressionError("too many compressed members or frames in one payload")

    @property
    def room(self) -> int:
        """How many more bytes may arrive, plus one so overflow is detectable."""
        return self._max - self._size + 1

    def add(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._size > self._max:
            raise TelemetryTooLarge(self._max)
        self._parts.append(chunk)

    def check_announced(self, size: int) -> None:
        """Fail before allocating when a header announces too much output."""
        if self._size + size > self._max:
            raise TelemetryTooLarge(self._max)

    def result(self) -> bytes:
        return b"".join(self._parts)


def _gunzip(data: bytes, sink: _Sink) -> None:
    view = memoryview(data)
    pos, end = 0, len(view)
    # Like Java's GZIPInputStream: further members are read, trailing non-gzip bytes ignored.
    while pos < end and (pos == 0 or data.startswith(b"\x1f\x8b", pos)):
        sink.count_frame()
        # wbits 47 accepts gzip and zlib headers; concatenated gzip members are legal.
        inflater = zlib.decompressobj(wbits=47)
        while not inflater.eof:
            if inflater.unconsumed_tail:
                piece: bytes | memoryview = inflater.unconsumed_tail
            elif pos < end:
                piece = view[pos : pos + _CHUNK]
                pos += len(piece)
            else:
                raise CompressionError("truncated gzip stream")
            sink.add(inflater.decompress(piece, min(sink.room, _CHUNK)))
        # What the member left of the last slice fed belongs to the next one.
        pos -= len(inflater.unused_data)


def _snappy_block(block: bytes, sink: _Sink) -> bytes:
    # A raw block starts with its uncompressed length: check it before allocating.
    sink.check_announced(cramjam.snappy.decompress_raw_len(block))
    chunk = bytes(cramjam.snappy.decompress_raw(block))
    sink.add(chunk)
    return chunk


def _snappy_xerial(data: bytes, sink: _Sink) -> None:
    if len(data) < _XERIAL_HEADER_LEN:
        raise CompressionError("truncated xerial snappy header")
    pos = _XERIAL_HEADER_LEN
    while pos < len(data):
        if pos + 4 > len(data):
            raise CompressionError("truncated xerial snappy block length")
        (length,) = struct.unpack_from(">i", data, pos)
        sink.count_frame()
        pos += 4
        if length < 0 or pos + length > len(data):
            raise CompressionError("truncated xerial snappy block")
        _snappy_block(data[pos : pos + length], sink)
        pos += length


def _masked_crc(data: bytes) -> int:
    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _snappy_framed(data: bytes, sink: _Sink) -> None:
    pos = 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise CompressionError("truncated snappy frame header")
        kind = data[pos]
        length = int.from_bytes(data[pos + 1 : pos + 4], "little")
        body = data[pos + 4 : pos + 4 + length]
        if len(body) != length:
            raise CompressionError("truncated snappy frame")
        pos += 4 + length
        sink.count_frame()
        if kind in (0x00, 0x01):
            if length < 4:
                raise CompressionError("short snappy frame")
            if kind == 0x00:
                chunk = _snappy_block(body[4:], sink)
            else:
                chunk = body[4:]
                sink.add(chunk)
            # The checksum covers the uncompressed bytes of this chunk.
            if _masked_crc(chunk) != int.from_bytes(body[:4], "little"):
                raise CompressionError("snappy frame checksum mismatch")
        elif kind == 0xFF or 0x80 <= kind <= 0xFE:
            continue  # stream identifier, padding and skippable chunks
        else:
            raise CompressionError(f"reserved unskippable snappy chunk type {kind:#x}")


def _unsnappy(data: bytes, sink: _Sink) -> None:
    if data.startswith(XERIAL_MAGIC):
        _snappy_xerial(data, sink)
    elif data.startswith(_FRAMED_MAGIC):
        _snappy_framed(data, sink)
    else:
        _snappy_block(data, sink)


def _unlz4(data: bytes, sink: _Sink) -> None:
    view = memoryview(data)
    pos, end = 0, len(view)
    while pos < end:
        sink.count_frame()
        inflater = lz4.frame.LZ4FrameDecompressor()
        while not inflater.eof:
            piece: bytes | memoryview = b""
            if inflater.needs_input:
                if pos >= end:
                    raise CompressionError("truncated lz4 frame")
                piece = view[pos : pos + _CHUNK]
                pos += len(piece)
            sink.add(inflater.decompress(piece, max_length=min(sink.room, _CHUNK)))
        pos -= len(inflater.unused_data or b"")


#: Idle zstd decompressors. One may not be used by two threads at once and the
#: gateway decodes on a thread pool; ``list.pop``/``append`` are atomic, so each
#: call borrows its own (creating one costs ~20 us, borrowing ~0).
_ZSTD_IDLE: list[zstandard.ZstdDecompressor] = [zstandard.ZstdDecompressor()]


def _unzstd(data: bytes, sink: _Sink) -> None:
    # Fast path for the common case (librdkafka, the Java client): one frame that
    # declares a content size within the room left. libzstd rejects a frame whose
    # output differs from its declared size, so this cannot overrun the bound.
    try:
        declared = zstandard.frame_content_size(data)
    except zstandard.ZstdError as exc:
        raise CompressionError(f"corrupt zstd data: {exc}") from exc
    if 0 <= declared < sink.room:
        try:
            decompressor = _ZSTD_IDLE.pop()
        except IndexError:
            decompressor = zstandard.ZstdDecompressor()
        try:
            one = decompressor.decompressobj()
            out = one.decompress(data)
        except zstandard.ZstdError as exc:
            raise CompressionError(f"corrupt zstd data: {exc}") from exc
        finally:
            _ZSTD_IDLE.append(decompressor)
        if one.eof and not one.unused_data:
            sink.add(out)
            return
        # More than one frame: the bounded streaming path below reads them all.
    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    while chunk := reader.read(min(sink.room, _CHUNK)):
        sink.add(chunk)


_DECODERS: dict[int, Callable[[bytes, _Sink], None]] = {
    GZIP: _gunzip,
    SNAPPY: _unsnappy,
    LZ4: _unlz4,
    ZSTD: _unzstd,
}


def decompress(compression_type: int, data: bytes, max_bytes: int) -> bytes:
    """Decompress a PushTelemetry ``Metrics`` field, never producing more than ``max_bytes``.

    Raises ``TelemetryTooLarge`` when the output would exceed ``max_bytes`` and
    ``CompressionError`` for an unknown codec id or corrupt input.
    """
    sink = _Sink(max_bytes)
    if compression_type == NONE:
        sink.add(bytes(data))
        return sink.result()
    decoder = _DECODERS.get(compression_type)
    if decoder is None:
        raise CompressionError(f"unsupported compression type {compression_type}")
    try:
        decoder(bytes(data), sink)
    except (zlib.error, cramjam.DecompressionError, RuntimeError, zstandard.ZstdError) as exc:
        # lz4 reports corrupt frames as RuntimeError; translate once, here.
        raise CompressionError(f"corrupt payload for compression type {compression_type}") from exc
    return sink.result()


def compress_snappy_xerial(data: bytes, block_size: int = 32 * 1024) -> bytes:
    """A xerial snappy-java stream, as the Java client's ``SnappyOutputStream`` writes it."""
    parts = [XERIAL_MAGIC, struct.pack(">ii", 1, 1)]
    for start in range(0, len(data), block_size):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + block_size]))
        parts += [struct.pack(">i", len(block)), block]
    return b"".join(parts)


def compress(compression_type: int, data: bytes) -> bytes:
    """Compress like librdkafka: gzip, snappy as one raw block, lz4 as a frame, zstd."""
    try:
        if compression_type == NONE:
            return bytes(data)
        if compression_type == GZIP:
            return gzip.compress(data, mtime=0)
        if compression_type == SNAPPY:
            return bytes(cramjam.snappy.compress_raw(data))
        if compression_type == LZ4:
            return bytes(lz4.frame.compress(data))
        if compression_type == ZSTD:
            return bytes(zstandard.ZstdCompressor().compress(data))
    except (cramjam.CompressionError, RuntimeError, zstandard.ZstdError) as exc:
        raise CompressionError(f"cannot compress with type {compression_type}") from exc
    raise CompressionError(f"unsupported compression type {compression_type}")
