"""``clientmetrics investigate`` in a terminal, as the reactive tests run it."""

from __future__ import annotations

import queue
import subprocess
import threading
import time

CLIENT_ID = "lagging-consumer"
IDLE = "org.apache.kafka.consumer.poll.idle.ratio.avg"


class Lines:
    """A running command's stdout, line by line, read on a thread."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def until(self, predicate: object, timeout: float, what: str) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                continue
            self.seen.append(line)
            if predicate(line):  # type: ignore[operator]
                return line
        raise AssertionError(f"timed out after {timeout}s waiting for {what}: {self.seen[-10:]}")

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()


def idle_ratio(line: str) -> tuple[str, float] | None:
    """(instance, value) of a live line showing poll.idle.ratio.avg."""
    parts = line.split()
    if len(parts) >= 5 and parts[3] == IDLE:
        return parts[1], float(parts[4])
    return None


def idle_ratios(out: Lines, instances: list[str], count: int) -> dict[str, list[float]]:
    """The next ``count`` poll.idle.ratio.avg values shown for each of ``instances``."""
    ratios: dict[str, list[float]] = {i: [] for i in instances}

    def enough(line: str) -> bool:
        point = idle_ratio(line)
        if point is not None and point[0] in ratios:
            ratios[point[0]].append(point[1])
        return all(len(v) >= count for v in ratios.values())

    out.until(enough, 90, f"idle ratios of {instances}")
    return ratios


def compare_then_narrow(out: Lines, slow: str, fast: str) -> None:
    """The watch shows the slow consumer's idle ratio near 0 and the healthy one's near
    1; ``narrow`` keeps the slow one, whose points go on."""
    ratios = idle_ratios(out, [slow, fast], 3)
    assert ratios[slow][-1] < 0.3, ratios
    assert ratios[fast][-1] > 0.7, ratios
    out.send(f"narrow {slow}")
    out.until(lambda s: s.startswith("narrowed "), 30, "the narrowing")
    idle_ratios(out, [slow], 3)
