"""Length-prefixed framing: split feeds, many frames per feed, size limits."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clientmetrics.wire import FrameDecoder, FrameTooLarge, ProtocolError, encode_frame

PAYLOADS = [b"", b"a", bytes(range(256)), b"\x00\x00\x00\x05hello"]


def test_encode_frame_prefixes_the_big_endian_size() -> None:
    assert encode_frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert encode_frame(b"") == b"\x00\x00\x00\x00"


def test_every_split_point_yields_the_same_frames() -> None:
    stream = b"".join(encode_frame(p) for p in PAYLOADS)
    for cut in range(len(stream) + 1):
        decoder = FrameDecoder()
        frames = decoder.feed(stream[:cut]) + decoder.feed(stream[cut:])
        assert frames == PAYLOADS, cut
        assert decoder.buffered == 0


def test_byte_at_a_time() -> None:
    stream = b"".join(encode_frame(p) for p in PAYLOADS)
    decoder = FrameDecoder()
    frames: list[bytes] = []
    for index in range(len(stream)):
        frames += decoder.feed(memoryview(stream)[index : index + 1])
    assert frames == PAYLOADS


@settings(max_examples=200, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=300), max_size=8),
    cuts=st.lists(st.integers(min_value=0, max_value=3000), max_size=6),
)
def test_arbitrary_chunking_round_trips(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(encode_frame(p) for p in payloads)
    points = sorted({min(c, len(stream)) for c in cuts} | {0, len(stream)})
    decoder = FrameDecoder()
    frames: list[bytes] = []
    for start, end in itertools.pairwise(points):
        frames += decoder.feed(bytearray(stream[start:end]))
    assert frames == payloads


def test_oversized_prefix_raises_before_the_body_arrives() -> None:
    decoder = FrameDecoder(max_frame_bytes=1000)
    assert decoder.feed(b"\x00\x00") == []
    with pytest.raises(FrameTooLarge) as caught:
        decoder.feed(struct.pack(">h", 1001))
    assert caught.value.size == 1001
    assert caught.value.maximum == 1000
    assert isinstance(caught.value, ProtocolError)


def test_oversized_frame_after_a_good_one_still_raises() -> None:
    decoder = FrameDecoder(max_frame_bytes=10)
    with pytest.raises(FrameTooLarge):
        decoder.feed(encode_frame(b"ok") + struct.pack(">i", 11))


def test_frame_of_exactly_the_maximum_is_accepted() -> None:
    decoder = FrameDecoder(max_frame_bytes=10)
    assert decoder.feed(encode_frame(b"x" * 10)) == [b"x" * 10]


def test_negative_size_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="negative"):
        FrameDecoder().feed(struct.pack(">i", -1))


def test_default_maximum_is_kafkas_100_mib() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(struct.pack(">i", 104857600)) == []
    with pytest.raises(FrameTooLarge):
        FrameDecoder().feed(struct.pack(">i", 104857601))
