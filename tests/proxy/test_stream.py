"""FrameProtocol: frames out exactly as framed in, however the bytes are chunked."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clientmetrics.gateway.transport import FrameProtocol
from clientmetrics.wire import FrameTooLarge, ProtocolError
from clientmetrics.wire.framing import FrameReader, frame_bytes
from clientmetrics.wire.limits import RequestBudget

SIZE = struct.Struct(">i")
SCRATCH = 64 * 1024
BIG = 300 * 1024  # above the 64 KiB scratch buffer: received into its own buffer


def deliver(protocol: FrameProtocol, stream: bytes, chunks: list[int]) -> None:
    """Feed ``stream`` as recv_into would: at most ``chunk`` bytes into each buffer given."""
    position = 0
    sizes = iter(chunks)
    while position < len(stream):
        buffer = protocol.get_buffer(-1)
        want = next(sizes, len(stream))
        n = min(len(buffer), want, len(stream) - position)
        buffer[:n] = stream[position : position + n]
        protocol.buffer_updated(n)
        position += n


def collect() -> tuple[FrameProtocol, list[bytes], list[Exception | None]]:
    frames: list[bytes] = []
    lost: list[Exception | None] = []
    protocol = FrameProtocol(FrameReader(2**31 - 1), lambda f: frames.append(bytes(f)), lost.append)
    return protocol, frames, lost


payloads = st.lists(
    st.one_of(
        st.binary(max_size=2000),
        st.integers(BIG - 5, BIG + 5).map(lambda n: bytes([n % 251]) * n),
        # Around the scratch size: a frame that just fits, and one that just does not.
        st.integers(SCRATCH - 8, SCRATCH + 4).map(lambda n: bytes([n % 13]) * n),
    ),
    max_size=6,
)


@given(payloads=payloads, chunks=st.lists(st.integers(1, 400_000), max_size=50))
@settings(max_examples=80, deadline=None)
def test_any_chunking_yields_the_same_frames(payloads: list[bytes], chunks: list[int]) -> None:
    protocol, frames, lost = collect()
    stream = b"".join(b"".join(frame_bytes(p)) for p in payloads)
    deliver(protocol, stream, chunks)
    assert frames == payloads
    assert lost == []


def test_frame_bytes_prefixes_size_and_splits_only_large_frames() -> None:
    assert frame_bytes(b"abc") == [SIZE.pack(3) + b"abc"]
    big = b"x" * BIG
    pieces = frame_bytes(big)
    assert pieces[0] == SIZE.pack(BIG)
    assert pieces[1] is big


@pytest.mark.parametrize(
    ("prefix", "error"), [(SIZE.pack(-1), ProtocolError), (SIZE.pack(2000), FrameTooLarge)]
)
def test_bad_size_prefix_reports_loss(prefix: bytes, error: type[Exception]) -> None:
    lost: list[Exception | None] = []
    protocol = FrameProtocol(FrameReader(1000), lambda f: None, lost.append)
    deliver(protocol, prefix + b"\x00" * 10, [])
    assert len(lost) == 1
    assert isinstance(lost[0], error)


class _Transport:
    def __init__(self) -> None:
        self.reading = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def set_write_buffer_limits(self, high: int) -> None:
        pass


def test_a_large_frame_waits_for_the_request_budget_before_its_buffer_exists() -> None:
    frames: list[bytes] = []
    payload = bytes(range(256)) * (BIG // 256)
    budget = RequestBudget(len(payload))
    assert budget.try_reserve(len(payload))  # spent by another connection
    framer = FrameReader(2**31 - 1, budget=budget)
    protocol = FrameProtocol(framer, lambda f: frames.append(bytes(f)), lambda e: None)
    transport = _Transport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    stream = b"".join(frame_bytes(payload))
    deliver(protocol, stream[:1000], [])
    assert not transport.reading
    assert len(protocol.get_buffer(-1)) < len(payload)  # no buffer of its own yet
    protocol.resume_reading()  # in-flight back-pressure lifting must not override it
    assert not transport.reading
    budget.release(len(payload))  # the other connection's request completed
    assert transport.reading
    assert budget.used == len(payload)  # now this frame's
    deliver(protocol, stream[1000:], [])
    assert frames == [payload]
