"""``serve --workers N``: a supervisor process and N gateway workers sharing the port.

The supervisor restarts a worker that dies, after a backoff that doubles while
the worker keeps dying soon after its start or failing to start
(``START_FAILED``); when one has failed to stay up ``GIVE_UP_AFTER`` times in a
row it stops the others and exits non-zero, so a service manager sees the
failure. Workers die with the supervisor (see
``clientmetrics.lifeline``); the supervisor forwards SIGTERM and SIGINT (stop)
and SIGHUP (reload).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from clientmetrics.lifeline import run_child

log = structlog.get_logger("clientmetrics.gateway")

#: A worker that lived this long before dying is restarted without penalty.
HEALTHY_AFTER_S = 10.0
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 10.0
#: A worker's exit status when it could not start (its configuration, its store, its
#: port): an early death however long the start took, so a loaded machine's slow start
#: is not taken for a healthy run (sysexits' EX_CONFIG).
START_FAILED = 78
#: Consecutive early deaths of one worker after which the supervisor gives up.
GIVE_UP_AFTER = 3
STOP_TIMEOUT_S = 30.0


@dataclass
class _Slot:
    """One worker position: its current process and its run of early deaths."""

    index: int
    process: Any = None
    started_at: float = 0.0
    early_deaths: int = 0
    restart_at: float | None = None
    exits: list[int] = field(default_factory=list)


class Supervisor:
    """Starts ``count`` workers running ``target(index)`` and keeps them running."""

    def __init__(self, count: int, target: str, args_for: Callable[[int], tuple[Any, ...]]) -> None:
        self._ctx = multiprocessing.get_context("spawn")
        self._target = target
        self._args_for = args_for
        self._slots = [_Slot(i) for i in range(count)]
        self._stopping = False

    def _start(self, slot: _Slot) -> Any:
        payload = pickle.dumps(self._args_for(slot.index))
        process = self._ctx.Process(
            target=run_child, args=(os.getpid(), self._target, payload), daemon=False
        )
        process.start()
        slot.process, slot.started_at, slot.restart_at = process, time.monotonic(), None
        return process

    def _stop(self, _signum: int = 0, _frame: object = None) -> None:
        self._stopping = True
        for slot in self._slots:
            if slot.process is not None and slot.process.is_alive():
                slot.process.terminate()

    def _reload(self, _signum: int = 0, _frame: object = None) -> None:
        for slot in self._slots:
            if slot.process is not None and slot.process.is_alive():
                os.kill(slot.process.pid, signal.SIGHUP)

    def run(self) -> int:
        """Supervise until told to stop or giving up; the exit status for the parent."""
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        signal.signal(signal.SIGHUP, self._reload)
        for slot in self._slots:
            self._start(slot)
        status = 0
        while not self._stopping:
            live = [s.process.sentinel for s in self._slots if s.process is not None]
            multiprocessing.connection.wait(live, timeout=0.2)
            for slot in self._slots:
                if self._stopping:
                    break
                if not self._tend(slot):
                    log.error("worker_gave_up", worker=slot.index, exit_codes=slot.exits)
                    status = 1
                    self._stop()
        return max(status, self._join_all())

    def _tend(self, slot: _Slot) -> bool:
        """Restart a dead worker when its backoff is over; False to give up."""
        now = time.monotonic()
        if slot.process is not None and not slot.process.is_alive():
            code = slot.process.exitcode
            slot.process.join()
            slot.process = None
            slot.exits.append(code)
            if now - slot.started_at >= HEALTHY_AFTER_S and code != START_FAILED:
                slot.early_deaths = 0
            slot.early_deaths += 1
            if slot.early_deaths > GIVE_UP_AFTER:
                return False
            delay = min(FIRST_BACKOFF_S * 2 ** (slot.early_deaths - 1), MAX_BACKOFF_S)
            slot.restart_at = now + delay
            log.warning("worker_died", worker=slot.index, exit_code=code, restart_in_s=delay)
        if slot.process is None and slot.restart_at is not None and now >= slot.restart_at:
            process = self._start(slot)
            log.info("worker_restarted", worker=slot.index, pid=process.pid)
        return True

    def _join_all(self) -> int:
        """Wait for every worker to exit (SIGKILL stragglers); the worst exit code."""
        deadline = time.monotonic() + STOP_TIMEOUT_S
        worst = 0
        for slot in self._slots:
            process = slot.process
            if process is None:
                continue
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join()
            code = process.exitcode or 0
            if code == -signal.SIGTERM and self._stopping:
                code = 0  # stopped as asked before its own handler was installed
            worst = max(worst, code if code > 0 else (1 if code < 0 else 0))
        return worst


def supervise(count: int, target: str, args_for: Callable[[int], tuple[Any, ...]]) -> None:
    """Run ``count`` supervised workers; exit the process with their status."""
    sys.exit(Supervisor(count, target, args_for).run())
