"""Ctrl-C at any moment of ``pipeline stream``'s start-up leaves no Spark JVM behind.

A terminal's Ctrl-C is SIGINT to the whole foreground process group. PySpark
starts its JVM with SIGINT ignored and relies on the JVM reading its stdin's
end; the driver counts a signal that comes while it starts and stops at the
start's next step (``pipeline.stopping``). A driver interrupted before the JVM
wrote its port deleted the port file's directory, the JVM's main thread died on
it, and the JVM lived on under PID 1 (4 of 5 tries). The JVM is found by a
marker in its environment, so it is found even once it is nobody's child.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.integration]

BIN = Path(sys.executable).parent
MARKER = "CLIENTMETRICS_TEST_JVM"


def _marked_jvms(mark: str) -> list[int]:
    """The pids of live JVMs started with ``MARKER=mark`` in their environment."""
    found = []
    needle = f"{MARKER}={mark}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            program = (entry / "cmdline").read_bytes().split(b"\0")[0]
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # gone, or not ours to read
            continue
        if program.endswith(b"/java") and state != "Z":
            found.append(int(entry.name))
    return found


def _wait(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("moment", ["jvm-started", "jvm-plus-2s", "streaming"])
def test_ctrl_c_during_start_up_leaves_no_jvm(tmp_path: Path, moment: str) -> None:
    (tmp_path / "landing" / "pushes").mkdir(parents=True)
    mark = uuid.uuid4().hex
    log = tmp_path / "stream.log"
    command = [str(BIN / "clientmetrics"), "pipeline", "stream", "--data-dir", str(tmp_path),
               "--master", "local[1]", "--conf", "spark.ui.enabled=false"]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command,
            env={**os.environ, MARKER: mark},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: Ctrl-C's SIGINT goes to the group
        )
    try:
        # The JVM is there from its first instruction (the dangerous window: it has not
        # written its port yet); then later in its start; then once the query runs.
        _wait(lambda: bool(_marked_jvms(mark)) or proc.poll() is not None, 180, "no JVM")
        assert proc.poll() is None, log.read_text()[-3000:]
        if moment == "jvm-plus-2s":
            time.sleep(2)  # a moment of the start, not a wait for an event
        elif moment == "streaming":
            _wait(lambda: "Ctrl-C to stop" in log.read_text(), 180, log.read_text()[-3000:])
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(120)
        if moment == "streaming":
            assert code == 0, log.read_text()[-3000:]
        elif moment == "jvm-started":
            # Before the gateway is up the signal is only counted: the start stops at its
            # next step, with one line and no py4j or JVM traceback.
            text = log.read_text()
            assert code == 130, text[-3000:]
            assert "stopped during start-up" in text, text[-3000:]
            assert "Traceback" not in text, text[-3000:]
            assert "Exception in thread" not in text, text[-3000:]
        # Every JVM of this run is gone within a deadline (SIGTERM runs its shutdown hooks).
        _wait(lambda: not _marked_jvms(mark), 60, f"JVM left: {_marked_jvms(mark)}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in _marked_jvms(mark):
            os.kill(pid, signal.SIGKILL)
