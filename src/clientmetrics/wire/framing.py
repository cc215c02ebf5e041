"""Kafka's length-prefixed framing: a big-endian int32 size, then that many bytes.

Sans-IO, and the one home of every frame size rule: ``FrameReader`` cuts a
server connection's received bytes into request frames (and reserves the
request budget for large ones); ``FrameDecoder`` is the clients' simpler
reader; ``frame_bytes`` and ``encode_frame`` write frames.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from clientmetrics.wire.errors import FrameTooLarge, ProtocolError
from clientmetrics.wire.limits import SMALL_REQUEST_BYTES, RequestBudget

__all__ = [
    "COALESCE_BYTES",
    "DEFAULT_MAX_FRAME_BYTES",
    "FrameDecoder",
    "FrameReader",
    "check_size",
    "encode_frame",
    "frame_bytes",
]

DEFAULT_MAX_FRAME_BYTES = 104857600
"""Kafka's ``socket.request.max.bytes`` default (100 MiB)."""
#: Below this, a frame written is joined to its size prefix (one write, one copy).
COALESCE_BYTES = 64 * 1024

_SIZE = struct.Struct(">i")
#: Frames up to SMALL_REQUEST_BYTES are received here; larger ones into their own buffer.
_SCRATCH_BYTES = SMALL_REQUEST_BYTES + 4
#: A cleared reader's buffer: nothing more is cut.
_CLEARED = bytearray()


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
            check_size(size, self._max)
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


def check_size(size: int, limit: int) -> None:
    """The frame size rule, for every reader of Kafka frames: a negative size is a
    protocol error, one over ``limit`` is ``FrameTooLarge``."""
    if size < 0:
        raise ProtocolError(f"negative frame size {size}")
    if size > limit:
        raise FrameTooLarge(size, limit)


def frame_bytes(frame: bytes | bytearray) -> list[bytes | bytearray]:
    """The pieces to write for ``frame`` with its size prefix: one piece when small,
    else the prefix and ``frame`` itself, so that a large frame is never copied."""
    prefix = _SIZE.pack(len(frame))
    if len(frame) < COALESCE_BYTES:
        return [prefix + frame]
    return [prefix, frame]


