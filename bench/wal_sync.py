"""One group commit's system calls on the WAL thread, with the event loop busy.

Run by hand: ``.venv/bin/python bench/wal_sync.py [--dir D] [--batches N]
[--switch-interval-ms MS]``.

Every system call the WAL thread makes gives up the interpreter lock, and it waits
to get it back (up to the switch interval: the gateway's, or
``--switch-interval-ms``) while the event loop runs Python. This times a group
commit (``--records`` records of ``--size`` bytes, appended to one file in
``--dir``) two ways, in alternating rounds, each with a thread spinning in Python
beside it (the loop near saturation) and without:

* **baseline**: write, fdatasync, fstat (the landing WAL until this bench);
* **O_DSYNC**: one write to a file opened with O_DSYNC (the landing WAL now).

It prints p50/p99 per commit and the ratio to the baseline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from clientmetrics.gateway.cli import SWITCH_INTERVAL_S

FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC


def _baseline(fd: int, data: bytes) -> None:
    os.write(fd, data)
    os.fdatasync(fd)
    os.fstat(fd)


def _dsync(fd: int, data: bytes) -> None:
    os.write(fd, data)


def _commits(path: Path, flags: int, commit: Callable[[int, bytes], None],
             batches: int, data: bytes) -> list[float]:  # fmt: skip
    fd = os.open(path, flags, 0o644)
    took: list[float] = []
    try:
        for _ in range(batches):
            start = time.perf_counter()
            commit(fd, data)
            took.append((time.perf_counter() - start) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return took


def _spin(stop: threading.Event) -> None:
    while not stop.is_set():
        sum(range(200))  # Python bytecode: holds the lock until asked to drop it


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", help="where the WAL file goes (default: a temp dir)")
    parser.add_argument("--batches", type=int, default=300, help="commits per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=20)
    parser.add_argument("--size", type=int, default=400)
    parser.add_argument(
        "--switch-interval-ms", type=float, default=SWITCH_INTERVAL_S * 1000,
        help="the interpreter's switch interval (default: the gateway's)",
    )  # fmt: skip
    args = parser.parse_args()
    sys.setswitchinterval(args.switch_interval_ms / 1000)
    print(f"switch interval {args.switch_interval_ms} ms")
    data = os.urandom(args.records * args.size)
    variants = {
        "baseline (write+fdatasync+fstat)": (FLAGS, _baseline),
        "O_DSYNC write": (FLAGS | os.O_DSYNC, _dsync),
    }
    with tempfile.TemporaryDirectory(prefix="cm-walsync-", dir=args.dir) as tmp:
        for busy in (False, True):
            results: dict[str, list[float]] = {name: [] for name in variants}
            stop = threading.Event()
            spinner = threading.Thread(target=_spin, args=(stop,), daemon=True)
            if busy:
                spinner.start()
            try:
                for _ in range(args.rounds):
                    for name, (flags, commit) in variants.items():
                        path = Path(tmp) / "segment.wal"
                        results[name] += _commits(path, flags, commit, args.batches, data)
            finally:
                stop.set()
                if busy:
                    spinner.join()
            loop = "a thread spinning in Python beside it" if busy else "nothing beside it"
            print(f"{len(data):,}-byte commits, {loop}:")
            base = statistics.median(results[next(iter(variants))])
            for name, took in results.items():
                print(
                    f"  {name:34s} p50 {statistics.median(took):6.3f} ms  "
                    f"p99 {_pct(took, 0.99):6.3f} ms  "
                    f"(p50 {statistics.median(took) / base:.2f}x the baseline)"
                )


if __name__ == "__main__":
    main()
