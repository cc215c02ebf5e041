"""How long to hold back the answer to a failed authentication, per source address.

Kafka delays every failed authentication by ``connection.failed.authentication.delay.ms``
(100 ms by default). Here the delay doubles with each recent failure from the same
source, up to a ceiling, so guessing passwords from one address slows down fast while
a user who mistyped once barely notices. Memory is bounded: the least recently
failing sources are forgotten first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["FailureThrottle"]


@dataclass(slots=True)
class _Record:
    failures: int
    last_ms: int


class FailureThrottle:
    """Per-source failure counts that decay; sans-IO (``now_ms`` is passed in)."""

    def __init__(
        self,
        *,
        base_delay_ms: int = 100,
        max_delay_ms: int = 5_000,
        forget_after_ms: int = 60_000,
        max_sources: int = 10_000,
    ) -> None:
        if not 0 <= base_delay_ms <= max_delay_ms:
            raise ValueError("need 0 <= base_delay_ms <= max_delay_ms")
        if max_sources < 1 or forget_after_ms < 1:
            raise ValueError("max_sources and forget_after_ms must be positive")
        self.base_delay_ms = base_delay_ms
        self.max_delay_ms = max_delay_ms
        self.forget_after_ms = forget_after_ms
        self.max_sources = max_sources
        self._sources: OrderedDict[str, _Record] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sources)

    def failed(self, source: str, now_ms: int) -> int:
        """Record a failure from ``source``; the delay (ms) before answering it."""
        record = self._sources.pop(source, None)
        if record is None or now_ms - record.last_ms >= self.forget_after_ms:
            record = _Record(0, now_ms)
        record.failures += 1
        record.last_ms = now_ms
        self._sources[source] = record
        while len(self._sources) > self.max_sources:
            self._sources.popitem(last=False)
        if self.base_delay_ms == 0:
            return 0
        # 2**n overflows nothing here: the exponent is capped well below the ceiling.
        factor = 1 << min(record.failures - 1, 30)
        return min(self.max_delay_ms, self.base_delay_ms * factor)

    def succeeded(self, source: str) -> None:
        """A successful authentication clears the source's record."""
        self._sources.pop(source, None)
