"""What handing a group commit to the WAL thread costs the event loop's core.

Run by hand: ``.venv/bin/python bench/wal_handoff.py [--dir D] [--rate N]
[--seconds S] [--rounds R]``.

At moderate load a group commit carries one or two pushes, so the handoff to the
WAL's thread and back is paid about once per push. This commits ``--rate`` times a
second, paced as pushes arrive (a timer between commits), one 2,000-byte append to a
file opened with O_DSYNC in ``--dir`` (tmpfs by default: the handoff, not the disk),
with the process pinned to one core as a pinned worker is, three ways in
alternating rounds:

* **baseline**: ``loop.run_in_executor`` on a one-thread ``ThreadPoolExecutor``
  (the landing WAL until this bench);
* **WalThread**: the landing WAL's own thread (``landing_wal.WalThread``);
* **on the loop**: the write made by the event loop itself, no thread (the floor;
  not an option for a real disk, whose fsyncs take milliseconds).

``--busy-us N``: the loop spends N µs of CPU on other work (other pushes) while each
commit is under way, so that the thread's answer can find the loop holding the
interpreter lock, as in a gateway under load; that work is subtracted from the
figures.

It prints the process's CPU time per commit (all threads: the loop's core pays for
both sides of the handoff), its task switches per commit, and the ratio of the
handoff's part to the baseline's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import uvloop

from clientmetrics.exporters.landing_wal import WalThread
from clientmetrics.gateway.cli import SWITCH_INTERVAL_S

FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_DSYNC
DATA = b"x" * 2000


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def _round(
    way: str, fd: int, rate: float, seconds: float, busy_us: float
) -> tuple[float, float]:
    """CPU microseconds of this process per commit (the busy work left out), and its
    task switches per commit."""
    loop = asyncio.get_running_loop()

    def write() -> int:
        return os.write(fd, DATA)

    pool = ThreadPoolExecutor(1)
    thread = WalThread("bench-wal")
    commit: Callable[[], Awaitable[int]] | None = {
        "baseline": lambda: loop.run_in_executor(pool, write),
        "WalThread": lambda: thread.run(write),
    }.get(way)
    if commit is not None:
        await commit()  # the thread is started, and its scheduling set, before the round
    count = 0
    due = time.perf_counter()
    cpu = time.process_time()
    switches = _switches()
    end = due + seconds
    while due < end:
        due += 1 / rate
        wait = due - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
        if commit is None:
            write()
            _spin(busy_us / 1e6)
        else:
            pending = commit()
            _spin(busy_us / 1e6)
            await pending
        count += 1
    used = time.process_time() - cpu
    switched = _switches() - switches
    pool.shutdown()
    thread.shutdown()
    return used / count * 1e6 - busy_us, switched / count


def _switches() -> int:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw + usage.ru_nivcsw


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/dev/shm"))
    parser.add_argument("--rate", type=float, default=1000.0, help="commits a second")
    parser.add_argument("--seconds", type=float, default=3.0, help="per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--busy-us", type=float, default=0.0, help="loop CPU on other work per commit"
    )
    args = parser.parse_args()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    ways = ("baseline", "WalThread", "on the loop")
    figures: dict[str, list[float]] = {way: [] for way in ways}
    switches: dict[str, list[float]] = {way: [] for way in ways}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        fd = os.open(Path(tmp) / "wal", FLAGS, 0o600)
        try:
            for _ in range(args.rounds):
                for way in ways:
                    cpu, switched = uvloop.run(
                        _round(way, fd, args.rate, args.seconds, args.busy_us)
                    )
                    figures[way].append(cpu)
                    switches[way].append(switched)
        finally:
            os.close(fd)
    median = {way: statistics.median(values) for way, values in figures.items()}
    floor = median["on the loop"]
    print(
        f"{args.rate:,.0f} commits/s, one core, {args.rounds} rounds of {args.seconds} s, "
        f"loop busy {args.busy_us:.0f} µs per commit; load average {os.getloadavg()[0]:.1f}"
    )
    for way in ways:
        rounds = ", ".join(f"{v:.1f}" for v in figures[way])
        print(
            f"{way:12s} {median[way]:7.1f} µs CPU per commit, "
            f"{statistics.median(switches[way]):.2f} task switches (rounds: {rounds})"
        )
    base = median["baseline"] - floor
    ours = median["WalThread"] - floor
    print(
        f"the handoff's part (above the loop's own write): baseline {base:.1f} µs, "
        f"WalThread {ours:.1f} µs, ratio {ours / base if base > 0 else float('nan'):.2f}"
    )


if __name__ == "__main__":
    main()
