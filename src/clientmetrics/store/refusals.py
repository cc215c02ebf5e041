"""Store records refused: counted by reason, and named in the audit trail, with a bound.

The audit trail of subscription changes (``gateway.config_rpcs``) logs a refused
alter as ``subscription_change_refused``; a refused store record is the same
event, with ``api="store record"`` and the record's place in the log as its
source. Each record is logged once (readers never apply an offset twice); a
flood is logged up to ``burst`` records a minute, and the rest are counted and
summed up in one line when the minute is over.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import structlog

from clientmetrics.store.records import Reason

log = structlog.get_logger("clientmetrics.store")

BURST = 50
WINDOW_S = 60.0


class Refusals:
    """Counts refused records by reason and logs them, at most ``burst`` a window."""

    def __init__(
        self,
        topic: str,
        *,
        burst: int = BURST,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._topic = topic
        self._burst = burst
        self._window_s = window_s
        self._clock = clock
        self.counts: Counter[Reason] = Counter()
        self._window_start = clock()
        self._logged = 0
        self._unlogged: Counter[Reason] = Counter()

    def refused(self, name: str, reason: Reason, detail: str, partition: int, offset: int) -> None:
        """Count one refused record, and log it unless this window's burst is spent."""
        self.counts[reason] += 1
        now = self._clock()
        if now - self._window_start >= self._window_s:
            self._summarise()
            self._window_start = now
        if self._logged >= self._burst:
            self._unlogged[reason] += 1
            return
        self._logged += 1
        log.warning(
            "subscription_change_refused",
            subscription=name[:200],
            api="store record",
            source=f"{self._topic}[{partition}]@{offset}",
            error=reason.value,
            detail=detail,
        )

    def flush_due(self) -> None:
        """Sum up what was not logged once its window is over (called on each scrape)."""
        if self._unlogged and self._clock() - self._window_start >= self._window_s:
            self._summarise()
            self._window_start = self._clock()

    def _summarise(self) -> None:
        if self._unlogged:
            log.warning(
                "subscription_records_refused_unlogged",
                topic=self._topic,
                counts={r.value: n for r, n in sorted(self._unlogged.items(), key=str)},
                hint=f"more than {self._burst} refused store records in {self._window_s:.0f} s",
            )
        self._unlogged.clear()
        self._logged = 0

    def snapshot(self) -> dict[str, float]:
        """Refused records by reason, every reason present (0 when none)."""
        return {reason.value: float(self.counts[reason]) for reason in Reason}
