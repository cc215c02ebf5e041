"""Watches: their names, the reaper in a fresh process, a refusal, Ctrl-C leaves nothing.

Against the standalone gateway, through ``clientmetrics investigate`` as an
operator runs it.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from clientmetrics.investigate.watches import literal, parse_watch_name, watch_name
from tests.kadmin import set_subscription
from tests.procs import BIN, MIN_DEADLINE_S, GatewayProcess

pytestmark = pytest.mark.integration

NOON_30 = int(datetime(2026, 11, 28, 12, 30, tzinfo=UTC).timestamp() * 1000)


def test_a_watch_name_carries_owner_and_expiry() -> None:
    name = watch_name("alice@corp.example", NOON_30 + 999, "0a1b2c3d")
    assert name == "investigate.alice_corp_example.20261128T123000Z.0a1b2c3d"
    watch = parse_watch_name(name)
    assert watch is not None
    assert (watch.owner, watch.expires_at_ms, watch.watch_id) == (
        "alice_corp_example",
        NOON_30,
        "0a1b2c3d",
    )
    assert watch.expires_text == "2026-11-28T12:30:00Z"
    assert not watch.expired(NOON_30 - 1)
    assert watch.expired(NOON_30)
    for other in ("baseline", "investigate.a.20261128T123000Z", "investigate.a.x.0a1b2c3d"):
        assert parse_watch_name(other) is None


def test_literal_patterns_match_only_the_text() -> None:
    assert literal("app-1.prod") == r"app-1\.prod"
    assert literal("a+b(c)") == r"a\+b\(c\)"
    assert literal("::1") == "::1"


def cmd(gateway: GatewayProcess, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [str(BIN / "clientmetrics"), "investigate", *args, "--bootstrap-server"]
    return subprocess.run(
        [*argv, gateway.bootstrap], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    # The gateway reaps expired watches itself (tests/gateway/test_watch_reaper.py);
    # here its housekeeping waits an hour, so that what is seen is the command's doing.
    gw = GatewayProcess(tmp_path / "data", "[gateway]\nexpiry_check_ms = 3600000\n").start()
    yield gw
    assert gw.stop() == 0


def test_a_fresh_process_reaps_what_expired_and_nothing_else(gateway: GatewayProcess) -> None:
    expired = "investigate.bob.20200101T000000Z.deadbeef"
    future = "investigate.carol.20991231T235959Z.cafef00d"
    for name in (expired, future, "baseline"):
        set_subscription(gateway.bootstrap, name, {"metrics": "org.apache.kafka.consumer."})
    listed = cmd(gateway, "list").stdout.splitlines()
    assert [line.split()[:4] for line in listed] == [
        [expired, "owner=bob", "expires=2020-01-01T00:00:00Z", "EXPIRED"],
        [future, "owner=carol", "expires=2099-12-31T23:59:59Z", "active"],
    ]
    reaped = cmd(gateway, "reap")
    assert reaped.returncode == 0, reaped.stderr
    assert reaped.stdout.splitlines() == [
        f"reaped {expired}  owner=bob  expired=2020-01-01T00:00:00Z",
        "1 expired watch(es) deleted",
    ]
    assert [line.split()[0] for line in cmd(gateway, "list").stdout.splitlines()] == [future]
    again = cmd(gateway, "reap")
    assert again.stdout == "0 expired watch(es) deleted\n"
    assert cmd(gateway, "stop", expired).stdout == f"{expired} was already gone\n"
    assert cmd(gateway, "stop", future).stdout == f"stopped {future}\n"
    refused = cmd(gateway, "stop", "baseline")
    assert (refused.returncode, refused.stderr) == (
        2,
        "baseline is not a watch (investigate.<owner>.<expiry>.<id>)\n",
    )
    assert cmd(gateway, "list").stdout == ""


LOCKED = """
[authorization]
super_users = ["User:admin"]
acls = [{principal = "User:bob", operation = "ALTER_CONFIGS", permission = "allow"}]
"""


def test_a_refused_watch_is_one_line_and_exit_1(tmp_path: Path) -> None:
    gw = GatewayProcess(tmp_path / "data", LOCKED).start()
    try:
        result = cmd(gw, "watch", "--client-id", "app", "--data-dir", str(gw.data_dir))
        assert (result.returncode, result.stdout) == (1, "")
        assert result.stderr == (
            "investigate: CLUSTER_AUTHORIZATION_FAILED (31): Cluster authorization failed.\n"
        )
    finally:
        gw.stop()


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "term"])
def test_ctrl_c_deletes_the_watch(gateway: GatewayProcess, stop_signal: signal.Signals) -> None:
    proc = subprocess.Popen(
        [str(BIN / "clientmetrics"), "investigate", "watch", "--client-id", "app",
         "--data-dir", str(gateway.data_dir), "--bootstrap-server", gateway.bootstrap],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    started = proc.stdout.readline()
    assert started.startswith("watching investigate.")
    name = started.split()[1]
    assert [line.split()[0] for line in cmd(gateway, "list").stdout.splitlines()] == [name]
    proc.send_signal(stop_signal)
    out, err = proc.communicate(timeout=MIN_DEADLINE_S)
    assert out.splitlines()[0] == f"deleted {name}"
    assert proc.returncode == 0, err
    assert cmd(gateway, "list").stdout == ""
