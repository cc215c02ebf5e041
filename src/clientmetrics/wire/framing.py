"""Kafka's length-prefixed framing: a big-endian int32 size, then that many bytes.

Sans-IO: the caller feeds whatever bytes arrived and gets back complete frames.
"""

from __future__ import annotations

import struct

from clientmetrics.wire.errors import FrameTooLarge, ProtocolError

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "FrameDecoder", "encode_frame"]

DEFAULT_MAX_FRAME_BYTES = 104857600
"""Kafka's ``socket.request.max.bytes`` default (100 MiB)."""

_SIZE = struct.Struct(">i")


class FrameDecoder:
    """Splits a byte stream into frames; one decoder per connection."""

    __slots__ = ("_buffer", "_max")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buffer = bytearray()
        self._max = max_frame_bytes

    @property
    def max_frame_bytes(self) -> int:
        """The largest frame taken now (a connection lowers it until it authenticates)."""
        return self._max

    @max_frame_bytes.setter
    def max_frame_bytes(self, value: int) -> None:
        self._max = value

    def clear(self) -> None:
        """Drop whatever is buffered (the connection is gone)."""
        self._buffer = bytearray()

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return len(self._buffer)

    @property
    def pending_size(self) -> int | None:
        """The declared size of the frame being received, ``None`` between frames."""
        if len(self._buffer) < 4:
            return None
        size: int = _SIZE.unpack_from(self._buffer, 0)[0]
        return size

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Complete frames (payload without the 4-byte size prefix).

        Raises ``FrameTooLarge`` as soon as a size prefix over the maximum is seen,
        before any of the body is buffered, and ``ProtocolError`` on a negative size.
        """
        buffer = self._buffer
        buffer += data
        frames: list[bytes] = []
        start = 0
        end = len(buffer)
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(buffer, start)
            if size < 0:
                raise ProtocolError(f"negative frame size {size}")
            if size > self._max:
                raise FrameTooLarge(size, self._max)
            if end - start - 4 < size:
                break
            frames.append(bytes(buffer[start + 4 : start + 4 + size]))
            start += 4 + size
        if start:
            # One compaction per feed keeps many small frames linear in total size.
            del buffer[:start]
        return frames


def encode_frame(payload: bytes) -> bytes:
    """``payload`` with its 4-byte size prefix."""
    return _SIZE.pack(len(payload)) + payload
