"""Kafka frames over a socket with as few copies as the kernel allows.

The proxy moves megabyte Produce requests and Fetch responses it never decodes.
A ``StreamReader`` would copy each byte three times in user space (its buffer,
``read()``, a frame decoder) before the write. This protocol receives small
frames into one scratch buffer (one copy out each) and large frames straight
into a buffer of their own size (``recv_into``, zero copies), then hands each
complete frame, without its size prefix, to a callback.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import cast

from clientmetrics.wire import FrameTooLarge, ProtocolError

__all__ = ["FrameProtocol", "frame_bytes"]

_SIZE = struct.Struct(">i")
_SCRATCH = 64 * 1024  # frames above this are received into their own buffer
_COALESCE = 64 * 1024  # below this, prefix + frame are joined into one write
_WRITE_HIGH = 8 * 1024 * 1024
#: How much decrypted data a TLS connection buffers ahead of its reader (asyncio's and
#: uvloop's default: 256 KiB, which parked connections multiply).
TLS_READ_AHEAD_BYTES = 64 * 1024


def _ignore(*_args: object) -> None:
    return None


def frame_bytes(frame: bytes | bytearray) -> list[bytes | bytearray]:
    """The pieces to write for ``frame`` with its size prefix (one piece when small)."""
    prefix = _SIZE.pack(len(frame))
    if len(frame) < _COALESCE:
        return [prefix + frame]
    return [prefix, frame]


class FrameProtocol(asyncio.BufferedProtocol):
    """A framed connection: complete frames to ``on_frame``, writes with back-pressure."""

    def __init__(
        self,
        max_frame_bytes: int,
        on_frame: Callable[[bytes | bytearray], None],
        on_lost: Callable[[Exception | None], None],
        on_made: Callable[[asyncio.Transport], None] | None = None,
        on_writable: Callable[[], None] | None = None,
        reserve: Callable[[int], bool] | None = None,
    ) -> None:
        """``reserve(size)``: asked before a large frame's buffer is allocated; on
        False the protocol stops reading until ``retry_reserve`` is called."""
        self._max = max_frame_bytes
        self._reserve = reserve
        self._awaiting_budget = False
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._on_made = on_made
        self._on_writable = on_writable
        self._scratch = bytearray(_SCRATCH)
        self._view = memoryview(self._scratch)
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None
        self._big_filled = 0
        self._can_write = asyncio.Event()
        self._can_write.set()
        self.transport: asyncio.Transport | None = None
        self.closed = False

    # -- reading ------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but quack alike.
        self.transport = cast(asyncio.Transport, transport)
        # One MB-sized batch must not pause the pipeline (the default high mark is 64 KiB).
        self.transport.set_write_buffer_limits(high=_WRITE_HIGH)
        read_limits = getattr(self.transport, "set_read_buffer_limits", None)
        if read_limits is not None:  # a TLS transport: it decrypts ahead, even while paused
            read_limits(high=TLS_READ_AHEAD_BYTES)
        if self._on_made is not None:
            self._on_made(self.transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_filled :]
        if self._end == len(self._scratch):
            # Move the partial frame to the front; it fits (larger ones go to _big).
            pending = self._end - self._start
            self._scratch[:pending] = self._view[self._start : self._end]
            self._start, self._end = 0, pending
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        try:
            if self._big is not None:
                self._big_filled += nbytes
                if self._big_filled == len(self._big):
                    frame, self._big = self._big, None
                    self._on_frame(frame)
                return
            self._end += nbytes
            self._split()
        except ProtocolError as exc:
            self._fail(exc)

    def _split(self) -> None:
        view = self._view
        while self._end - self._start >= 4:
            (size,) = _SIZE.unpack_from(self._scratch, self._start)
            if size < 0:
                raise ProtocolError(f"negative frame size {size}")
            if size > self._max:
                raise FrameTooLarge(size, self._max)
            body = self._start + 4
            if self._end - body >= size:
                self._start = body + size
                self._on_frame(bytes(view[body : self._start]))
                if self.closed:
                    return
            elif 4 + size > len(self._scratch):
                # A large frame: the rest goes straight into a buffer of its own,
                # once the request budget has room for it (else: stop reading).
                if self._reserve is not None and not self._reserve(size):
                    self._awaiting_budget = True
                    self.pause_reading()
                    return
                have = self._end - body
                self._big = bytearray(size)
                self._big[:have] = view[body : self._end]
                self._big_filled = have
                self._start = self._end = 0
                return
            else:
                break
        if self._start == self._end:
            self._start = self._end = 0

    def retry_reserve(self) -> None:
        """The budget has room again: allocate the waiting frame's buffer, read on."""
        if not self._awaiting_budget or self.closed:
            return
        self._awaiting_budget = False
        try:
            self._split()
        except ProtocolError as exc:
            self._fail(exc)
            return
        if not self._awaiting_budget:
            self.resume_reading()

    def eof_received(self) -> bool:
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._can_write.set()
        self._report_lost(exc)
        # Let go of the buffers and the transport now, not whenever a collection reaches
        # this object (none does once gc.freeze moved a cycle holding it out of reach):
        # 900 reset TLS connections with partial 1 MB requests kept ~1.3 GiB.
        self._big = None
        self._scratch = bytearray()
        self._view = memoryview(self._scratch)
        self._start = self._end = 0
        self.transport = None
        # And of the callbacks: they are the owner's bound methods, and the owner holds
        # this protocol, a cycle that only the cyclic collector would free (and never,
        # once gc.freeze has moved it to the permanent generation).
        self._on_frame = self._on_lost = self._on_writable = _ignore
        self._on_made = self._reserve = None

    def _fail(self, exc: Exception) -> None:
        self._report_lost(exc)
        if self.transport is not None:
            self.transport.abort()

    def _report_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self.closed = True
            self._on_lost(exc)

    # -- writing ------------------------------------------------------------
    def write_frame(self, frame: bytes | bytearray) -> None:
        """Send ``frame`` with its size prefix."""
        if self.transport is None or self.closed:
            return
        pieces = frame_bytes(frame)
        if len(pieces) == 1:
            self.transport.write(pieces[0])
        else:
            self.transport.writelines(pieces)

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()
        if self._on_writable is not None:
            self._on_writable()

    @property
    def writable(self) -> bool:
        """False while the transport's buffer is above its high-water mark."""
        return self._can_write.is_set()

    async def drain(self) -> None:
        """Wait while the peer is slower than us (the transport's buffer is full)."""
        if not self._can_write.is_set():
            await self._can_write.wait()

    def pause_reading(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self._awaiting_budget:
            return  # the scratch buffer holds a frame waiting for the request budget
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()
