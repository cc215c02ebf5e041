"""A real Prometheus Alertmanager (Debian's package) for the incident tests, run by PID."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.procs import MIN_DEADLINE_S, free_port, stop_process
from tests.prometheus_server import wait_ready

#: Debian names the binary after the package.
BINARIES = ("prometheus-alertmanager", "alertmanager")


def alertmanager_binary() -> str | None:
    for name in BINARIES:
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class AlertmanagerServer:
    """Debian's Alertmanager on 127.0.0.1, grouping by ``group_by``, with no clustering."""

    workdir: Path
    group_by: tuple[str, ...]
    #: Alertmanager ``inhibit_rules`` entries.
    inhibit: tuple[dict[str, Any], ...] = ()
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> AlertmanagerServer:
        binary = alertmanager_binary()
        assert binary is not None, (
            "alertmanager is not installed (apt-get install prometheus-alertmanager)"
        )
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "alertmanager.yml"
        # JSON is YAML: the configuration is written as JSON.
        settings = {
            "route": {"receiver": "none", "group_by": list(self.group_by)},
            "receivers": [{"name": "none"}],
            "inhibit_rules": list(self.inhibit),
        }
        config.write_text(json.dumps(settings, indent=1))
        self.port = free_port()
        log = open(self.workdir / "alertmanager.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=log,
            cwd=self.workdir,
        )
        if wait_ready(self.url("/-/ready"), self.proc, timeout, self.log_tail):
            return self
        self.stop()
        raise RuntimeError("alertmanager did not become ready: " + self.log_tail())

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def get(self, path: str, **query: str) -> Any:
        """A v2 API GET (``/api/v2/alerts``, ``/api/v2/alerts/groups``) as JSON."""
        q = f"?{urllib.parse.urlencode(query)}" if query else ""
        with urllib.request.urlopen(self.url(f"/api/v2{path}{q}"), timeout=MIN_DEADLINE_S) as r:
            return json.load(r)

    def log_tail(self) -> str:
        path = self.workdir / "alertmanager.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is not None:
            stop_process(self.proc, timeout)
        self.proc = None
