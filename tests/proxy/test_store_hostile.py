"""Hostile records written straight to the subscription topic, against gateways in front of Tansu.

A poison record (200 KB of nesting) and a flood of 3,000 subscriptions (three
times the cap) must leave both gateways answering, following and restartable;
with a shared key, records that did not come from a gateway change nothing.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from clientmetrics.exporters.memory import InMemoryExporter
from clientmetrics.gateway.config import Address, GatewayConfig, Listener
from clientmetrics.gateway.server import Gateway
from clientmetrics.store.topic import TopicSubscriptionStore
from tests.hostile_store import DEEP, POISON, GetProbe, flood, produce
from tests.kadmin import describe_subscription, set_subscription
from tests.procs import TansuProcess, metric_value, wait_for
from tests.proxy.conftest import FAST_LANDING, TANSU_FETCH_WAIT_MS, TANSU_NODE, ProxyGateway
from tests.topic_reader import read_topic

pytestmark = pytest.mark.integration

TOPIC = "__client_metrics_subscriptions"


def refused(gw: ProxyGateway, reason: str) -> float:
    return gw.metric(f'subscription_records_refused_total{{reason="{reason}"}}')


def metrics_of(gw: ProxyGateway, name: str) -> str:
    return str(describe_subscription(gw.bootstrap, name))


def test_poison_and_a_flood_leave_both_gateways_answering_and_restartable(
    tansu: TansuProcess, proxy_factory: Callable[..., ProxyGateway]
) -> None:
    first = proxy_factory(tansu.bootstrap, "first")
    second = proxy_factory(tansu.bootstrap, "second")
    set_subscription(first.bootstrap, "good", {"metrics": "org.apache.kafka.a."})
    wait_for(lambda: "kafka.a." in metrics_of(second, "good"), 10, what="good on second")

    produce(tansu.bootstrap, TOPIC, [(b"poison", POISON, ()), (b"deep", DEEP, ())])
    wait_for(lambda: refused(second, "too_deep") == 1, 20, what="the poison to be refused")
    assert refused(second, "too_large") == 1
    # The follower survived it: a later change still reaches the other gateway.
    set_subscription(first.bootstrap, "good", {"metrics": "org.apache.kafka.b."})
    wait_for(lambda: "kafka.b." in metrics_of(second, "good"), 10, what="a change after poison")

    # 3,000 subscriptions for a cap of 1,000: "good" and the first 999 are in force,
    # on both gateways alike; Gets are answered while they are read.
    with GetProbe(second.port) as probe:
        produce(tansu.bootstrap, TOPIC, flood(3000))
        for gw in (first, second):
            wait_for(lambda gw=gw: refused(gw, "over_cap") == 2001, 120, what="flood read")
    assert not probe.errors, probe.errors[:3]
    assert probe.latencies
    print(f"Gets during the flood: {len(probe.latencies)}, max {max(probe.latencies):.3f} s")
    for gw in (first, second):
        assert "m998." in metrics_of(gw, "flood-00998")
        assert "m999." not in metrics_of(gw, "flood-00999"), "over the cap: not in force"

    # The cap holds for alters too; changing an existing subscription does not need room.
    answer = set_subscription(first.bootstrap, "new", {"metrics": "x."})
    assert "PolicyViolation" in str(answer), answer
    set_subscription(first.bootstrap, "good", {"metrics": "org.apache.kafka.c."})
    wait_for(lambda: "kafka.c." in metrics_of(second, "good"), 10, what="a change after flood")

    assert second.stop() == 0
    second.start()  # with the poison and the flood on the topic
    assert "kafka.c." in metrics_of(second, "good")
    assert refused(second, "too_deep") == 1
    assert refused(second, "too_large") == 1
    assert refused(second, "over_cap") == 2001
    assert second.metric("subscription_follower_up") == 1.0
    assert not first.tracebacks()
    assert not second.tracebacks()


def _signed_gateway(tmp: Path, upstream: str, key_file: Path, name: str) -> ProxyGateway:
    from peers.free_ports import free_port_block

    base = free_port_block(TANSU_NODE + 1)
    config = FAST_LANDING.replace(
        "[gateway]\n", f"[gateway]\nsubscriptions_key_file = '{key_file}'\n"
    )
    gw = ProxyGateway(
        tmp / name,
        config,
        extra_args=("--upstream", upstream, "--broker-port-base", str(base)),
    )
    gw.broker_port_base = base
    return gw.start()  # type: ignore[return-value]


def test_records_that_did_not_come_from_a_gateway_change_nothing(
    tansu: TansuProcess, tmp_path: Path
) -> None:
    key_file = tmp_path / "subscriptions.key"
    key_file.write_text(os.urandom(32).hex() + "\n")
    key_file.chmod(0o600)
    gw = _signed_gateway(tmp_path, tansu.bootstrap, key_file, "signed")
    try:
        assert gw.metric("subscription_records_signed") == 1.0
        assert not gw.events("subscription_records_unsigned")
        set_subscription(gw.bootstrap, "fleet", {"metrics": "org.apache.kafka.a."})
        set_subscription(gw.bootstrap, "fleet", {"metrics": "org.apache.kafka.b."})
        first, second = [r for r in read_topic(tansu.bootstrap, TOPIC) if r.key() == b"fleet"]

        attack = b'{"configs": {"metrics": "*", "interval.ms": "100"}}'
        produce(
            tansu.bootstrap,
            TOPIC,
            [
                (b"fleet", attack, ()),  # unsigned: the attack
                (b"fleet", attack, [("clientmetrics.signature", b"0" * 64)]),  # forged
                (b"other", second.value(), second.headers()),  # signed, moved to another name
                (b"fleet", None, ()),  # an unsigned tombstone
                (b"fleet", first.value(), first.headers()),  # an old signed record, replayed
            ],
        )
        wait_for(lambda: refused(gw, "unsigned") == 2, 20, what="the unsigned records refused")
        assert refused(gw, "bad_signature") == 2
        audit = [
            e for e in gw.events("subscription_change_refused") if e.get("api") == "store record"
        ]
        assert {(e["subscription"], e["error"]) for e in audit} == {
            ("fleet", "unsigned"), ("fleet", "bad_signature"), ("other", "bad_signature")
        }  # fmt: skip
        # The replay is no refusal (its base is stale, as a lost race's) and changes nothing.
        assert "kafka.b." in metrics_of(gw, "fleet")
        assert "kafka." not in metrics_of(gw, "other")

        assert gw.stop() == 0
        gw.start()
        assert "kafka.b." in metrics_of(gw, "fleet")
        assert "kafka." not in metrics_of(gw, "other")
        assert refused(gw, "unsigned") == 2
        assert refused(gw, "bad_signature") == 2
    finally:
        assert gw.stop() == 0


class FaultyConsumer:
    """The store's consumer, with reading (``poll``) failing while ``failing`` is set."""

    def __init__(self, real: object) -> None:
        self.real = real
        self.failing = True

    def poll(self, *args: object) -> object:
        if self.failing:
            raise OSError("injected fault")
        return self.real.poll(*args)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)


