"""Two gateways in front of one Tansu share subscriptions through the topic store."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from clientmetrics.gateway.housekeeping import REAPER_PRINCIPAL
from tests.gateway.test_watch_reaper import subscription_names
from tests.kadmin import describe_subscription, set_subscription
from tests.landed import landed_rows, metric_names
from tests.procs import TansuProcess, wait_for
from tests.proxy.conftest import ProxyGateway

pytestmark = pytest.mark.integration


def _latest_names(gw: ProxyGateway, client_id: str, since: float) -> set[str]:
    """Metric names in the client's latest non-empty push received after ``since``."""
    rows = [
        r
        for r in landed_rows(gw.data_dir)
        if r["client_id"] == client_id and r["payload"] and r["received_at"].timestamp() > since  # type: ignore[attr-defined]
    ]
    if not rows:
        return set()
    latest = max(rows, key=lambda r: r["received_at"])  # type: ignore[arg-type,return-value]
    return metric_names(bytes(latest["payload"]))  # type: ignore[arg-type]


def test_alter_through_one_gateway_changes_pushes_to_another(
    tansu: TansuProcess, proxy_factory: Callable[..., ProxyGateway]
) -> None:
    first = proxy_factory(tansu.bootstrap, "first")
    second = proxy_factory(tansu.bootstrap, "second")
    set_subscription(
        first.bootstrap,
        "shared",
        {"metrics": "org.apache.kafka.producer.node.", "interval.ms": "1000"},
    )
    # Seen by the second gateway's config RPCs without any call to it beforehand.
    wait_for(
        lambda: (
            "org.apache.kafka.producer.node."
            in str(describe_subscription(second.bootstrap, "shared"))
        ),
        5,
        what="the subscription to reach the second gateway",
    )
    producer = Producer(
        {"bootstrap.servers": second.bootstrap, "client.id": "shared-prod", "log_level": 3}
    )
    try:

        def pushed(prefix: str, since: float) -> Callable[[], bool]:
            def check() -> bool:
                producer.poll(0.1)
                names = _latest_names(second, "shared-prod", since)
                return bool(names) and all(n.startswith(prefix) for n in names)

            return check

        wait_for(pushed("org.apache.kafka.producer.node.", 0), 40, interval=0, what="first set")
        changed_at = time.time()
        set_subscription(
            first.bootstrap, "shared", {"metrics": "org.apache.kafka.producer.record."}
        )
        wait_for(
            pushed("org.apache.kafka.producer.record.", changed_at),
            40,
            interval=0,
            what="the second gateway's client to push the set altered through the first",
        )
    finally:
        producer.flush(1)
    assert not landed_rows(first.data_dir), "the client pushed only to its own gateway"


def test_gateways_sharing_a_store_reap_each_expired_watch_once(
    tansu: TansuProcess, proxy_factory: Callable[..., ProxyGateway]
) -> None:
    """Both gateways reap; the store's compare-and-set lets one delete each watch, and
    the other finds it gone (no second deletion, no error)."""
    gateways = [proxy_factory(tansu.bootstrap, "first"), proxy_factory(tansu.bootstrap, "second")]
    expired = [f"investigate.op.20200101T00000{i}Z.0000000{i}" for i in range(5)]
    for name in ["baseline", *expired]:
        set_subscription(gateways[0].bootstrap, name, {"metrics": "org.apache.kafka."})
    for gw in gateways:
        wait_for(
            lambda gw=gw: subscription_names(gw.bootstrap) == ["baseline"],  # type: ignore[misc]
            60,
            what="every expired watch gone from both gateways",
        )
    for gw in gateways:
        gw.stop()
    reaped = [
        e["subscription"]
        for gw in gateways
        for e in gw.events("subscription_changed")
        if e["principal"] == REAPER_PRINCIPAL
    ]
    assert sorted(reaped) == expired
    assert not [e for gw in gateways for e in gw.events("watch_reap_failed")]
