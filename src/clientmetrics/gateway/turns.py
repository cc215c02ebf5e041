"""Work that waits its turn, round robin by source address: the one home of that rule.

Both of a gateway's schedulers use it: ``OffLoop`` (work off the event loop on a
bounded pool of threads: SASL's costly checks, heavy push decoding) and
``FairShare`` (telemetry work on the loop, a bounded share per loop turn). Each
source address has a queue; a grant goes to the first source in line, which then
moves to the back, so one address flooding requests delays another's by one
request per pass, not by its backlog. The requests of one source never overtake
each other. A waiter that goes away (its connection closed) leaves no trace; one
given its grant just as it went away hands the grant on (``on_lost_grant``).
"""

from __future__ import annotations

import asyncio
import os
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["OffLoop", "SourceQueues", "default_workers"]

T = TypeVar("T")


class SourceQueues:
    """Waiters by source address, granted round robin between sources."""

    __slots__ = ("_waiting",)

    def __init__(self) -> None:
        #: Source address -> its waiters; the first source is next.
        self._waiting: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()

    def __len__(self) -> int:
        """Waiters waiting."""
        return sum(len(queue) for queue in self._waiting.values())

    def __bool__(self) -> bool:
        return bool(self._waiting)

    def __contains__(self, source: object) -> bool:
        return source in self._waiting

    async def wait(self, source: str, on_lost_grant: Callable[[], None] | None = None) -> None:
        """Return once ``grant`` chose this waiter."""
        waiter = asyncio.get_running_loop().create_future()
        queue = self._waiting.setdefault(source, deque())
        queue.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                if on_lost_grant is not None:  # granted just as its connection went away
                    on_lost_grant()
            else:
                if waiter in queue:  # else grant already dropped it
                    queue.remove(waiter)
                if not queue and self._waiting.get(source) is queue:
                    del self._waiting[source]
            raise

    def grant(self) -> bool:
        """Wake the next waiter in turn; False if none waits."""
        while self._waiting:
            source, queue = next(iter(self._waiting.items()))
            waiter = queue.popleft()
            if queue:
                self._waiting.move_to_end(source)  # round robin between sources
            else:
                del self._waiting[source]
            if not waiter.done():
                waiter.set_result(None)
                return True
        return False


def default_workers() -> int:
    """One thread per core but one (the event loop keeps a core), between 1 and 4."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores - 1))


class OffLoop:
    """Runs costly calls on a pool of ``workers`` threads, in turns by source address.

    The pool bounds the process: a flood waits for a thread instead of spawning
    threads. The threads start with the first call.
    """

    def __init__(self, workers: int | None = None, *, name: str = "off-loop") -> None:
        self.workers = workers if workers is not None else default_workers()
        if self.workers < 1:
            raise ValueError(f"{name} needs at least one worker")
        self._name = name
        self._pool: ThreadPoolExecutor | None = None
        self._running = 0
        self._queues = SourceQueues()

    @property
    def waiting(self) -> int:
        """Calls waiting for a thread."""
        return len(self._queues)

    async def run(self, call: Callable[[], T], source: str) -> T:
        """``call()`` on the pool, once it is ``source``'s turn."""
        if self._running < self.workers and not self._queues:
            self._running += 1
        else:  # granted by _hand_on, which counted this call as running
            await self._queues.wait(source, self._hand_on)
        try:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix=self._name)
            return await asyncio.get_running_loop().run_in_executor(self._pool, call)
        finally:
            self._hand_on()

    def _hand_on(self) -> None:
        """A call is done: give its thread to the next source in turn."""
        self._running -= 1
        if self._queues.grant():
            self._running += 1

    def close(self) -> None:
        """Drop the calls not started (their connections are closing too)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
