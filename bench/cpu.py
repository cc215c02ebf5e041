"""CPU time of the benchmarks' servers, from Linux /proc: one home for every bench.

A server's cost is all of it: every thread of every process it started (a
gateway's workers and landing converters, Kafka's JVM threads), read as user +
system time, and reaped children's through ``cutime``/``cstime``. Kafka's JIT
compiler threads and the broker plugin's own threads can be read apart.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
#: Thread names (as /proc shows them, 15 characters) of the broker plugin's own threads.
PLUGIN_THREADS = ("clientmetrics-p", "kafka-producer-")
#: The JVM's JIT compiler threads.
JIT_THREADS = ("C1 CompilerThre", "C2 CompilerThre")


def tree_pids(pid: int) -> list[int]:
    """``pid`` and every live descendant of it."""
    found, todo = [pid], [pid]
    while todo:
        parent = todo.pop()
        children: list[int] = []
        # Each thread lists the children it started (the gateway starts its converter
        # from a worker thread, not the main one).
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue  # gone since it was listed
        found += children
        todo += children
    return found


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds so far of ``pids`` (all their threads, reaped children)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return total / TICKS


def tree_cpu(pid: int) -> float:
    """CPU seconds so far of ``pid`` and all its descendants."""
    return cpu_seconds(tree_pids(pid))


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds so far of a process's threads: ``all``, the JIT's, the plugin's."""
    out = {"all": 0.0, "jit": 0.0, "plugin": 0.0}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        seconds = (int(fields[11]) + int(fields[12])) / TICKS
        out["all"] += seconds
        if name.startswith(JIT_THREADS):
            out["jit"] += seconds
        if name.startswith(PLUGIN_THREADS):
            out["plugin"] += seconds
    return out


def pin_threads(pids: list[int], core: int) -> None:
    """Every thread of ``pids`` on ``core``; threads and processes they start later
    inherit it."""
    for pid in pids:
        subprocess.run(["taskset", "-a", "-cp", str(core), str(pid)], check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
