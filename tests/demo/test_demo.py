"""``clientmetrics demo --duration 90`` end to end, then the dashboard over its data in Chromium.

The demo runs once per module (about 100 s: Spark's start dominates); the
browser test reads the data it left behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

from clientmetrics.dashboard import Dashboard, DashboardConfig, DashboardServer
from tests.dashboard.browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = [pytest.mark.integration, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class DemoRun:
    returncode: int
    stdout: str
    stderr: str
    data_dir: Path

    @property
    def summary(self) -> dict[str, object]:
        last = self.stdout.strip().splitlines()[-1]
        value = json.loads(last)
        assert isinstance(value, dict)
        return value


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    data_dir = tmp_path_factory.mktemp("demo") / "cm-data"
    args = [sys.executable, "-c", "from clientmetrics.cli import main; main()", "demo"]
    args += ["--duration", "90", "--data-dir", str(data_dir), "--dashboard-port", "0", "--json"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=280, check=False)
    return DemoRun(done.returncode, done.stdout, done.stderr, data_dir)


def test_demo_runs_everything_and_reports_it(demo_run: DemoRun) -> None:
    assert demo_run.returncode == 0, demo_run.stdout[-3000:] + demo_run.stderr[-3000:]
    out = demo_run.stdout
    assert "waiting for Spark's first batch" in out  # progress while Spark starts
    assert "dashboard: http://127.0.0.1:" in out
    # The summary comes after the dashboard stopped: it says so, and how to see it again.
    after = out.split("\nsummary\n", 1)[1]
    assert "dashboard: stopped (was http://127.0.0.1:" in after
    assert f"clientmetrics dashboard --data-dir {demo_run.data_dir}" in after
    summary = demo_run.summary
    assert summary["real_clients"] == 3  # two confluent-kafka producers and a consumer
    assert summary["simulated_clients"] == 300
    assert isinstance(summary["pushes_accepted"], int)
    assert summary["pushes_accepted"] > 1000
    assert isinstance(summary["data_points"], int)
    assert summary["data_points"] > 10_000
    assert isinstance(summary["alerts"], int)
    assert summary["alerts"] >= 1
    assert summary["alerted_clients"] == ["unhealthy-producer-0"]
    # The unhealthy producer pushed until the pipeline stopped: its alert is still firing.
    assert summary["open_alerts"] == 1
    assert "     data points: " in out  # the human-readable summary too
    # No debug events unless asked: the dashboard's (in process) and the pipeline's.
    assert "dashboard_request" not in out + demo_run.stderr
    assert "pipeline stage" not in (demo_run.data_dir / "logs" / "pipeline.log").read_text()


def test_the_real_clients_move_messages_through_a_broker(demo_run: DemoRun) -> None:
    # A local Tansu behind the gateway (proxy mode): the real consumer has work to do.
    assert "gateway (proxy in front of 127.0.0.1:" in demo_run.stdout
    found = re.search(r"real clients: (\d+) messages produced, (\d+) consumed", demo_run.stdout)
    assert found is not None, demo_run.stdout
    assert int(found[1]) > 0
    assert int(found[2]) > 0
    points = ds.dataset(demo_run.data_dir / "tables" / "points", partitioning="hive")
    assigned = points.to_table(
        columns=["value"],
        filter=(pc.field("client_id") == "demo-consumer-0")
        & (pc.field("metric_name") == "org.apache.kafka.consumer.coordinator.assigned.partitions"),
    )
    # It joined its group and was given both partitions of the demo's topic.
    assert pc.max(assigned.column("value")).as_py() == 2


def test_demo_stops_every_child(demo_run: DemoRun) -> None:
    logs = demo_run.data_dir / "logs"
    assert '"event": "gateway_stopped"' in (logs / "gateway.log").read_text()
    # The pipeline was interrupted, not killed: its checkpoint committed batches.
    commits = demo_run.data_dir / "checkpoints" / "pipeline" / "commits"
    assert any(commits.iterdir())
    # ... and quietly: no py4j tracebacks from the stop, no JVM or Spark start-up warnings
    # (a loaded machine may still make a batch outlast its trigger: Spark says so).
    first, *rest = (logs / "pipeline.log").read_text().splitlines()
    assert first == f"streaming from {demo_run.data_dir / 'landing' / 'pushes'}; Ctrl-C to stop"
    unexpected = [line for line in rest if "Current batch is falling behind" not in line]
    assert unexpected == [], "\n".join(unexpected[:80])


def test_ctrl_c_stops_everything_and_still_summarises(tmp_path: Path) -> None:
    args = [sys.executable, "-c", "from clientmetrics.cli import main; main()", "demo"]
    args += ["--data-dir", str(tmp_path / "cm-data"), "--dashboard-port", "0", "--clients", "20"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "dashboard: http://" in line:
            break
    proc.send_signal(signal.SIGINT)
    out = "".join(seen) + proc.stdout.read()
    assert proc.wait(60) == 0, out
    assert "stopping (interrupted)" in out
    assert "prometheus exporter: http://127.0.0.1:" in out
    assert "pushes accepted:" in out
    gateway_log = (tmp_path / "cm-data" / "logs" / "gateway.log").read_text()
    assert '"event": "gateway_stopped"' in gateway_log


@pytest.fixture
def dashboard(demo_run: DemoRun) -> Iterator[DashboardServer]:
    assert demo_run.returncode == 0
    server = DashboardServer(Dashboard(DashboardConfig(demo_run.data_dir)))
    server.start()
    yield server
    server.stop()


def test_browser_sees_clients_a_chart_and_the_alert(
    dashboard: DashboardServer, tmp_path: Path
) -> None:
    if not CHROMIUM.exists():
        pytest.skip("needs Debian's chromium: apt-get install -y chromium")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(dashboard.url)
            assert "303 of 303 clients" in page.inner_text("#summary")
            page.fill("input[name=q]", "unhealthy-producer")
            page.press("input[name=q]", "Enter")
            page.wait_for_url("**/?q=unhealthy-producer*")
            assert "1 of 303 clients" in page.inner_text("#summary")
            row = page.locator("table.inventory tbody tr").first
            assert row.locator("td").nth(8).inner_text() == "1"  # one active alert
            row.locator("a").first.click()
            page.wait_for_url("**/client/**")
            page.click("a[href$='window=all']")
            page.wait_for_url("**window=all")
            box = page.locator(".chart-box", has_text="node.request.latency.avg").first
            points = box.locator("polyline").first.get_attribute("points") or ""
            assert len(points.split()) >= 5
            alert = page.locator("table.alerts tbody tr").first
            assert "slow-producer-requests" in alert.inner_text()
            assert "open" in alert.inner_text()
            shot = tmp_path / "dashboard.png"
            page.screenshot(path=str(shot))
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000
    if os.environ.get("UPDATE_SCREENSHOT") == "1":
        target = REPO / "docs" / "img" / "dashboard.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, target)
