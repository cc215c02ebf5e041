"""The dashboard's live watches: each follows the landing zone and keeps its newest points.

A watch is created, narrowed and deleted by ``clientmetrics.investigate`` (the
same functions the command calls), with the logged-in operator's credentials.
Here is only what the page needs between polls: a tail of the landing zone
started when the watch was, the points its selection picks (a bounded buffer,
numbered so a poll asks for what came after the last it saw) and, once stopped,
each client's first push on another subscription (``investigate.live.back_on``).
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clientmetrics.investigate.live import Back, LivePoint, Selection, Shapes, back_on, live_points
from clientmetrics.investigate.session import Tail
from clientmetrics.investigate.tail import LandingTail
from clientmetrics.investigate.watches import Watch

__all__ = ["MAX_POINTS", "MAX_WATCHES", "LiveWatch", "LiveWatches"]

#: Points kept per watch for the page (the newest; a page that fell behind skips ahead).
MAX_POINTS = 5000
#: Watches the dashboard follows at once (the oldest stopped one goes first).
MAX_WATCHES = 16
#: How long a stopped watch keeps looking for its clients' next subscription.
BACK_WAIT_S = 60.0


@dataclass
class LiveWatch:
    """One watch as the page follows it."""

    watch: Watch
    selectors: dict[str, str]
    metrics: list[str]
    tail: Tail
    started_by: str
    points: deque[tuple[int, LivePoint]] = field(default_factory=lambda: deque(maxlen=MAX_POINTS))
    next_seq: int = 0
    #: Per instance shown, its latest push (under the watch).
    seen: Shapes = field(default_factory=Shapes)
    #: Per instance, its first push on another subscription once it pushed one.
    back: dict[str, Back] = field(default_factory=dict)
    stopped_at: float | None = None
    #: Being deleted: polls leave the tail alone meanwhile, so a push on the client's
    #: next subscription read then is judged after the stop, not shown as the watch's.
    stopping: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def narrow(self, instance: str, selectors: dict[str, str]) -> None:
        """Follow one instance only (the subscription was narrowed already)."""
        with self.lock:
            self.selectors = selectors
            self.seen.keep(instance)
            # The page shows the watch's current clients only, reloaded or not.
            mine = [(seq, p) for seq, p in self.points if p.client_instance_id == instance]
            self.points = deque(mine, maxlen=MAX_POINTS)

    def poll(self, after: int, now: float) -> dict[str, Any]:
        """Read what landed since the last poll; the points numbered above ``after``."""
        with self.lock:
            if not self.stopping:
                self._read(now)
            fresh = [_point_json(seq, p) for seq, p in self.points if seq > after]
            return {
                "name": self.watch.name,
                "stopped": self.stopped_at is not None,
                "match": self.selectors,
                "next": self.next_seq - 1,
                "points": fresh,
                "back": [
                    {
                        "instance": i,
                        "subscription_id": b.subscription_id,
                        "was": b.was,
                        "text": b.text(),
                    }
                    for i, b in sorted(self.back.items())
                ],
                "waiting_back": sorted(set(self.seen.latest) - set(self.back)),
            }

    def _read(self, now: float) -> None:
        """Take what landed: the watch's points, or, once stopped, its clients going back."""
        rows = self.tail.read()
        selection = Selection(self.selectors, self.metrics)
        if self.stopped_at is None:
            for point in live_points(rows, selection):
                self.seen.add(point)
                self.points.append((self.next_seq, point))
                self.next_seq += 1
        elif now - self.stopped_at < BACK_WAIT_S:
            waiting = {i: s for i, s in self.seen.latest.items() if i not in self.back}
            self.back |= back_on(rows, waiting, selection, int(self.stopped_at * 1000))


def _point_json(seq: int, point: LivePoint) -> dict[str, Any]:
    return {
        "seq": seq,
        "at_ms": point.received_at_ms,
        "instance": point.client_instance_id,
        "client_id": point.client_id,
        "metric": point.metric,
        # JSON has no NaN or infinity (a client's average of nothing is NaN): shown as "-".
        "value": point.value if point.value is not None and math.isfinite(point.value) else None,
        "unit": point.unit,
        "node": point.node,
    }


class LiveWatches:
    """The watches this dashboard started, by name (bounded)."""

    def __init__(self, data_dir: Path, clock: Callable[[], float] = time.time) -> None:
        self._data_dir = data_dir
        self._clock = clock
        self._watches: OrderedDict[str, LiveWatch] = OrderedDict()
        self._lock = threading.Lock()

    def tail(self) -> LandingTail:
        """A tail of the landing zone from now (start it before the watch exists)."""
        tail = LandingTail(self._data_dir)
        # Read once now: the WAL's current ends and the landed files are noted, so a
        # segment converted before the page's first poll is still read, and nothing
        # landed before (up to two hours of files) is ever read whole.
        tail.read()
        return tail

    def add(self, live: LiveWatch) -> None:
        """Follow a new watch; a stopped one (else the oldest) goes when full."""
        with self._lock:
            while len(self._watches) >= MAX_WATCHES:
                stopped = [n for n, w in self._watches.items() if w.stopped_at is not None]
                gone = self._watches.pop(stopped[0] if stopped else next(iter(self._watches)))
                close = getattr(gone.tail, "close", None)  # a topic's consumer
                if close is not None:
                    close()
            self._watches[live.watch.name] = live

    def get(self, name: str) -> LiveWatch | None:
        """The watch of ``name``, if this dashboard follows it."""
        with self._lock:
            return self._watches.get(name)

    def all(self) -> list[LiveWatch]:
        """Every watch followed, oldest first."""
        with self._lock:
            return list(self._watches.values())

    def stopping(self, name: str) -> float:
        """Mark a watch about to be deleted (before the delete is sent); the time now."""
        self._set(name, stopping=True)
        return self._clock()

    def stopped(self, name: str, at: float | None) -> None:
        """Mark a watch deleted (``at``: when the delete was sent; None: it was not):
        from then on its clients are watched going back."""
        self._set(name, stopping=False, stopped_at=at)

    def _set(self, name: str, **values: object) -> None:
        live = self.get(name)
        if live is not None:
            with live.lock:
                for key, value in values.items():
                    setattr(live, key, value)
