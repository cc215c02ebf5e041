"""``serve --log-format auto`` (the default): console lines at a terminal, JSON otherwise."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time
from pathlib import Path

from tests.procs import BIN, MIN_DEADLINE_S, stop_process


def _first_line(read_fd: int, proc: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + MIN_DEADLINE_S
    seen = b""
    try:
        while b"gateway_started" not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([read_fd], [], [], 0.5)
            if ready:
                seen += os.read(read_fd, 65536)
    finally:
        stop_process(proc, 20)
    line = next(x for x in seen.decode().splitlines() if "gateway_started" in x)
    return line.strip()


def _start(tmp_path: Path, stderr: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(BIN / "clientmetrics"), "serve", "--listen", "127.0.0.1:0",
         "--data-dir", str(tmp_path / "data")],
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )  # fmt: skip


def test_console_lines_at_a_terminal(tmp_path: Path) -> None:
    controller, terminal = pty.openpty()
    proc = _start(tmp_path, terminal)
    os.close(terminal)
    try:
        line = _first_line(controller, proc)
    finally:
        os.close(controller)
    assert not line.startswith("{")
    assert "[info     ] gateway_started" in line


def test_json_when_not_a_terminal(tmp_path: Path) -> None:
    read_fd, write_fd = os.pipe()
    proc = _start(tmp_path, write_fd)
    os.close(write_fd)
    try:
        line = _first_line(read_fd, proc)
    finally:
        os.close(read_fd)
    event = json.loads(line)
    assert (event["event"], event["level"]) == ("gateway_started", "info")
