"""The dashboard over real sockets: the HTTP server, the CLI, a real gateway's /metrics."""

from __future__ import annotations

import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from clientmetrics.admin import alter, subscription_configs
from clientmetrics.dashboard import Dashboard, DashboardConfig, DashboardServer
from tests.dashboard.tables import DataDir
from tests.procs import MIN_DEADLINE_S, GatewayProcess
from tests.tlsfiles import TestCA


@pytest.fixture
def server(data: DataDir) -> Iterator[DashboardServer]:
    running = DashboardServer(Dashboard(DashboardConfig(data.root)))
    running.start()
    yield running
    running.stop()


def fetch(url: str, method: str = "GET") -> tuple[int, str]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=MIN_DEADLINE_S) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_server_binds_localhost_and_serves_pages(server: DashboardServer, data: DataDir) -> None:
    assert server.url.startswith("http://127.0.0.1:")
    status, body = fetch(server.url)
    assert status == 200
    assert "of 120 clients" in body
    status, body = fetch(f"{server.url}client/{data.ids[0]}?window=all")
    assert status == 200
    assert "<polyline" in body


def test_server_is_read_only(server: DashboardServer) -> None:
    for method in ("POST", "PUT", "DELETE"):
        assert fetch(server.url, method)[0] == 405


def test_cli_prints_its_url_and_serves_until_interrupted(data: DataDir) -> None:
    args = [sys.executable, "-c", "from clientmetrics.cli import main; main()", "dashboard"]
    args += ["--data-dir", str(data.root), "--listen", "127.0.0.1:0"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("dashboard: http://127.0.0.1:")
        url = line.split()[1]
        assert "120 of 120 clients" in fetch(url)[1]
    finally:
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(10) == 0
    assert proc.stderr is not None
    assert "dashboard_request" not in proc.stderr.read()  # a debug event: not by default


def test_cli_refuses_a_data_dir_that_does_not_exist(tmp_path: Path) -> None:
    args = [sys.executable, "-c", "from clientmetrics.cli import main; main()", "dashboard"]
    missing = tmp_path / "cm-dta"
    done = subprocess.run(
        [*args, "--data-dir", str(missing), "--listen", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"clientmetrics dashboard: data directory {missing} does not exist "
        "(give the gateway's --data-dir)"
    ]


def test_cli_rejects_a_bad_listen_address(data: DataDir) -> None:
    args = [sys.executable, "-c", "from clientmetrics.cli import main; main()", "dashboard"]
    done = subprocess.run(
        [*args, "--listen", "nonsense"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert "HOST:PORT" in done.stderr


@pytest.mark.integration
def test_gateway_and_subscription_pages_read_a_running_gateway(tmp_path: Path) -> None:
    gateway = GatewayProcess(tmp_path / "gw").start()
    try:
        configs = subscription_configs(metrics=["org.apache.kafka.consumer."], interval_ms=7000)
        alter(gateway.bootstrap, "consumers", configs)
        assert gateway.metrics_port is not None
        metrics = f"http://127.0.0.1:{gateway.metrics_port}/metrics"
        config = DashboardConfig(
            tmp_path / "gw", bootstrap_server=gateway.bootstrap, gateway_metrics_url=metrics
        )
        app = Dashboard(config)
        page = app.handle("/gateway").body.decode()
        assert "kafka_server_client_metrics_instance_count" in page
        assert "id='card-instance_count'><b>0</b>" in page
        assert "id='card-push_total'><b>0</b>" in page  # a rate already on the first load
        # Every name the page shows is one /metrics has, and /metrics uses base units.
        with urllib.request.urlopen(metrics, timeout=MIN_DEADLINE_S) as response:
            exposed = {
                sample.name
                for family in text_string_to_metric_families(response.read().decode())
                for sample in family.samples
            }
        shown = re.findall(r"<code>(kafka_server_client_metrics_\w+)</code>", page)
        assert len(shown) > 10
        assert set(shown) <= exposed
        assert "kafka_server_client_metrics_push_total" in shown
        assert not [name for name in exposed if re.search(r"_ms(_|$)", name)]
        assert "kafka_server_client_metrics_plugin_export_time_seconds_total" in exposed
        assert "<td><code>landing</code></td>" in page  # the exporters table
        subscriptions = app.handle("/subscriptions").body.decode()
        assert f"the admin API at {gateway.bootstrap}" in subscriptions
        assert (
            f"--bootstrap-server {gateway.bootstrap} --alter --name consumers "
            "--metrics org.apache.kafka.consumer. --interval 7000"
        ) in subscriptions
        # The same subscription, read from the store file instead (read-only).
        offline = Dashboard(DashboardConfig(tmp_path / "gw")).handle("/subscriptions")
        assert "--name consumers" in offline.body.decode()
    finally:
        assert gateway.stop() == 0
    unreachable = Dashboard(DashboardConfig(tmp_path / "gw", gateway_metrics_url=metrics))
    assert "cannot read" in unreachable.handle("/gateway").body.decode()


def test_cli_serves_https_with_its_own_certificate_and_no_warning(
    data: DataDir, tmp_path: Path
) -> None:
    """--tls-cert/--tls-key: HTTPS a client trusting the test's CA reads; plain HTTP gets
    no page, a client not trusting the CA no connection; a page is served while a silent
    connection waits for its handshake; write actions on 0.0.0.0 over TLS print no
    warning."""
    ca = TestCA(tmp_path / "tls")
    pem = ca.issue("dashboard")
    args = [sys.executable, "-c", "from clientmetrics.cli import main; main()", "dashboard"]
    args += ["--data-dir", str(data.root), "--listen", "0.0.0.0:0", "--write-actions"]
    args += ["--bootstrap-server", "127.0.0.1:1"]
    args += ["--tls-cert", str(pem.certificate), "--tls-key", str(pem.private_key)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("dashboard: https://0.0.0.0:"), line
        port = int(line.split()[1].rsplit(":", 1)[1].strip("/"))
        trusting = ssl.create_default_context(cafile=str(ca.ca))
        request = urllib.request.Request(f"https://127.0.0.1:{port}/investigate")
        with urllib.request.urlopen(request, timeout=MIN_DEADLINE_S, context=trusting) as page:
            assert page.status == 200
            assert "id=login" in page.read().decode()
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=MIN_DEADLINE_S)
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(f"https://127.0.0.1:{port}/", timeout=MIN_DEADLINE_S)
        with (
            socket.create_connection(("127.0.0.1", port)),
            urllib.request.urlopen(
                f"https://127.0.0.1:{port}/", timeout=MIN_DEADLINE_S, context=trusting
            ) as page,
        ):
            assert page.status == 200
    finally:
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(10) == 0
    assert proc.stderr is not None
    assert "WARNING" not in proc.stderr.read()


def test_cli_refuses_a_key_that_is_not_the_certificates(data: DataDir, tmp_path: Path) -> None:
    ca = TestCA(tmp_path / "tls")
    one, other = ca.issue("one"), ca.issue("other")
    args = [sys.executable, "-c", "from clientmetrics.cli import main; main()", "dashboard"]
    args += ["--data-dir", str(data.root), "--listen", "127.0.0.1:0"]
    done = subprocess.run(
        [*args, "--tls-cert", str(one.certificate), "--tls-key", str(other.private_key)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (1, "")
    (line,) = done.stderr.splitlines()
    assert line.startswith("clientmetrics dashboard: listener: cannot load TLS files: "), line
    done = subprocess.run(
        [*args, "--tls-cert", str(one.certificate)],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr == "clientmetrics dashboard: --tls-cert and --tls-key go together\n"
