"""Telemetry work on the event loop, a bounded share per loop turn, in turns by source.

A Get or a push costs tens of microseconds of the event loop (decoding, matching
subscriptions, creating or finding the instance, encoding the answer). A client
that pipelines hundreds of them, on several connections, hands the loop
hundreds of tasks in one turn, and every other client's request waits for all of
them: a flood of new instance ids delayed other clients' Gets by up to 449 ms.

``FairShare`` lets at most ``per_turn`` such requests do their work in one turn
of the loop. A request whose source has nothing waiting goes straight on while
the turn has share left (no wait, no extra turn). The others wait in a queue per
source address, and each turn grants the next ones round robin between sources,
to run in the following turn: a flooding source gets one grant per pass like any
other, so another client's request waits for a pass (a few requests), not for
the flood's backlog. The requests of one source never overtake each other.

The grants a turn makes count against the next turn's share, so no turn runs
more than ``per_turn`` requests. (Until this accounting, any waiting request
made every new one wait too: each request then cost its connection two turns of
the loop, and under steady load one source's connections could do one request
per two turns each, which queued pushes for 50-130 ms at 70 % of saturation.)
"""

from __future__ import annotations

import asyncio

from clientmetrics.gateway.turns import SourceQueues

__all__ = ["FairShare"]


class FairShare:
    """Grants turns for synchronous work, ``per_turn`` per loop turn, round robin by source."""

    def __init__(self, per_turn: int = 32) -> None:
        if per_turn < 1:
            raise ValueError("per_turn must be positive")
        self.per_turn = per_turn
        #: Requests this turn: the grants made last turn (they run now) and those
        #: that went straight on.
        self._used = 0
        #: Grants made this turn, to run in the next one.
        self._granted = 0
        self._next_turn_scheduled = False
        #: Requests waiting for a turn, by source address.
        self._waiting = SourceQueues()

    @property
    def waiting(self) -> int:
        """Requests waiting for a turn."""
        return len(self._waiting)

    async def turn(self, source: str) -> None:
        """Return when ``source``'s request may do its work (at once if the turn has
        share left and nothing of ``source`` waits)."""
        if self._used < self.per_turn and source not in self._waiting:
            self._used += 1
            self._schedule_next_turn()
            return
        self._schedule_next_turn()
        await self._waiting.wait(source)  # a grant lost to a cancel is not handed on

    def _schedule_next_turn(self) -> None:
        if not self._next_turn_scheduled:
            self._next_turn_scheduled = True
            asyncio.get_running_loop().call_soon(self._next_turn)

    def _next_turn(self) -> None:
        """A new loop turn: last turn's grants run in it; grant waiting requests for
        the next one, round robin by source, up to the share."""
        self._next_turn_scheduled = False
        self._used = self._granted
        self._granted = 0
        if self._waiting or self._used:
            # Before the grants' wake-ups: next turn starts by counting them.
            self._schedule_next_turn()
        while self._granted < self.per_turn and self._waiting.grant():
            self._granted += 1
