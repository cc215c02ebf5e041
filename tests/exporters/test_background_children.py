"""The landing converter and the exporter process step out of their worker's way:
a lower priority, and other cores than the worker's when it is pinned and there
are others."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clientmetrics.lifeline import BACKGROUND_NICENESS

ROOT = Path(__file__).resolve().parents[2]

#: Pins itself to one core, starts the landing converter (and an exporter process),
#: and reports their niceness and cores as the kernel sees them.
SCRIPT = """
import asyncio, json, os, sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
os.sched_setaffinity(0, {int(sys.argv[1])})
from clientmetrics.exporters.child import ChildExporters
from clientmetrics.exporters.landing_converter import Converter

def seen(pid):
    nice = os.getpriority(os.PRIO_PROCESS, pid)
    return {"nice": nice, "cores": sorted(os.sched_getaffinity(pid))}

converter = Converter(ThreadPoolExecutor(1))
pool = converter._start_pool()
(pid,) = pool._processes
out = {"worker": seen(0), "converter": seen(pid)}

async def exporter_child():
    child = ChildExporters([("prometheus", {"listen": "127.0.0.1:0"})], Path(sys.argv[2]))
    await child.start()
    out["exporters"] = seen(child._proc.pid)
    await child.close(60)

asyncio.run(exporter_child())
converter.shutdown()
print(json.dumps(out))
"""


def test_background_children_run_niced_and_off_the_workers_core(tmp_path: Path) -> None:
    cores = sorted(os.sched_getaffinity(0))
    worker_core = cores[0]
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(worker_core), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    worker = seen["worker"]
    assert worker["cores"] == [worker_core]
    for child in ("converter", "exporters"):
        assert seen[child]["nice"] == min(worker["nice"] + BACKGROUND_NICENESS, 19), seen
        if len(cores) > 1 or (os.cpu_count() or 1) > 1:
            assert worker_core not in seen[child]["cores"], seen
        else:
            pytest.skip("one core only: nowhere else to go")
