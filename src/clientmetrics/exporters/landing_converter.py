"""The landing converter: sealed WAL segments become Parquet files in a child process."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import structlog

from clientmetrics.exporters import landing_files as files
from clientmetrics.lifeline import child_started

log = structlog.get_logger(__name__)


class Converter:
    """Turns sealed segments into Parquet files in a child process, off the event loop's GIL.

    Decoding a segment is a Python loop over its records; on a thread of the
    gateway process it would take the GIL from the event loop in 5 ms slices
    for a whole segment, and every push in flight would wait (measured:
    100-200 ms latency spikes each time a segment rolled). The child is started
    (``spawn``: nothing of the parent's state is inherited) on a thread, not on
    the event loop: starting a process forks the whole gateway. It starts again
    if it dies; where no child can be started, the conversion runs on
    ``fallback``, a thread. The child runs off the worker's cores when there are
    others, and at a lower priority once started (``lifeline``,
    ``files.converter_ready``): on the worker's core it would take the loop's
    time in bursts every ``roll_seconds``.
    """

    def __init__(self, fallback: ThreadPoolExecutor) -> None:
        self._fallback = fallback
        self._pool: ProcessPoolExecutor | None = None
        self._usable = True
        self._closing = False

    def hurry(self) -> None:
        """Closing: convert what is left on ``fallback``, at the gateway's priority.

        The niced child yields to every other process; behind a busy machine's
        work the segments sealed at shutdown waited seconds for it, and Ctrl-C
        with the shutdown timeout. Nothing else needs the cores by then: the
        listeners are closed and every push answered.
        """
        self._closing = True

    async def convert(
        self, loop: asyncio.AbstractEventLoop, layout: files.Layout, path: Path
    ) -> files.Converted:
        pool = None if self._closing else self._pool
        if pool is None and self._usable and not self._closing:
            pool = await loop.run_in_executor(self._fallback, self._start_pool)
        if pool is not None:
            try:
                return await loop.run_in_executor(pool, files.convert_segment, layout, path)
            except BrokenProcessPool:
                log.warning("landing.converter_died", segment=path.name)
                self._pool = None
        return await loop.run_in_executor(self._fallback, files.convert_segment, layout, path)

    def _start_pool(self) -> ProcessPoolExecutor | None:
        """The child, started and answering (runs on a thread: the spawn forks)."""
        if self._pool is None and self._usable:
            try:
                context = multiprocessing.get_context("spawn")
                # The initializer lives in a module that imports nothing heavy, so the
                # child is bound to this process, and off its cores, before it imports
                # pyarrow. Those imports (0.6 s of CPU) run at the worker's priority:
                # niced, behind a busy machine's other work, they took 20 s, and the
                # rows waited. Only then does the child lower its priority.
                pool = ProcessPoolExecutor(
                    1,
                    mp_context=context,
                    initializer=child_started,
                    initargs=(os.getpid(), True, True),
                )
                pool.submit(files.converter_ready).result()  # spawned and imported here
                self._pool = pool
            except (OSError, AssertionError, ValueError, BrokenProcessPool) as exc:
                # e.g. a daemonic parent
                log.warning("landing.converter_unavailable", error=repr(exc))
                self._usable = False
        return self._pool

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
