"""[authorization] on the config RPCs, through the real ``kafka-client-metrics`` tool.

Until SASL listeners are wired, every connection is ``User:ANONYMOUS``; the ACLs
below grant or refuse that principal, the same path an authenticated one takes.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.admin.tool import tool
from tests.procs import GatewayProcess, wait_for

pytestmark = pytest.mark.integration

PREFIX = "Error while executing client metrics command : "
LOCKED = """
[gateway]
max_subscriptions = 3

[authorization]
super_users = ["User:admin"]
acls = [{principal = "User:bob", operation = "ALTER_CONFIGS", permission = "allow"}]
"""
GRANTED = LOCKED.replace(
    "acls = [",
    'acls = [{principal = "User:ANONYMOUS", operation = "ALTER_CONFIGS", permission = "allow"},',
)


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path, config_text=LOCKED).start()
    yield gw
    gw.stop()


def reload(gw: GatewayProcess, text: str) -> None:
    before = len(gw.events("authorization_reloaded"))
    (gw.data_dir / "gateway.toml").write_text(text)
    assert gw.proc is not None
    gw.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: len(gw.events("authorization_reloaded")) > before, 10, what="the reload")


def test_refused_until_an_acl_is_granted_and_reloaded(gateway: GatewayProcess) -> None:
    refused = (1, f"{PREFIX}Cluster authorization failed.\n", "")
    assert tool(gateway, "--alter", "--name", "s1", "--metrics", "org.apache.kafka.") == refused
    assert tool(gateway, "--describe", "--name", "s1") == refused
    assert tool(gateway, "--list") == refused

    reload(gateway, GRANTED)
    assert tool(gateway, "--alter", "--name", "s1", "--metrics", "org.apache.kafka.") == (
        0,
        "Altered client metrics config for s1.\n",
        "",
    )
    code, out, _ = tool(gateway, "--describe", "--name", "s1")  # implied by ALTER_CONFIGS
    assert (code, out.splitlines()[3]) == (0, "  metrics=org.apache.kafka.")
    assert tool(gateway, "--list")[:2] == (0, "s1\n")

    # A broken file keeps the ACLs in force.
    (gateway.data_dir / "gateway.toml").write_text("[authorization]\nacls = 7\n")
    assert gateway.proc is not None
    gateway.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: gateway.events("authorization_reload_failed"), 10, what="the failed reload")
    assert tool(gateway, "--list")[:2] == (0, "s1\n")

    reload(gateway, LOCKED)
    assert tool(gateway, "--delete", "--name", "s1") == refused


def test_the_subscription_cap(gateway: GatewayProcess) -> None:
    reload(gateway, GRANTED)
    for name in ("c1", "c2", "c3"):
        assert tool(gateway, "--alter", "--name", name, "--metrics", "a.")[0] == 0
    code, out, _ = tool(gateway, "--alter", "--name", "c4", "--metrics", "a.")
    assert code == 1
    assert out == (
        f"{PREFIX}Cannot create client metrics subscription c4: the gateway already holds "
        "the maximum of 3 subscriptions (max_subscriptions)\n"
    )
    # Changing or deleting an existing one is still fine, and frees a place.
    assert tool(gateway, "--alter", "--name", "c3", "--interval", "60000")[0] == 0
    assert tool(gateway, "--delete", "--name", "c3")[0] == 0
    assert tool(gateway, "--alter", "--name", "c4", "--metrics", "a.")[0] == 0
