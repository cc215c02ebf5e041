"""Ctrl-C and SIGTERM for ``pipeline run|stream``: a flag checked at safe points, never an
exception thrown into the middle of a py4j call.

pyspark's own SIGINT handler (installed by ``SparkContext``) cancels jobs and
raises ``KeyboardInterrupt`` from inside whatever py4j call is in progress. During
the start-up that left py4j tracebacks and a JVM stack in the terminal, and a
driver whose gateway connection was cut mid-answer. So while the session starts,
the first signal is only counted and the start stops at its next step; a second
one raises at once. Once the query runs, the first signal stops it between two
batches (a batch in progress finishes), and a second one at once.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType
from typing import Any

from clientmetrics.cli_options import CommandError

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StartUpInterrupted(CommandError):
    """The start was stopped by a signal before the query ran (exit status 130)."""

    exit_code = 130


class StartUp:
    """Signals counted while the Spark session and the query start.

    Use as a context manager; call ``install`` again once the session is built
    (pyspark's ``SparkContext`` put its own SIGINT handler in) and ``check`` between
    steps.
    """

    def __init__(self) -> None:
        self.count = 0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StartUp:
        self.install()
        return self

    def __exit__(self, *_exc: object) -> None:
        for sig, old in self._previous.items():
            signal.signal(sig, old)

    def install(self) -> None:
        """Make this the handler of SIGINT and SIGTERM (again)."""
        for sig in _SIGNALS:
            old = signal.signal(sig, self._handle)
            self._previous.setdefault(sig, old)

    def _handle(self, _signum: int, _frame: FrameType | None) -> None:
        self.count += 1
        if self.count > 1:
            raise KeyboardInterrupt
        print(
            "clientmetrics pipeline: stopping once Spark has started (Ctrl-C again: at once)",
            file=sys.stderr,
            flush=True,
        )

    def check(self) -> None:
        """Raise ``StartUpInterrupted`` when a signal came."""
        if self.count:
            raise StartUpInterrupted("clientmetrics pipeline: stopped during start-up")


def await_or_stop(query: Any) -> None:
    """Wait for the query to end; SIGINT or SIGTERM stops it cleanly, between two batches.

    The query is stopped once no trigger is active: stopping it inside a batch
    cancels the batch's jobs, with tracebacks. A second signal stops at once.
    """
    from clientmetrics.pipeline.jobs.job import trigger_active

    signals = threading.Semaphore(0)

    def handler(_signum: int, _frame: object) -> None:
        signals.release()

    previous = {sig: signal.signal(sig, handler) for sig in _SIGNALS}
    stopping = False
    try:
        while not query.awaitTermination(0.2 if stopping else 1):
            stopping = stopping or signals.acquire(blocking=False)
            if stopping and (signals.acquire(blocking=False) or not trigger_active(query)):
                query.stop()
                return
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
