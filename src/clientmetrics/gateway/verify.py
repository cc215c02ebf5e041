"""SASL's costly checks (PLAIN's PBKDF2) off the event loop, a few at a time.

A PLAIN login with a password not seen before costs a PBKDF2 derivation
(milliseconds, by design). Run on the event loop, a flood of logins with fresh
random passwords would stall every other client. The connection core hands the
derivation out as a ``Verify`` result; both gateway modes pass it here, where a
small pool of threads runs it (hashlib releases the GIL while deriving) and the
shell hands the result back to the core. The pool bounds the whole process: a
flood waits for a thread instead of spawning threads, and a connection waiting
for its turn holds up no other (each has at most one: a verifying connection is
not read). Waiting checks take turns by source address, so one address flooding
logins delays another address's login by a few derivations, not by its backlog.
"""

from __future__ import annotations

import asyncio
import os
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

__all__ = ["Verifier", "default_workers"]


def default_workers() -> int:
    """One thread per core but one (the event loop keeps a core), between 1 and 4."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores - 1))


class Verifier:
    """Runs the derivations the connection cores ask for; shared by a gateway's connections."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers if workers is not None else default_workers()
        if self.workers < 1:
            raise ValueError("a verifier needs at least one worker")
        self._pool: ThreadPoolExecutor | None = None
        self._running = 0
        #: Source address -> its checks waiting for a thread; the first source is next.
        self._waiting: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()

    @property
    def waiting(self) -> int:
        """Checks waiting for a thread."""
        return sum(len(queue) for queue in self._waiting.values())

    async def run(self, derive: Callable[[], bytes], source: str) -> bytes:
        """``derive()`` (a ``Verify``'s) on the pool, once it is ``source``'s turn."""
        await self._turn(source)
        try:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="sasl-verify")
            return await asyncio.get_running_loop().run_in_executor(self._pool, derive)
        finally:
            self._hand_on()

    async def _turn(self, source: str) -> None:
        if self._running < self.workers and not self._waiting:
            self._running += 1
            return
        turn = asyncio.get_running_loop().create_future()
        queue = self._waiting.setdefault(source, deque())
        queue.append(turn)
        try:
            await turn  # resolved by _hand_on, which counted this check as running
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._hand_on()  # given a thread just as the connection went away
            else:
                if turn in queue:  # else _hand_on already dropped it
                    queue.remove(turn)
                if not queue and self._waiting.get(source) is queue:
                    del self._waiting[source]
            raise

    def _hand_on(self) -> None:
        """A check is done: give its thread to the next source in turn."""
        self._running -= 1
        while self._waiting:
            source, queue = next(iter(self._waiting.items()))
            turn = queue.popleft()
            if queue:
                self._waiting.move_to_end(source)  # round robin between sources
            else:
                del self._waiting[source]
            if not turn.done():
                self._running += 1
                turn.set_result(None)
                return

    def close(self) -> None:
        """Drop derivations not started (their connections are closing too)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
