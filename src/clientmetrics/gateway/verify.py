"""SASL's costly checks (PLAIN's PBKDF2) off the event loop, a few at a time.

A PLAIN login with a password not seen before costs a PBKDF2 derivation
(milliseconds, by design). Run on the event loop, a flood of logins with fresh
random passwords would stall every other client. The connection core hands the
derivation out as a ``Verify`` result; both gateway modes pass it here, where
a small pool of threads runs it (hashlib releases the GIL while deriving) and
the core finishes the exchange with the result. The pool bounds the whole
process: a flood waits its turn in order instead of spawning threads, and a
connection waiting for its turn holds up no other (each has at most one: a
verifying connection is not read).
"""

from __future__ import annotations

import asyncio
import os
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

    async def run(self, derive: Callable[[], bytes]) -> bytes:
        """``derive()`` (a ``Verify``'s), on the pool once a thread is free."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="sasl-verify")
        return await asyncio.get_running_loop().run_in_executor(self._pool, derive)

    def close(self) -> None:
        """Drop derivations not started (their connections are closing too)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
