"""Telemetry work on the event loop, a bounded share per loop turn, in turns by source.

A Get or a push costs tens of microseconds of the event loop (decoding, matching
subscriptions, creating or finding the instance, encoding the answer). A client
that pipelines hundreds of them, on several connections, hands the loop
hundreds of tasks in one turn, and every other client's request waits for all of
them: a flood of new instance ids delayed other clients' Gets by up to 449 ms.

``FairShare`` lets at most ``per_turn`` such requests do their work in one turn
of the loop. When more want to, they wait in a queue per source address, and
each turn grants the next ones round robin between sources: a flooding source
gets one grant per pass like any other, so another client's request waits for
a pass (a few requests), not for the flood's backlog. Without contention a
request goes straight on (no wait, no extra turn). Requests never overtake
each other: while any waits, or a granted one has not resumed yet, a new one
queues too (so the requests of one connection keep their order).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque

__all__ = ["FairShare"]


class FairShare:
    """Grants turns for synchronous work, ``per_turn`` per loop turn, round robin by source."""

    def __init__(self, per_turn: int = 32) -> None:
        if per_turn < 1:
            raise ValueError("per_turn must be positive")
        self.per_turn = per_turn
        self._used = 0
        #: Requests granted a turn that have not resumed yet.
        self._granted = 0
        self._next_turn_scheduled = False
        #: Source address -> its requests waiting for a turn; the first source is next.
        self._waiting: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()

    @property
    def waiting(self) -> int:
        """Requests waiting for a turn."""
        return sum(len(queue) for queue in self._waiting.values())

    async def turn(self, source: str) -> None:
        """Return when ``source``'s request may do its work (at once if nobody waits)."""
        if not self._waiting and not self._granted and self._used < self.per_turn:
            self._used += 1
            self._schedule_next_turn()
            return
        waiter = asyncio.get_running_loop().create_future()
        queue = self._waiting.setdefault(source, deque())
        queue.append(waiter)
        self._schedule_next_turn()
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._granted -= 1  # granted just as its connection went away
            else:
                if waiter in queue:
                    queue.remove(waiter)
                if not queue and self._waiting.get(source) is queue:
                    del self._waiting[source]
            raise
        self._granted -= 1

    def _schedule_next_turn(self) -> None:
        if not self._next_turn_scheduled:
            self._next_turn_scheduled = True
            asyncio.get_running_loop().call_soon(self._next_turn)

    def _next_turn(self) -> None:
        """A new loop turn: grant waiting requests, round robin by source, up to the share."""
        self._next_turn_scheduled = False
        self._used = 0
        while self._waiting and self._used < self.per_turn:
            source, queue = next(iter(self._waiting.items()))
            waiter = queue.popleft()
            if queue:
                self._waiting.move_to_end(source)
            else:
                del self._waiting[source]
            if not waiter.done():
                waiter.set_result(None)
                self._used += 1
                self._granted += 1
        if self._waiting:
            self._schedule_next_turn()
