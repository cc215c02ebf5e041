"""Run the ``kafka-client-metrics`` console command as a subprocess."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.procs import GatewayProcess

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


def tool(gw: GatewayProcess, *args: str) -> tuple[int, str, str]:
    """The tool against ``gw``: exit code, stdout, stderr."""
    result = run_tool("--bootstrap-server", gw.bootstrap, *args)
    return result.code, result.out, result.err


def list_with(port: int, tmp_path: Path, props: str) -> tuple[int, str, str]:
    """``--list`` against 127.0.0.1:``port`` with ``props`` as its --command-config file."""
    path = tmp_path / "client.properties"
    path.write_text(props)
    result = run_tool(
        "--bootstrap-server", f"127.0.0.1:{port}", "--command-config", str(path), "--list",
        "--timeout", "5000",
    )  # fmt: skip
    return result.code, result.out, result.err
