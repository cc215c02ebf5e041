"""Run the ``kafka-client-metrics`` console command as a subprocess."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_SCRIPT = Path(sys.executable).parent / "kafka-client-metrics"


def command() -> list[str]:
    """The installed console script, or the module until the lead adds the script entry."""
    if _SCRIPT.exists():
        return [str(_SCRIPT)]
    return [sys.executable, "-m", "clientmetrics.admin"]


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


def run_tool(*args: str, timeout: float = 30.0) -> Result:
    proc = subprocess.run(
        [*command(), *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)
