"""The dashboard's reaper: no watch outlives its expiry, with the dashboard running or not.

For Apache Kafka with the broker plugin nothing beside the broker deletes
expired watches, so ``clientmetrics dashboard --reap-command-config`` does, at
start and every 20 s. Here the gateway's own reaper is slowed to an hour, so
what is seen is the dashboard's doing: a watch that expires while the dashboard
runs is gone within a minute of its expiry, and one that expired while it was
down is gone as soon as it starts again.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clientmetrics.investigate.watches import parse_watch_name, watch_name
from tests.investigate.test_watches import cmd
from tests.kadmin import set_subscription
from tests.procs import BIN, GatewayProcess, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path / "data", "[gateway]\nexpiry_check_ms = 3600000\n").start()
    yield gw
    assert gw.stop() == 0


def watches(gateway: GatewayProcess) -> list[str]:
    return [line.split()[0] for line in cmd(gateway, "list").stdout.splitlines()]


def add_watch(gateway: GatewayProcess, owner: str, expires_in_s: float) -> str:
    name = watch_name(owner, int((time.time() + expires_in_s) * 1000), "0a1b2c3d")
    set_subscription(gateway.bootstrap, name, {"metrics": "org.apache.kafka.consumer."})
    return name


def dashboard(gateway: GatewayProcess, props: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(BIN / "clientmetrics"), "dashboard", "--data-dir", str(gateway.data_dir),
         "--listen", "127.0.0.1:0", "--bootstrap-server", gateway.bootstrap,
         "--reap-command-config", str(props), "--log-format", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def stop(proc: subprocess.Popen[str]) -> str:
    proc.terminate()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return err


def test_expired_watches_go_with_the_dashboard_up_and_after_it_was_down(
    gateway: GatewayProcess, tmp_path: Path
) -> None:
    props = tmp_path / "reaper.properties"
    props.write_text("client.id=dashboard-reaper\n")
    old = add_watch(gateway, "bob", -60)  # expired before the dashboard started
    later = add_watch(gateway, "dave", 3600)
    proc = dashboard(gateway, props)
    try:
        wait_for(lambda: old not in watches(gateway), 30, what="the reap at start")
        soon = add_watch(gateway, "carol", 5)  # after the reap at start: the periodic one's
        assert soon in watches(gateway)
        wait_for(lambda: soon not in watches(gateway), 65, what="the periodic reap")
        late_ms = time.time() * 1000 - expiry_ms(soon)
        assert late_ms < 60_000, late_ms  # within a minute of its expiry
    finally:
        err = stop(proc)
    assert '"event": "dashboard_watch_reaped"' in err
    assert old in err
    assert soon in err
    # Down: a watch expires meanwhile, and goes as soon as a dashboard starts again.
    while_down = add_watch(gateway, "erin", 2)
    wait_for(
        lambda: time.time() * 1000 >= expiry_ms(while_down), 30, what="its expiry, dashboard down"
    )
    assert while_down in watches(gateway)
    proc = dashboard(gateway, props)
    try:
        wait_for(lambda: while_down not in watches(gateway), 30, what="the reap at restart")
    finally:
        stop(proc)
    assert watches(gateway) == [later]


def expiry_ms(name: str) -> int:
    watch = parse_watch_name(name)
    assert watch is not None
    return watch.expires_at_ms