class FrameReader:
    """Cuts one connection's received bytes into frames, in buffers it lends out.

    Sans-IO, for ``asyncio.BufferedProtocol``'s ``get_buffer``/``buffer_updated``:
    frames up to ``SMALL_REQUEST_BYTES`` are received into one scratch buffer (one
    copy out each), larger ones straight into a buffer of their own size (zero
    copies), which is allocated only once the shared ``RequestBudget`` has room for
    it. Every frame size rule of a request reader lives here: the size prefix
    against ``max_frame_bytes`` (at once, before any body is buffered), a large
    frame against ``limit()`` (lower until a client that must authenticate has)
    before its buffer exists, and every frame against ``limit()`` when the core
    takes it (``taken``).

    ``deliver`` (passed to each call that may cut frames) gets each complete frame,
    without its size prefix, in order; cutting stops once ``clear`` was called.
    """

    __slots__ = (
        "_big",
        "_big_filled",
        "_budget",
        "_end",
        "_limit",
        "_max",
        "_reserved",
        "_scratch",
        "_settled",
        "_start",
        "_view",
        "on_readable",
        "starved",
        "waiting",
    )

    def __init__(
        self,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        *,
        limit: Callable[[], int] | None = None,
        budget: RequestBudget | None = None,
    ) -> None:
        self._max = max_frame_bytes
        self._limit = limit
        self._budget = budget
        self._reserved = 0
        self._settled = False
        self._scratch = bytearray(_SCRATCH_BYTES)
        self._view = memoryview(self._scratch)
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None
        self._big_filled = 0
        #: A large frame's prefix was read and the budget has no room for it yet:
        #: the shell stops reading until ``on_readable``.
        self.waiting = False
        #: The budget was found spent; ``on_readable`` is called once it has room.
        self.starved = False
        self.on_readable: Callable[[], None] | None = None

    @property
    def max_frame_bytes(self) -> int:
        return self._max

    def limit(self) -> int:
        """The largest frame taken now."""
        return self._max if self._limit is None else min(self._max, self._limit())

    # -- receiving ----------------------------------------------------------------
    def get_buffer(self) -> memoryview:
        """Where the next received bytes go (empty while ``waiting`` with scratch full)."""
        if self._big is not None:
            return memoryview(self._big)[self._big_filled :]
        if self._end == len(self._scratch) and self._start:
            # Move the partial frame to the front; it fits (larger ones go to _big).
            pending = self._end - self._start
            self._scratch[:pending] = self._view[self._start : self._end]
            self._start, self._end = 0, pending
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int, deliver: Callable[[bytes | bytearray], None]) -> bool:
        """``nbytes`` were written into the last buffer lent; False if reading must stop
        (``waiting`` for the budget). Raises ``ProtocolError`` (``FrameTooLarge``)."""
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled == len(self._big):
                frame, self._big = self._big, None
                deliver(frame)
            return True
        self._end += nbytes
        return self._cut(deliver)

    def feed(
        self, data: bytes | bytearray | memoryview, deliver: Callable[[bytes | bytearray], None]
    ) -> None:
        """Bytes received without ``recv_into``: copied through ``get_buffer``, as a
        transport would. Raises ``BufferError`` for bytes sent past a ``waiting`` frame's
        scratch room (a shell stops reading instead)."""
        view = memoryview(data).cast("B")
        position = 0
        while position < len(view) and self._scratch is not _CLEARED:
            buffer = self.get_buffer()
            n = min(len(buffer), len(view) - position)
            if n == 0:
                raise BufferError("reading is paused: the request budget is spent")
            buffer[:n] = view[position : position + n]
            position += n
            self.buffer_updated(n, deliver)

    def _cut(self, deliver: Callable[[bytes | bytearray], None]) -> bool:
        view = self._view
        while self._end - self._start >= 4 and self._scratch is not _CLEARED:
            (size,) = _SIZE.unpack_from(self._scratch, self._start)
            check_size(size, self._max)
            body = self._start + 4
            if self._end - body >= size:
                self._start = body + size
                deliver(bytes(view[body : self._start]))
            elif size > SMALL_REQUEST_BYTES:
                # A large frame: the rest goes straight into a buffer of its own,
                # once the request budget has room for it (else: stop reading).
                check_size(size, self.limit())
                if not self._reserve(size):
                    self.waiting = True
                    return False
                self._take_big(size)
                return True
            else:
                break
        if self._start == self._end:
            self._start = self._end = 0
        return True

    def _take_big(self, size: int) -> None:
        body = self._start + 4
        have = self._end - body
        self._big = bytearray(size)
        self._big[:have] = self._view[body : self._end]
        self._big_filled = have
        self._start = self._end = 0

    # -- the request budget -------------------------------------------------------
    def _reserve(self, size: int) -> bool:
        budget = self._budget
        if budget is None:
            return True
        if budget.try_reserve(size):
            self._reserved += size
            return True
        if not self.starved:
            self.starved = True
            budget.wait(self._budget_freed)
        return False

    def _budget_freed(self) -> None:
        if not self.starved or self._settled:
            return
        self.starved = False
        if self.waiting:
            (size,) = _SIZE.unpack_from(self._scratch, self._start)
            if not self._reserve(size):
                return
            self.waiting = False
            self._take_big(size)
        if self.on_readable is not None:
            self.on_readable()

    def taken(self, size: int) -> None:
        """The core takes a frame of ``size`` bytes: its reservation goes back to the
        budget. Raises ``FrameTooLarge`` if it is over ``limit()`` (a frame cut while
        a limit was higher, or a small one before authentication)."""
        if size > SMALL_REQUEST_BYTES and self._reserved >= size and self._budget is not None:
            self._reserved -= size
            self._budget.release(size)
        check_size(size, self.limit())

    def settle(self) -> None:
        """Return every reservation still held (the connection closed); a wait for the
        budget ends (reading does not resume for a closed connection)."""
        self._settled = True
        if self._reserved and self._budget is not None:
            reserved, self._reserved = self._reserved, 0
            self._budget.release(reserved)

    def clear(self) -> None:
        """The connection is gone: return the reservations, drop the buffers and the
        callbacks now (not whenever a collection reaches them), cut nothing more."""
        self.settle()
        self._big = None
        self._scratch = _CLEARED
        self._view = memoryview(_CLEARED)
        self._start = self._end = 0
        self._limit = None
        self.on_readable = None
