"""Connection limits as policy, without I/O: the shells ask, these answer.

* ``RequestBudget``: Kafka's ``queued.max.request.bytes`` idea. A connection
  reserves the declared size of a large request before its body is buffered;
  when the budget is spent it stops reading until another request completes.
* ``SourceLimit``: at most N connections per source address
  (``max.connections.per.ip``).
* ``CreationRate``: at most N new connections a second per source address
  (Kafka's per-IP ``connection_creation_rate`` quota, KIP-612).
* ``WarningLimiter``: the first few warnings per source and kind, then one
  summary per interval with the count of those suppressed.

Times are milliseconds passed in by the caller.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "SMALL_REQUEST_BYTES",
    "CreationRate",
    "LogDecision",
    "RequestBudget",
    "SourceLimit",
    "WarningLimiter",
]

#: Requests up to this size are buffered without a reservation: each connection
#: holds at most one such partial request, so they are bounded by the
#: connection count, and a clean client is served while the budget is spent.
SMALL_REQUEST_BYTES = 64 * 1024


class RequestBudget:
    """Bytes reserved for large requests still being received, across all connections."""

    __slots__ = ("_limit", "_used", "_waiters")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("the request budget must be positive")
        self._limit = limit
        self._used = 0
        self._waiters: deque[Callable[[], None]] = deque()

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def used(self) -> int:
        return self._used

    def try_reserve(self, size: int) -> bool:
        """Reserve ``size`` bytes if they fit; never over-commits."""
        if self._used + size > self._limit:
            return False
        self._used += size
        return True

    def wait(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` (once) the next time bytes are released."""
        self._waiters.append(wake)

    def release(self, size: int) -> None:
        """Return ``size`` reserved bytes and wake the connections that waited."""
        self._used = max(self._used - size, 0)
        waiters, self._waiters = self._waiters, deque()
        for wake in waiters:
            wake()


class SourceLimit:
    """Counts open connections per source address and refuses those over the cap."""

    __slots__ = ("_counts", "_maximum")

    def __init__(self, maximum: int) -> None:
        if maximum < 1:
            raise ValueError("the per-source connection cap must be positive")
        self._maximum = maximum
        self._counts: dict[str, int] = {}

    @property
    def maximum(self) -> int:
        return self._maximum

    def open(self, source: str) -> bool:
        """Count a new connection from ``source``; False (not counted) if over the cap."""
        count = self._counts.get(source, 0)
        if count >= self._maximum:
            return False
        self._counts[source] = count + 1
        return True

    def close(self, source: str) -> None:
        """Forget one connection from ``source`` (one that ``open`` accepted)."""
        count = self._counts.get(source, 0) - 1
        if count > 0:
            self._counts[source] = count
        else:
            self._counts.pop(source, None)

    def count(self, source: str) -> int:
        return self._counts.get(source, 0)


class CreationRate:
    """New connections per second per source address, as Kafka's per-IP quota (KIP-612).

    A token bucket per source: ``per_second`` tokens a second, at most one second's
    worth saved up (a client may open that many at once). A connection that finds
    no token is throttled: ``throttle_ms`` says how long until one is due (at most
    1000 ms, Kafka's bound of one quota window), and the caller holds it unread for
    that long, then closes it, as Kafka's acceptor does. A throttled attempt takes
    no token (Kafka un-records it), so a source that keeps trying is let in at the
    rate, no slower. ``per_second`` 0: no limit. At most ``max_sources`` buckets are
    kept; the source seen least recently is forgotten first (a full bucket again).
    """

    __slots__ = ("_buckets", "_max_sources", "_rate")

    def __init__(self, per_second: int, *, max_sources: int = 10_000) -> None:
        if per_second < 0:
            raise ValueError("the connection creation rate must not be negative")
        self._rate = per_second
        self._max_sources = max_sources
        #: source -> (tokens, when they were counted, ms); in order of last use.
        self._buckets: dict[str, tuple[float, int]] = {}

    @property
    def per_second(self) -> int:
        return self._rate

    def throttle_ms(self, source: str, now_ms: int) -> int:
        """0: a new connection from ``source`` may go on (it takes a token); else how
        many milliseconds to hold it before closing it."""
        rate = self._rate
        if rate == 0:
            return 0
        tokens, then = self._buckets.pop(source, (float(rate), now_ms))
        tokens = min(float(rate), tokens + max(now_ms - then, 0) * rate / 1000)
        throttle = 0
        if tokens >= 1:
            tokens -= 1
        else:
            throttle = max(1, math.ceil((1 - tokens) * 1000 / rate))
        self._buckets[source] = (tokens, now_ms)
        if len(self._buckets) > self._max_sources:
            del self._buckets[next(iter(self._buckets))]
        return throttle


@dataclass(frozen=True, slots=True)
class LogDecision:
    """Whether to log a warning now, and how many like it were suppressed before."""

    emit: bool
    suppressed: int = 0


_SILENT = LogDecision(False)
_EMIT = LogDecision(True)


class _Window:
    __slots__ = ("count", "started_ms", "suppressed")

    def __init__(self, now_ms: int) -> None:
        self.started_ms = now_ms
        self.count = 0
        self.suppressed = 0


class WarningLimiter:
    """Per (source, kind): ``burst`` warnings per ``interval_ms``, then silence.

    The first warning after a silent stretch carries the suppressed count, so a
    flood of bad frames costs a few lines per interval instead of one per frame.
    At most ``max_sources`` windows are kept (the oldest is dropped first).
    """

    __slots__ = ("_burst", "_interval", "_max", "_windows")

    def __init__(self, *, burst: int = 5, interval_ms: int = 60_000, max_sources: int = 4096):
        self._burst = burst
        self._interval = interval_ms
        self._max = max_sources
        self._windows: dict[tuple[str, str], _Window] = {}

    def check(self, source: str, kind: str, now_ms: int) -> LogDecision:
        key = (source, kind)
        window = self._windows.get(key)
        if window is None or now_ms - window.started_ms >= self._interval:
            suppressed = window.suppressed if window is not None else 0
            if window is None and len(self._windows) >= self._max:
                del self._windows[next(iter(self._windows))]
            window = self._windows[key] = _Window(now_ms)
            window.count = 1
            return LogDecision(True, suppressed) if suppressed else _EMIT
        if window.count < self._burst:
            window.count += 1
            return _EMIT
        window.suppressed += 1
        return _SILENT
