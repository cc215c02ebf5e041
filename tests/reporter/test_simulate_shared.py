"""Two simulators behind two gateways that share subscriptions (a topic store on Tansu).

Each run creates and deletes its own subscription, matching only its own clients: the
run that ends first deletes its subscription while the other still pushes, and the
other's clients keep their SubscriptionId (no UNKNOWN_SUBSCRIPTION_ID) and end with
their terminating pushes.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from clientmetrics.admin import list_client_metrics_resources
from clientmetrics.reporter.cli import SUBSCRIPTION_PREFIX
from tests.procs import BIN, GatewayProcess, TansuProcess, wait_for

pytestmark = pytest.mark.integration

CLIENTS = 20


def _toml(bootstrap: str) -> str:
    # Tansu holds an empty fetch for its whole wait: keep the store's long poll short.
    return f"""
[gateway]
subscriptions_bootstrap_servers = "{bootstrap}"
subscriptions_fetch_wait_ms = 500

[exporters.landing]
roll_seconds = 0.3
"""


@pytest.fixture
def gateways(tmp_path: Path) -> Iterator[list[GatewayProcess]]:
    tansu = TansuProcess(log_path=tmp_path / "tansu.log").start()
    started: list[GatewayProcess] = []
    try:
        for name in "ab":
            started.append(GatewayProcess(tmp_path / name, _toml(tansu.bootstrap)).start())
        yield started
    finally:
        codes = [gw.stop() for gw in started]
        tansu.stop()
    assert codes == [0] * len(codes)


def _simulate(gateway: GatewayProcess, duration: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(BIN / "clientmetrics"), "simulate", "--bootstrap-server", gateway.bootstrap,
         "--clients", str(CLIENTS), "--interval-ms", "500", "--duration", str(duration),
         "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_two_simulators_on_gateways_sharing_a_store_do_not_fight(
    gateways: list[GatewayProcess],
) -> None:
    a, b = gateways
    # The short run deletes its subscription (and the shared store tells b's gateway)
    # while the long run's clients are still pushing: with one shared subscription
    # name that deletion changed every long-run client's SubscriptionId.
    short, long = _simulate(a, 4), _simulate(b, 12)
    reports = []
    for proc in (short, long):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        reports.append(json.loads(out))
    for report in reports:
        assert report["errors"] == {}, report
        assert report["handshakes"] == CLIENTS
        assert report["terminating_pushes"] == CLIENTS
        assert str(report["subscription"]).startswith(SUBSCRIPTION_PREFIX)
    assert reports[0]["subscription"] != reports[1]["subscription"]
    # Both runs cleaned up after themselves, in the one shared store: each gateway sees
    # both deletions once its follower has read them (later on a busy machine).
    for gateway in (a, b):
        wait_for(
            lambda g=gateway: list(list_client_metrics_resources(g.bootstrap)) == [],
            60,
            what=f"no subscription left on {gateway.bootstrap}",
        )
