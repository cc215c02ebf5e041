"""A real Prometheus server (Debian's package) for the exporter tests, run by PID."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.procs import MIN_DEADLINE_S, free_port, stop_process


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


def wait_ready(
    url: str, proc: subprocess.Popen[bytes], timeout: float, log_tail: Callable[[], str]
) -> bool:
    """Whether ``url`` answered 200 within ``timeout``; a process that exits first raises
    with its log's tail (Prometheus and Alertmanager both answer ``/-/ready``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return True
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(log_tail()) from None
            time.sleep(0.2)
    return False


@dataclass
class PrometheusServer:
    """Debian's ``prometheus`` scraping ``targets`` every ``interval`` on 127.0.0.1."""

    workdir: Path
    targets: tuple[str, ...]
    interval: str = "1s"
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = MIN_DEADLINE_S) -> PrometheusServer:
        binary = prometheus_binary()
        assert binary is not None, "prometheus is not installed (apt-get install prometheus)"
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "prometheus.yml"
        targets = ", ".join(f"'{t}'" for t in self.targets)
        config.write_text(
            f"global:\n  scrape_interval: {self.interval}\n  evaluation_interval: {self.interval}\n"
            "scrape_configs:\n"
            f"  - job_name: clientmetrics\n    static_configs:\n      - targets: [{targets}]\n"
        )
        self.port = free_port()
        log = open(self.workdir / "prometheus.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=log,
            cwd=self.workdir,
        )
        if wait_ready(self.url("/-/ready"), self.proc, timeout, self.log_tail):
            return self
        self.stop()
        raise RuntimeError("prometheus did not become ready: " + self.log_tail())

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def query(self, promql: str) -> list[dict[str, object]]:
        """An instant PromQL query through the HTTP API: the result vector."""
        q = urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(self.url(f"/api/v1/query?{q}"), timeout=MIN_DEADLINE_S) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        result: list[dict[str, object]] = body["data"]["result"]
        return result

    def metadata(self, metric: str) -> str | None:
        """The type Prometheus recorded for ``metric`` from its scrapes."""
        q = urllib.parse.urlencode({"metric": metric})
        with urllib.request.urlopen(self.url(f"/api/v1/metadata?{q}"), timeout=MIN_DEADLINE_S) as r:
            entries = json.load(r)["data"].get(metric, [])
        return str(entries[0]["type"]) if entries else None

    def log_tail(self) -> str:
        path = self.workdir / "prometheus.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is not None:
            stop_process(self.proc, timeout)
        self.proc = None
