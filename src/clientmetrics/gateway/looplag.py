"""How late the event loop runs what is due: a gauge for operators, a log line per stall.

Everything a gateway process does for its clients runs on one event loop; while a
callback holds it (a garbage collection, a slow handler, anything CPU-bound), no
other connection is read or answered, and the delay lands in every client's
latency. ``LoopLag`` measures it from inside, without a benchmark: a timer is set
every ``interval_s`` and the time it fires late is one sample. ``/metrics`` shows the
largest sample and the 99th percentile over the last ``window_s``, and the most
CPU time the loop's thread used between two samples (the loop's own longest busy
stretch, whatever the host's load: a large lag with a small busy time is a host
that did not give the process a CPU, not work of the gateway's); a single
sample over ``stall_s`` is logged (``loop_stalled``, rate-limited by the caller),
with the CPU time the loop's thread used meanwhile (about the delay: the loop was
busy; far less: the process was not given a CPU, or the thread blocked in a
system call) and the longest garbage collection that ran meanwhile.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["GcPauses", "LagWindow", "LoopLag", "Stall"]


class LagWindow:
    """Lag samples (seconds) of the last ``window_s``; no I/O, times are passed in."""

    __slots__ = ("_samples", "_window")

    def __init__(self, window_s: float) -> None:
        if window_s <= 0:
            raise ValueError("window_s must be positive")
        self._window = window_s
        self._samples: deque[tuple[float, float]] = deque()

    def record(self, now_s: float, lag_s: float) -> None:
        self._samples.append((now_s, lag_s))
        self._trim(now_s)

    def _trim(self, now_s: float) -> None:
        samples, oldest = self._samples, now_s - self._window
        while samples and samples[0][0] < oldest:
            samples.popleft()

    def snapshot(self, now_s: float) -> tuple[float, float, int]:
        """(max, p99, samples) over the window; zeros when there is no sample."""
        self._trim(now_s)
        lags = sorted(lag for _, lag in self._samples)
        if not lags:
            return 0.0, 0.0, 0
        return lags[-1], lags[min(len(lags) - 1, int(0.99 * len(lags)))], len(lags)


class GcPauses:
    """Times every garbage collection (``gc.callbacks``): the longest recent one and
    the total, so a stall can be put down to a collection or cleared of it."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._started = 0.0
        #: (when it ended, how long it took, generation) of the collections since the
        #: last ``longest_since`` that took a millisecond or more.
        self._recent: deque[tuple[float, float, int]] = deque(maxlen=64)
        self.total_s = 0.0
        self.collections = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        now = self._clock()
        if phase == "start":
            self._started = now
            return
        took = now - self._started
        self.total_s += took
        self.collections += 1
        if took >= 0.001:
            self._recent.append((now, took, int(info.get("generation", -1))))

    def longest_since(self, since: float) -> tuple[float, int] | None:
        """(seconds, generation) of the longest collection that ended after ``since``."""
        found = [(took, gen) for end, took, gen in self._recent if end >= since]
        return max(found) if found else None

    def install(self) -> None:
        if self not in gc.callbacks:
            gc.callbacks.append(self)

    def uninstall(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)


@dataclass(frozen=True, slots=True)
class Stall:
    """One late timer over the threshold."""

    lag_s: float
    #: CPU time the event loop's thread used from the previous sample to this one.
    cpu_s: float
    #: The longest garbage collection during it, seconds, and its generation.
    gc_s: float | None = None
    gc_generation: int | None = None


class LoopLag:
    """Samples the loop's lateness while ``run`` runs (an owned task)."""

    def __init__(
        self,
        *,
        interval_s: float = 0.01,
        window_s: float = 60.0,
        stall_s: float = 0.1,
        on_stall: Callable[[Stall], None] | None = None,
    ) -> None:
        self.interval_s = interval_s
        self.stall_s = stall_s
        self.window = LagWindow(window_s)
        #: CPU time of the loop's thread between two samples, same window.
        self.busy = LagWindow(window_s)
        self.gc = GcPauses()
        self.stalls = 0
        self._on_stall = on_stall
        self._handle: asyncio.TimerHandle | None = None

    async def run(self) -> None:
        """Sample until cancelled (a plain timer callback, not a task step per sample:
        the probe costs the loop a few microseconds a sample)."""
        loop = asyncio.get_running_loop()
        self.gc.install()
        due = time.perf_counter() + self.interval_s
        self._handle = loop.call_later(self.interval_s, self._tick, loop, due, time.thread_time())
        try:
            await loop.create_future()  # until cancelled
        finally:
            if self._handle is not None:
                self._handle.cancel()
            self.gc.uninstall()

    def _tick(self, loop: asyncio.AbstractEventLoop, due: float, cpu_then: float) -> None:
        now, cpu = time.perf_counter(), time.thread_time()
        lag, used = max(now - due, 0.0), cpu - cpu_then
        at = time.monotonic()
        self.window.record(at, lag)
        self.busy.record(at, used)
        if lag >= self.stall_s:
            self._stalled(lag, due, used)
        self._handle = loop.call_later(
            self.interval_s, self._tick, loop, now + self.interval_s, cpu
        )

    def _stalled(self, lag: float, due: float, cpu_s: float) -> None:
        self.stalls += 1
        longest = self.gc.longest_since(due - self.interval_s)
        stall = Stall(lag, cpu_s, *(longest or (None, None)))
        if self._on_stall is not None:
            self._on_stall(stall)

    def snapshot(self) -> dict[str, float]:
        """The ``/metrics`` values (seconds)."""
        now = time.monotonic()
        lag_max, lag_p99, _ = self.window.snapshot(now)
        return {
            "event_loop_lag_max_seconds": lag_max,
            "event_loop_lag_p99_seconds": lag_p99,
            "event_loop_busy_max_seconds": self.busy.snapshot(now)[0],
            "event_loop_stalls": float(self.stalls),
            "gc_pause_seconds": self.gc.total_s,
        }