async def _http_get(port: int | None, path: str) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    response = await reader.read()
    writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


async def _until(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def test_a_follower_that_dies_is_restarted_and_readyz_says_so(
    tansu: TansuProcess, tmp_path: Path
) -> None:
    topic = f"subs-{uuid.uuid4().hex[:6]}"
    store = TopicSubscriptionStore(tansu.bootstrap, topic, fetch_wait_ms=TANSU_FETCH_WAIT_MS)
    config = GatewayConfig(
        data_dir=tmp_path,
        listeners=(Listener.parse("127.0.0.1:0"),),
        admin_listen=Address("127.0.0.1", 0),
    )
    gw = Gateway(config, store=store, exporters=[InMemoryExporter()])
    writer = TopicSubscriptionStore(tansu.bootstrap, topic, fetch_wait_ms=TANSU_FETCH_WAIT_MS)
    await gw.start()
    await writer.start(lambda n, c: None)
    try:
        port = gw.metrics_port
        assert await _http_get(port, "/readyz") == (200, b"ready\n")
        faulty = FaultyConsumer(store._consumer)
        store._consumer = faulty  # type: ignore[assignment]

        async def down() -> bool:
            status, body = await _http_get(port, "/readyz")
            return status == 503 and b"follower down (OSError: injected fault)" in body

        await _until(down, 30, "/readyz to say the follower is down")
        _, metrics = await _http_get(port, "/metrics")
        assert b"kafka_server_client_metrics_subscription_follower_up 0.0" in metrics
        await writer.put("while-down", {"metrics": "org.apache.kafka."})
        faulty.failing = False

        async def back() -> bool:
            return (await _http_get(port, "/readyz"))[0] == 200

        await _until(back, 60, "the follower to be started again")
        await _until(
            lambda: _true(lambda: "while-down" in gw.manager.subscriptions), 30,
            "the change made while it was down",
        )  # fmt: skip
        _, metrics = await _http_get(port, "/metrics")
        restarts = metric_value(metrics.decode(), "subscription_follower_restarts_total")
        assert restarts >= 1
    finally:
        await writer.close()
        await gw.close()


async def _true(check: Callable[[], bool]) -> bool:
    return check()
