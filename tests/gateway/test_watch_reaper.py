"""The gateway deletes expired watches from its own store, with no ``investigate`` running.

Watches are created through the admin API with names whose expiry is already
past, as an ``investigate watch`` killed long ago would have left them; the
gateway's housekeeping must delete them (audit-logged as its reaper) and never
touch another subscription.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from clientmetrics.admin import AdminConfig, AsyncAdmin
from clientmetrics.gateway.housekeeping import REAPER_PRINCIPAL
from clientmetrics.gateway.subscriptions import Subscriptions
from clientmetrics.store.sqlite import SqliteSubscriptionStore
from clientmetrics.telemetry.manager import ClientMetricsManager, TelemetryConfig
from tests.kadmin import set_subscription
from tests.procs import GatewayProcess, wait_for

pytestmark = pytest.mark.integration

CONSUMER = {"metrics": "org.apache.kafka.consumer.", "interval.ms": "10000"}
EXPIRED = "investigate.bob.20200101T000000Z.deadbeef"
LATER = "investigate.dave.20251231T235959Z.0badc0de"
#: Never touched: another subscription, a watch that has not expired, and names that
#: look like watches but are not (a date that does not exist, upper-case hex).
KEPT = (
    "baseline",
    "investigate.carol.20991231T235959Z.cafef00d",
    "investigate.eve.20201301T000000Z.deadbeef",
    "investigate.eve.20200101T000000Z.DEADBEEF",
)


def subscription_names(bootstrap: str) -> list[str]:
    async def names() -> list[str]:
        host, port = bootstrap.rsplit(":", 1)
        async with AsyncAdmin(AdminConfig(((host, int(port)),))) as admin:
            return sorted(await admin.list_client_metrics_resources())

    return asyncio.run(names())


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path / "data", "[gateway]\nexpiry_check_ms = 200\n").start()
    yield gw
    assert gw.stop() == 0


def reaped(gw: GatewayProcess) -> list[dict[str, object]]:
    return [e for e in gw.events("subscription_changed") if e["principal"] == REAPER_PRINCIPAL]


def test_an_expired_watch_is_deleted_by_the_gateway_alone(gateway: GatewayProcess) -> None:
    for name in (*KEPT, EXPIRED):
        set_subscription(gateway.bootstrap, name, CONSUMER)
    wait_for(lambda: reaped(gateway), 60, what="the gateway to reap the expired watch")
    (event,) = reaped(gateway)
    assert event["subscription"] == EXPIRED
    assert (event["before"], event["after"]) == (CONSUMER, {})
    assert (event["source"], event["level"]) == ("node.id=0", "info")
    assert event["expired_at_ms"] == 1577836800000  # 2020-01-01T00:00:00Z
    assert subscription_names(gateway.bootstrap) == sorted(KEPT)
    # A second one, made after many housekeeping turns: reaped too, and still
    # nothing else (the other names had all those turns to be touched).
    set_subscription(gateway.bootstrap, LATER, CONSUMER)
    wait_for(lambda: len(reaped(gateway)) == 2, 60, what="the second expired watch reaped")
    assert [e["subscription"] for e in reaped(gateway)] == [EXPIRED, LATER]
    assert subscription_names(gateway.bootstrap) == sorted(KEPT)
    assert not gateway.events("watch_reap_failed")


async def test_a_second_deletion_finds_the_watch_gone(tmp_path: Path) -> None:
    """Two gateways on one store, both knowing the watch: the second's deletion is
    decided inside the store's atomic update (not on its view, which may lag), finds
    nothing and writes nothing."""
    views = [
        Subscriptions(
            SqliteSubscriptionStore(tmp_path / "subscriptions.db"),
            ClientMetricsManager(TelemetryConfig(), rng=random.Random(0)),
        )
        for _ in range(2)
    ]
    await views[0].start()
    try:
        await views[0].update(EXPIRED, lambda _stored: CONSUMER)
        await views[1].start()
        assert [w.name for w in views[1].expired_watches(now_ms=1577836800000)] == [EXPIRED]
        assert views[1].expired_watches(now_ms=1577836800000 - 1) == []
        assert await views[0].delete_if_present(EXPIRED) == CONSUMER
        assert await views[1].delete_if_present(EXPIRED) is None
        assert await views[0].delete_if_present(EXPIRED) is None
    finally:
        for view in views:
            await view.close()
