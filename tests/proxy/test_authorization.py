"""Proxy mode: client-metrics configs answered by the gateway obey [authorization] too."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from peers.free_ports import free_port_block

from tests.admin.tool import run_tool
from tests.procs import TansuProcess, wait_for
from tests.proxy.conftest import FAST_LANDING, TANSU_NODE, ProxyGateway

pytestmark = pytest.mark.integration

LOCKED = FAST_LANDING + '\n[authorization]\nsuper_users = ["User:admin"]\n'
GRANTED = (
    LOCKED + 'acls = [{principal = "User:*", operation = "ALTER_CONFIGS", permission = "allow"}]\n'
)


@pytest.fixture
def proxy(tansu: TansuProcess, tmp_path: Path) -> Iterator[ProxyGateway]:
    base = free_port_block(TANSU_NODE + 1)
    gw = ProxyGateway(
        tmp_path / "gw",
        LOCKED,
        extra_args=("--upstream", tansu.bootstrap, "--broker-port-base", str(base)),
    )
    gw.broker_port_base = base
    gw.start()
    yield gw
    gw.stop()


def test_alter_through_the_proxy_needs_alter_configs(proxy: ProxyGateway) -> None:
    alter = ("--bootstrap-server", proxy.bootstrap, "--alter", "--name", "p1", "--metrics", "a.")
    result = run_tool(*alter)
    assert (result.code, result.out) == (
        1,
        "Error while executing client metrics command : Cluster authorization failed.\n",
    )
    (proxy.data_dir / "gateway.toml").write_text(GRANTED)
    assert proxy.proc is not None
    proxy.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: proxy.events("authorization_reloaded"), 10, what="the reload")
    assert run_tool(*alter).code == 0
    listed = run_tool("--bootstrap-server", proxy.bootstrap, "--list")
    assert (listed.code, listed.out) == (0, "p1\n")
