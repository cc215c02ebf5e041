"""Payload codecs: round-trips, golden librdkafka data, every snappy framing, bombs."""

from __future__ import annotations

import gzip
import struct
import tracemalloc
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from clientmetrics.telemetry import (
    CompressionError,
    TelemetryTooLarge,
    compress,
    compress_snappy_xerial,
    decompress,
)

from .conftest import FIXTURES

CODECS = [0, 1, 2, 3, 4]
BIG = 1 << 30


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(CODECS), st.binary(max_size=20_000))
def test_round_trip(codec: int, data: bytes) -> None:
    """decompress(compress(x)) == x for every codec."""
    assert decompress(codec, compress(codec, data), BIG) == data


@settings(max_examples=30, deadline=None)
@given(st.binary(max_size=100_000), st.integers(1, 70_000))
def test_xerial_round_trip(data: bytes, block: int) -> None:
    """Java-style xerial streams of any block size decode."""
    assert decompress(2, compress_snappy_xerial(data, block_size=block), BIG) == data


def test_golden_zstd_decompresses_to_the_golden_otlp(consumer_payload: bytes) -> None:
    """librdkafka 2.16's zstd push is exactly consumer-push.otlp.bin."""
    data = (FIXTURES / "consumer-push.otlp.zstd").read_bytes()
    assert decompress(4, data, BIG) == consumer_payload


def test_hand_built_xerial_stream(consumer_payload: bytes) -> None:
    """A xerial stream built byte by byte: magic, version 1, compat 1, [len][block]..."""
    half = len(consumer_payload) // 2
    blocks = [consumer_payload[:half], consumer_payload[half:]]
    stream = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for block in blocks:
        raw = bytes(cramjam.snappy.compress_raw(block))
        stream += struct.pack(">i", len(raw)) + raw
    assert decompress(2, stream, BIG) == consumer_payload


def test_snappy_framing_format(consumer_payload: bytes) -> None:
    """The snappy framing format (stream identifier + CRC'd chunks) is detected too."""
    framed = bytes(cramjam.snappy.compress(consumer_payload))
    assert framed.startswith(b"\xff\x06\x00\x00sNaPpY")
    assert decompress(2, framed, BIG) == consumer_payload


def test_snappy_framing_checksum_is_verified() -> None:
    """A corrupted chunk checksum is a corrupt payload, not garbage output."""
    framed = bytearray(cramjam.snappy.compress(b"hello telemetry" * 10))
    framed[14] ^= 0xFF  # first byte of the first chunk's masked CRC
    with pytest.raises(CompressionError):
        decompress(2, bytes(framed), BIG)


def test_librdkafka_style_codecs_decode() -> None:
    """Stored gzip (level 0) and plain lz4 frames, as librdkafka sends them."""
    data = b"org.apache.kafka.producer.record.queue.time.avg" * 50
    assert decompress(1, gzip.compress(data, compresslevel=0), BIG) == data
    assert (
        decompress(3, lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX64KB), BIG) == data
    )


def test_concatenated_gzip_members() -> None:
    """RFC 1952 allows several members; all are decoded."""
    assert decompress(1, gzip.compress(b"ab") + gzip.compress(b"cd"), BIG) == b"abcd"


def test_bound_is_inclusive() -> None:
    """Exactly max_bytes is fine; one byte more is too large, for every codec."""
    data = bytes(range(256)) * 40
    for codec in CODECS:
        packed = compress(codec, data)
        assert decompress(codec, packed, len(data)) == data
        with pytest.raises(TelemetryTooLarge):
            decompress(codec, packed, len(data) - 1)


def _zstd_bomb(megabytes: int) -> bytes:
    compressor = zstandard.ZstdCompressor().compressobj()
    zeros = bytes(1 << 20)
    return b"".join(compressor.compress(zeros) for _ in range(megabytes)) + compressor.flush()


