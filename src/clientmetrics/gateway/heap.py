"""Give the memory of closed connections back to the operating system.

A connection's buffers (a partial request of up to ``max_request_bytes``, TLS
read buffers, a stream's buffer) are freed when it closes, but glibc's malloc
keeps freed heap memory for reuse: after hundreds of parked connections close,
the process's RSS stays where it peaked. ``HeapTrimmer`` calls ``malloc_trim(0)``
once enough connections have closed since the last call (and not more often
than every few seconds): free pages anywhere in the heap go back at once. Where
the C library is not glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time
from collections.abc import Callable

__all__ = ["HeapTrimmer", "malloc_trim"]


def _find_malloc_trim() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        function: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    return function


_MALLOC_TRIM = _find_malloc_trim()


def malloc_trim() -> bool:
    """Release the heap's free pages to the OS; False where that is not possible."""
    if _MALLOC_TRIM is None:
        return False
    _MALLOC_TRIM(0)
    return True


class HeapTrimmer:
    """Trims the heap after ``after_closes`` connection closes, at most every ``every_s``."""

    def __init__(
        self,
        *,
        after_closes: int = 64,
        every_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
        trim: Callable[[], bool] = malloc_trim,
    ) -> None:
        self.after_closes = after_closes
        self.every_s = every_s
        self._clock = clock
        self._trim = trim
        self._closes = 0
        self._last = clock()
        self.trims = 0

    def closed(self) -> None:
        """A connection closed."""
        self._closes += 1

    def due(self) -> bool:
        """Whether enough connections closed since the last trim (and long enough
        ago) to trim now; counts the trim as done."""
        now = self._clock()
        if self._closes < self.after_closes or now - self._last < self.every_s:
            return False
        self._closes = 0
        self._last = now
        self.trims += 1
        return True

    def trim(self) -> bool:
        """Trim the heap: tens of milliseconds over a large, fragmented heap (about
        40-80 ms for 1 GiB), so the gateway runs it on a thread, not its event loop."""
        return self._trim()

    def maybe_trim(self) -> bool:
        """Trim now if it is ``due``; whether it did."""
        return self.due() and self.trim()
