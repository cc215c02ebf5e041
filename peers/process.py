"""A peer program run as a child: JSON lines read from its stdout, stopped by PID.

The Java client and franz-go peers speak the same small protocol: one JSON object a line
on stdout, each with an ``event``; a ``stop`` line (or end of input) on stdin asks them to
finish (closing their clients if told to), and SIGTERM does the same. :class:`PeerProcess`
starts one, keeps its lines, waits for an event and stops it, SIGKILL as the last resort.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Event = dict[str, Any]

#: The shortest deadline ``wait_until`` gives an event (see there).
MIN_DEADLINE_S = 60.0


@dataclass
class PeerProcess:
    """One running peer program (``argv``), its stdout lines and stderr kept."""

    argv: Sequence[str]
    #: Where stderr goes (the client's own logs), shown by ``log_tail``.
    log_path: Path | None = None
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None
    lines: list[Event] = field(default_factory=list)
    _reader: threading.Thread | None = None
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def start(self) -> PeerProcess:
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(
                list(self.argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=self.env,
            )
        finally:
            if self.log_path:
                log.close()  # type: ignore[union-attr]
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.proc is not None
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                line = json.loads(raw)
            except ValueError:
                line = {"event": "raw", "text": raw.decode(errors="replace").rstrip()}
            if not isinstance(line, dict):
                line = {"event": "raw", "text": str(line)}
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def events(self, name: str, **fields: object) -> list[Event]:
        """The lines with ``event == name`` whose ``fields`` equal these."""
        with self._changed:
            return [
                line
                for line in self.lines
                if line.get("event") == name and all(line.get(k) == v for k, v in fields.items())
            ]

    def wait_event(self, name: str, timeout: float, **fields: object) -> Event:
        """The first line ``events(name, **fields)`` finds; AssertionError after ``timeout``."""
        return self.wait_until(
            lambda: next(iter(self.events(name, **fields)), None), timeout, f"{name} {fields}"
        )

    def wait_until(self, found: Callable[[], Event | None], timeout: float, what: str) -> Event:
        """``found()`` once it is not None; AssertionError after ``timeout``, or if the peer exits.

        ``timeout`` is at least ``MIN_DEADLINE_S``: a deadline only bounds a failure
        (this returns at the event, or at once when the peer exited), and a short one
        fails whenever the machine is busy.
        """
        timeout = max(timeout, MIN_DEADLINE_S)
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                hit = found()
                if hit is not None:
                    return hit
                exited = self.proc is None or self.proc.poll() is not None
                left = deadline - time.monotonic()
                if left <= 0 or (exited and not self._reading()):
                    raise AssertionError(
                        f"{self.argv[0]}: no {what} after {timeout:.0f} s "
                        f"(exit {self.proc.poll() if self.proc else '-'}); "
                        f"lines {self.lines[-8:]}; log: {self.log_tail(15)}"
                    )
                self._changed.wait(min(left, 0.5))

    def _reading(self) -> bool:
        return self._reader is not None and self._reader.is_alive()

    def stop(self, timeout: float = 30.0) -> int:
        """Ask it to finish (``stop`` on stdin), then SIGTERM, then SIGKILL. The exit code."""
        proc = self.proc
        if proc is None:
            return 0
        if proc.poll() is None and proc.stdin is not None:
            try:
                proc.stdin.write(b"stop\n")
                proc.stdin.close()
            except OSError:
                pass
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None and proc.poll() is None:
                os.kill(proc.pid, sig)
            try:
                proc.wait(timeout if sig is None else 10)
                break
            except subprocess.TimeoutExpired:
                continue
        if self._reader is not None:
            self._reader.join(5)
        return int(proc.returncode if proc.returncode is not None else -9)

    def kill(self) -> None:
        """SIGKILL: gone without closing anything."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def log_tail(self, lines: int = 30) -> str:
        if self.log_path is None:
            return ""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])