def _gzip_bomb(megabytes: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(1 << 20)
    return b"".join(compressor.compress(zeros) for _ in range(megabytes)) + compressor.flush()


def _lz4_bomb(megabytes: int) -> bytes:
    compressor = lz4.frame.LZ4FrameCompressor()
    zeros = bytes(1 << 20)
    parts = [compressor.begin()] + [compressor.compress(zeros) for _ in range(megabytes)]
    return b"".join(parts) + compressor.flush()


def _xerial_bomb(megabytes: int) -> bytes:
    # 1 MiB blocks of zeros: each raw block announces its size up front.
    block = bytes(cramjam.snappy.compress_raw(bytes(1 << 20)))
    return (
        b"\x82SNAPPY\x00"
        + struct.pack(">ii", 1, 1)
        + (struct.pack(">i", len(block)) + block) * megabytes
    )


@pytest.mark.parametrize(
    ("codec", "build"), [(4, _zstd_bomb), (1, _gzip_bomb), (3, _lz4_bomb), (2, _xerial_bomb)]
)
def test_decompression_bomb_stops_at_the_bound(codec: int, build: object) -> None:
    """100 MiB of zeros → TelemetryTooLarge with ~1 MiB bound, without allocating 100 MiB."""
    bomb = build(100)  # type: ignore[operator]
    assert len(bomb) < 5 << 20
    tracemalloc.start()
    try:
        with pytest.raises(TelemetryTooLarge):
            decompress(codec, bomb, 1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_raw_snappy_header_announcing_too_much_is_refused_before_allocating() -> None:
    """A raw block's length varint is checked before decompression."""
    # varint 0x80 0x80 0x80 0x40 = 128 MiB announced, no data behind it.
    with pytest.raises(TelemetryTooLarge):
        decompress(2, b"\x80\x80\x80\x40", 1 << 20)


@pytest.mark.parametrize(
    ("codec", "data"),
    [
        (1, b"\x1f\x8b\x08\x00garbage"),
        (1, gzip.compress(b"x" * 1000, mtime=0)[:-12]),
        (2, b"\x0a\xff\xff\xff"),
        (2, b"\x82SNAPPY\x00\x00\x00\x00\x01"),
        (2, b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, 500) + b"short"),
        (3, b"\x04\x22\x4d\x18garbage"),
        (3, lz4.frame.compress(b"y" * 5000)[:-9]),
        (4, b"\x28\xb5\x2f\xfdgarbage"),
        (9, b"anything"),
    ],
)
def test_corrupt_input_is_a_compression_error(codec: int, data: bytes) -> None:
    """Truncated or corrupt streams and unknown ids raise CompressionError, nothing else."""
    with pytest.raises(CompressionError):
        decompress(codec, data, BIG)


def test_compress_rejects_unknown_codec() -> None:
    """compress() knows the five Kafka ids only."""
    with pytest.raises(CompressionError):
        compress(7, b"x")


def test_snappy_compress_is_a_raw_block() -> None:
    """compress(SNAPPY) writes what librdkafka writes: one raw block, no framing."""
    data = b"abc" * 100
    assert bytes(cramjam.snappy.decompress_raw(compress(2, data))) == data


def test_trailing_bytes_after_gzip_are_ignored() -> None:
    """Java's GZIPInputStream stops at bytes that are not another gzip member."""
    assert decompress(1, gzip.compress(b"payload") + b"\x00\x00\x00", BIG) == b"payload"


def _members(codec: int, parts: list[bytes]) -> bytes:
    if codec == 1:
        return b"".join(gzip.compress(p, mtime=0) for p in parts)
    return b"".join(lz4.frame.compress(p) for p in parts)


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from([1, 3]),
    st.lists(st.binary(min_size=0, max_size=3000).map(lambda b: b * 50), min_size=1, max_size=6),
)
def test_several_members_or_frames_decode_whatever_slices_they_straddle(
    codec: int, parts: list[bytes]
) -> None:
    """Input is fed in 64 KiB slices; a member may end anywhere inside one."""
    assert decompress(codec, _members(codec, parts), BIG) == b"".join(parts)


@pytest.mark.parametrize("codec", [1, 3])
def test_many_empty_members_or_frames_are_refused(codec: int) -> None:
    """1 MiB of empty gzip members / lz4 frames: counted, refused, not decompressed each."""
    limit = 64 + (1 << 20) // (16 * 1024)  # MAX_FRAMES + one per 16 KiB of the bound
    assert decompress(codec, _members(codec, [b"x"] * limit), 1 << 20) == b"x" * limit
    with pytest.raises(CompressionError, match="too many"):
        decompress(codec, _members(codec, [b""] * (limit + 1)), 1 << 20)
    one = len(_members(codec, [b""]))
    with pytest.raises(CompressionError, match="too many"):
        decompress(codec, _members(codec, [b""] * ((1 << 20) // one)), 1 << 20)


def test_many_snappy_chunks_are_refused() -> None:
    padding = b"\xfe\x00\x00\x00"  # a skippable chunk of length 0
    with pytest.raises(CompressionError, match="too many"):
        decompress(2, b"\xff\x06\x00\x00sNaPpY" + padding * 100_000, 1 << 20)


def test_zstd_decodes_concurrently_on_several_threads() -> None:
    """The gateway decodes pushes on a thread pool; no decompressor is shared by two."""
    from concurrent.futures import ThreadPoolExecutor

    data = bytes(range(256)) * 2000
    payload = zstandard.ZstdCompressor().compress(data)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: decompress(4, payload, BIG), range(400)))
    assert all(r == data for r in results)
