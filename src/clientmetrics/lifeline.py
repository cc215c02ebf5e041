"""Child processes that die with their parent, from their first instructions on.

A spawned child imports its target's module, and unpickles its arguments, before
running any of our code; for a gateway worker or a landing converter that is a
second or two of imports, during which a SIGKILLed parent would leave an orphan.
So children start here: this module imports only the standard library, asks the
kernel to SIGKILL the child when its parent dies (Linux ``PR_SET_PDEATHSIG``),
checks the parent is still the one that started it, and only then imports and
unpickles the real work.

Background children (the landing converter, the exporter process) also step out
of their gateway worker's way: when the worker is pinned to some cores and the
machine has others, those others only, from the start; and a lower CPU priority
once they have started (``lower_priority``). A converter that inherits its
worker's core takes that core's time in bursts, each one a burst of push
latency; one that starts niced, behind a busy machine's other work, took 8-20 s
over its imports while rows waited.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import pickle
import signal
import sys

__all__ = [
    "BACKGROUND_NICENESS",
    "child_started",
    "exec_child",
    "leave_parent_cores",
    "lower_priority",
    "run_child",
]

_PR_SET_PDEATHSIG = 1
#: How much lower a background child's priority is than its worker's.
BACKGROUND_NICENESS = 10


def lower_priority(niceness: int = BACKGROUND_NICENESS) -> None:
    """Lower this process's CPU priority by ``niceness`` (not undone: only root may)."""
    with contextlib.suppress(OSError):
        os.nice(niceness)


def leave_parent_cores() -> None:
    """Move off the cores inherited from the parent when there are others to run on.

    Call it once: a second call would move back to the parent's cores."""
    if not hasattr(os, "sched_setaffinity"):
        return
    try:
        inherited = os.sched_getaffinity(0)
        others = set(range(os.cpu_count() or 1)) - inherited
        if others:
            os.sched_setaffinity(0, others)
    except OSError:  # none of the others is ours (a cpuset): stay where we are
        pass


def child_started(
    parent_pid: int,
    quiet_stdout: bool = False,
    background: bool = False,
    death_signal: int = signal.SIGKILL,
) -> None:
    """Die with ``parent_pid``; exit at once if it is already gone; leave Ctrl-C to it.

    ``quiet_stdout`` points file descriptor 1 at /dev/null: a child holding the
    parent's stdout would keep a pipe reader waiting after the parent exits.
    A terminal's Ctrl-C sends SIGINT to the whole process group: the parent stops
    its children in order (a child that installs its own handler, as a gateway
    worker does, still gets it), so the default one, which would print a
    ``KeyboardInterrupt`` traceback from the middle of the child's work, is off.
    ``background`` (a converter or exporter child): ``leave_parent_cores`` now; the
    child calls ``lower_priority`` itself once it has started, so that its start
    does not starve behind a busy machine's work. ``death_signal`` is what the
    kernel sends when the parent dies (SIGTERM lets a JVM run its shutdown hooks).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if background:
        leave_parent_cores()
    if quiet_stdout:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, death_signal)
    # Compared with the pid, not with 1: under a subreaper an orphan's new parent
    # is not init.
    if os.getppid() != parent_pid:
        os._exit(1)


def exec_child(parent_pid: int, argv: list[str], death_signal: int = signal.SIGTERM) -> None:
    """Become ``argv`` (``execv``) dying with ``parent_pid``: the death signal survives exec.

    For programs we do not write, such as the JVM a PySpark driver starts: run this
    file as ``python -I -S lifeline.py PARENT_PID PROGRAM ARGS...`` in its place.
    """
    child_started(parent_pid, death_signal=death_signal)
    os.execv(argv[0], argv)


def run_child(parent_pid: int, target: str, payload: bytes) -> None:
    """Spawn target: die with the parent, then call ``module:function(*pickle.loads(payload))``."""
    child_started(parent_pid)
    module, _, name = target.partition(":")
    function = getattr(importlib.import_module(module), name)
    function(*pickle.loads(payload))


if __name__ == "__main__":
    exec_child(int(sys.argv[1]), sys.argv[2:])
