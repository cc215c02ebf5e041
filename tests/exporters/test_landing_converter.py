"""Segments are converted in a child process that lives and dies with its writer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from landing_helpers import build_push, read_landing
from tests.procs import MIN_DEADLINE_S

from clientmetrics.exporters import LandingExporter, LandingOptions

CRASH_WRITER = Path(__file__).with_name("crash_writer.py")


def _children(pid: int) -> set[int]:
    """Spawned worker processes of ``pid`` (not multiprocessing's resource tracker)."""
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
    children = set()
    for child in map(int, out.stdout.split()):
        cmdline = Path(f"/proc/{child}/cmdline")
        if cmdline.exists() and b"spawn_main" in cmdline.read_bytes():
            children.add(child)
    return children


def _alive(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    # A killed child may linger as a zombie until its reaper collects it.
    return status.exists() and "\nState:\tZ" not in status.read_text()


async def test_segments_are_converted_in_a_child_that_close_stops(tmp_path: Path) -> None:
    before = _children(os.getpid())
    exporter = LandingExporter(tmp_path, LandingOptions(roll_bytes=2_000))
    await exporter.start()
    for i in range(40):
        await exporter.export(build_push(i, payload=b"x" * 200))
    await exporter.flush(timeout_s=60)
    converters = _children(os.getpid()) - before
    assert len(converters) == 1, "one converter process, started by the first roll"
    await exporter.close(timeout_s=60)
    assert exporter.stats.files > 1
    assert sorted(read_landing(tmp_path).column("client_id").to_pylist()) == sorted(
        f"c{i}" for i in range(40)
    )
    assert not any(_alive(pid) for pid in converters), "close stops the converter"


def test_the_converter_dies_with_a_killed_writer(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, str(CRASH_WRITER), str(tmp_path), "400", "5000"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "started"
    deadline = time.monotonic() + 60
    converters: set[int] = set()
    while not converters and time.monotonic() < deadline:
        proc.stdout.readline()  # an acknowledged push; rolls start the converter
        converters = _children(proc.pid)
    assert converters, "the writer started a converter"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=MIN_DEADLINE_S)
    deadline = time.monotonic() + MIN_DEADLINE_S
    while any(_alive(pid) for pid in converters) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in converters), "an orphan converter must not go on"
    # And it lets go of the writer's stdout: the pipe reaches its end.
    proc.stdout.read()
