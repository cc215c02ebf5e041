"""Kafka frames over a socket with as few copies as the kernel allows.

The proxy moves megabyte Produce requests and Fetch responses it never decodes.
A ``StreamReader`` would copy each byte three times in user space (its buffer,
``read()``, a frame decoder) before the write. This protocol only moves
buffers: it receives into those its ``wire.framing.FrameReader`` lends (small
frames into one scratch buffer, large ones straight into a buffer of their own
size: ``recv_into``, zero copies), which hands back each complete frame,
without its size prefix, for the callback; every size rule and the request
budget are the reader's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

from clientmetrics.wire import ProtocolError
from clientmetrics.wire.framing import FrameReader, frame_bytes

__all__ = ["FrameProtocol", "frame_bytes"]

_WRITE_HIGH = 8 * 1024 * 1024
#: How much decrypted data a TLS connection buffers ahead of its reader (asyncio's and
#: uvloop's default: 256 KiB, which parked connections multiply).
TLS_READ_AHEAD_BYTES = 64 * 1024


def _ignore(*_args: object) -> None:
    return None


class FrameProtocol(asyncio.BufferedProtocol):
    """A framed connection: complete frames to ``on_frame``, writes with back-pressure."""

    def __init__(
        self,
        framer: FrameReader,
        on_frame: Callable[[bytes | bytearray], None],
        on_lost: Callable[[Exception | None], None],
        on_made: Callable[[asyncio.Transport], None] | None = None,
        on_writable: Callable[[], None] | None = None,
    ) -> None:
        """``framer``: the connection's reader; while it waits for the request budget
        the protocol does not read, and reads on when the budget has room."""
        self._framer = framer
        framer.on_readable = self.resume_reading
        self._on_frame = on_frame
        self._on_lost = on_lost
        self._on_made = on_made
        self._on_writable = on_writable
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
        return self._framer.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            if not self._framer.buffer_updated(nbytes, self._on_frame):
                self.pause_reading()  # until the request budget has room
        except ProtocolError as exc:
            self._fail(exc)

    def eof_received(self) -> bool:
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._can_write.set()
        self._report_lost(exc)
        # Let go of the buffers and the transport now, not whenever a collection reaches
        # this object (none does once gc.freeze moved a cycle holding it out of reach):
        # 900 reset TLS connections with partial 1 MB requests kept ~1.3 GiB.
        self._framer.clear()
        self.transport = None
        # And of the callbacks: they are the owner's bound methods, and the owner holds
        # this protocol, a cycle that only the cyclic collector would free (and never,
        # once gc.freeze has moved it to the permanent generation).
        self._on_frame = self._on_lost = self._on_writable = _ignore
        self._on_made = None

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
        if self._framer.waiting:
            return  # the scratch buffer holds a frame waiting for the request budget
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()
