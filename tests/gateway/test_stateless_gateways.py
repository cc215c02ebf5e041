"""Gateways with no local state in front of Apache Kafka 4.4 (one broker for the module).

Two standalone gateways, no landing zone: subscriptions live in the cluster's
topic store and every push is answered only once the cluster acknowledged its
record (the required topic exporter). The tests run in file order: a change
through either gateway reaches both gateways' clients; idle gateways send the
cluster a few requests a minute (counted by the broker's own request log, before
any gateway stops: a stopped client's held fetch is logged when it expires); a
gateway SIGKILLed under load leaves every acknowledged push on the topic, once; two
stores writing one subscription at once lose no update (compare-and-set on the log); a
hung cluster gets clients a retriable answer, with the waiting pushes bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from peers.kafka import KafkaBroker

from clientmetrics.reporter.protocol import get_request, push_request
from clientmetrics.reporter.sim_net import open_connection
from clientmetrics.store.topic import TopicSubscriptionStore
from clientmetrics.wire import ErrorCode
from tests.kadmin import describe_subscription, set_subscription
from tests.kafka import kafka_broker
from tests.procs import MIN_DEADLINE_S, GatewayProcess, wait_for
from tests.pushers import METRIC, Outcomes, payload, run_client
from tests.topic_reader import read_topic

pytestmark = [pytest.mark.kafka, pytest.mark.integration]

TOPIC = "pushes"
NODE = "org.apache.kafka.producer.node."
RECORD = "org.apache.kafka.producer.record."
#: How long the idle gateways are watched: past the topic store's fetch wait (30 s),
#: so that each gateway's held fetch is answered (and logged) in it.
IDLE_WINDOW_S = 31.0


def gateway_toml(bootstrap: str, *, queue_size: int = 1000, timeout_ms: int = 3000) -> str:
    return f"""
[gateway]
subscriptions_bootstrap_servers = "{bootstrap}"

[exporters.landing]
enabled = false

[exporters.topic]
bootstrap_servers = "{bootstrap}"
required = true
topic = "{TOPIC}"
partitions = 2
queue_size = {queue_size}
delivery_timeout_ms = {timeout_ms}
"""


@pytest.fixture(scope="module")
def kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KafkaBroker]:
    yield from kafka_broker(request, tmp_path_factory)


@pytest.fixture(scope="module")
def gateways(
    kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[GatewayProcess]]:
    root = tmp_path_factory.mktemp("gateways")
    started = [GatewayProcess(root / name, gateway_toml(kafka.bootstrap)) for name in "ab"]
    try:
        for gw in started:
            gw.start()
        yield started
    finally:
        codes = [gw.stop() for gw in started]
    assert codes == [0, 0]
    assert not [gw.tracebacks() for gw in started if gw.tracebacks()]


def names_in(message: Any) -> set[str]:
    request = ExportMetricsServiceRequest.FromString(message.value())
    return {
        m.name for rm in request.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
    }


def header(message: Any, name: str) -> str:
    return str(dict(message.headers())[name].decode())


def test_a_change_through_either_gateway_reaches_the_clients_of_both(
    kafka: KafkaBroker, gateways: list[GatewayProcess]
) -> None:
    a, b = gateways
    set_subscription(a.bootstrap, "shared", {"metrics": NODE, "interval.ms": "1000"})
    wait_for(
        lambda: NODE in str(describe_subscription(b.bootstrap, "shared")),
        10,
        what="the subscription set through a to be described by b",
    )
    producers = {
        f"shared-{name}": Producer(
            {"bootstrap.servers": gw.bootstrap, "client.id": f"shared-{name}", "log_level": 3}
        )
        for name, gw in (("a", a), ("b", b))
    }

    latest: dict[str, set[str]] = {}

    def latest_names_start_with(prefix: str, after: int) -> Callable[[], bool]:
        def check() -> bool:
            for producer in producers.values():
                producer.poll(0.05)
            latest.clear()
            for message in read_topic(kafka.bootstrap, TOPIC)[after:]:
                names = names_in(message)
                if names:
                    latest[header(message, "client_id")] = names
            return set(latest) >= set(producers) and all(
                all(n.startswith(prefix) for n in latest[c]) for c in producers
            )

        return check

    try:
        wait_for(latest_names_start_with(NODE, 0), 40, interval=0.5, what="node metrics")
        before = len(read_topic(kafka.bootstrap, TOPIC))
        set_subscription(b.bootstrap, "shared", {"metrics": RECORD})
        wait_for(
            latest_names_start_with(RECORD, before),
            40,
            interval=0.5,
            what="both gateways' clients to push what was altered through b",
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the clients' latest pushes: {latest}") from None
    finally:
        for producer in producers.values():
            producer.flush(1)
        producers.clear()  # destroyed now, even when a failure keeps this frame
    assert RECORD in str(describe_subscription(a.bootstrap, "shared"))


@dataclass(frozen=True)
class Logged:
    """One request as the broker's request log shows it (logged when answered)."""

    client_id: str
    api: str
    held_ms: float


def requests_logged(log_text: str) -> list[Logged]:
    """The requests in ``log_text``, the controller listener's aside."""
    out = []
    for line in log_text.splitlines():
        _, found, rest = line.partition("Completed request:")
        if not found:
            continue
        entry = json.loads(rest.rsplit(" (kafka.request.logger)", 1)[0])
        if entry.get("listener") == "CONTROLLER":
            continue
        head = entry["requestHeader"]
        out.append(Logged(head["clientId"], head["requestApiKeyName"], entry["totalTimeMs"]))
    return out


def test_idle_gateways_send_the_cluster_a_few_requests_a_minute(
    kafka: KafkaBroker, gateways: list[GatewayProcess]
) -> None:
    kafka.tool(
        "configs",
        *("--bootstrap-server", kafka.bootstrap, "--entity-type", "broker-loggers"),
        *("--entity-name", "1", "--alter", "--add-config", "kafka.request.logger=DEBUG"),
        check=True,
    )
    start, opened = kafka.log_path.stat().st_size, time.monotonic()
    time.sleep(IDLE_WINDOW_S)  # the window measured (requests in it), not a wait for an event

    def since_start() -> list[Any]:
        with kafka.log_path.open("rb") as log:
            log.seek(start)
            return requests_logged(log.read().decode(errors="replace"))

    def ours_in(logged: list[Any]) -> list[Any]:
        return [r for r in logged if r.client_id.startswith("clientmetrics-")]

    # Each gateway's held fetch is answered in the window; a busy broker may log it late.
    wait_for(
        lambda: sum(r.api == "FETCH" for r in ours_in(since_start())) >= len(gateways),
        60,
        what="each gateway's held fetch in the broker's log",
    )
    window = time.monotonic() - opened
    logged = since_start()
    ours = ours_in(logged)
    per_minute = len(ours) * 60 / window / len(gateways)
    print(
        f"in {window:.1f} s, {len(gateways)} idle gateways sent "
        f"{dict(Counter((r.client_id, r.api) for r in ours))}, held "
        f"{[round(r.held_ms / 1000, 1) for r in ours]} s: {per_minute:.1f} requests a minute "
        f"per gateway (others: {Counter(r.client_id for r in logged if r not in ours)})"
    )
    assert per_minute <= 9
    # The subscription topic is followed by a fetch the broker holds, not by polling.
    fetches = [r for r in ours if r.api == "FETCH"]
    assert len(fetches) >= len(gateways)
    assert min(r.held_ms for r in fetches) > 25_000


def pushes_on_topic(records: list[Any]) -> Counter[tuple[uuid.UUID, int]]:
    """(instance id, push number) of every pushers' record on the topic, counted."""
    found: Counter[tuple[uuid.UUID, int]] = Counter()
    for message in records:
        if not header(message, "client_id").startswith("load-"):
            continue
        instance = uuid.UUID(message.key().decode())
        request = ExportMetricsServiceRequest.FromString(message.value())
        for rm in request.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == METRIC:
                        for point in metric.gauge.data_points:
                            found[instance, int(point.as_double or point.as_int)] += 1
    return found


async def test_a_gateway_killed_under_load_loses_no_acknowledged_push(
    kafka: KafkaBroker, gateways: list[GatewayProcess]
) -> None:
    a, b = gateways
    subscription = {"metrics": "pushers.", "interval.ms": "100", "match": "client_id=load-.*"}
    await asyncio.to_thread(set_subscription, a.bootstrap, "load", subscription)
    addresses = [("127.0.0.1", a.port), ("127.0.0.1", b.port)]
    stop, outcomes = asyncio.Event(), Outcomes()
    clients = [
        asyncio.create_task(run_client(f"load-{i}", addresses, stop, outcomes, start_at=i))
        for i in range(40)
    ]
    try:
        # Counts reached, not seconds waited: a busy machine only makes them later.
        await until(lambda: len(outcomes.acked) > 100, "100 pushes acknowledged")
        acked_before_kill = len(outcomes.acked)
        a.kill()  # SIGKILL, mid-flight
        await until(
            lambda: (
                len(outcomes.acked) > acked_before_kill + 100 and outcomes.transport_failures >= 20
            ),
            "b to take over a's clients",
        )
    finally:
        stop.set()
        await asyncio.gather(*clients)
    on_topic = pushes_on_topic(await asyncio.to_thread(read_topic, kafka.bootstrap, TOPIC))
    unanswered = set(on_topic) - outcomes.acked
    print(
        f"acknowledged pushes: {len(outcomes.acked)} ({acked_before_kill} before the kill); "
        f"records on the topic: {sum(on_topic.values())}; on the topic but never answered: "
        f"{len(unanswered)}; other answers {dict(outcomes.errors)}; "
        f"connections lost or refused: {outcomes.transport_failures}"
    )
    assert acked_before_kill > 100
    assert len(outcomes.acked) > acked_before_kill + 100, "b took over a's clients"
    assert outcomes.transport_failures >= 20, "a's clients lost their gateway"
    assert not outcomes.acked - set(on_topic), "an acknowledged push is missing"
    assert max(on_topic.values()) == 1, "a push is on the topic twice"
    # A gateway with no local state comes back with the cluster's subscriptions.
    await asyncio.to_thread(a.start)
    described = await asyncio.to_thread(describe_subscription, a.bootstrap, "load")
    assert "client_id=load-.*" in str(described)


async def until(predicate: Callable[[], bool], what: str) -> None:
    """Let the clients run until ``predicate()``; fail after ``MIN_DEADLINE_S``."""
    deadline = time.monotonic() + MIN_DEADLINE_S
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


def scrape(gw: GatewayProcess) -> str:
    url = f"http://127.0.0.1:{gw.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=MIN_DEADLINE_S) as response:
        return str(response.read().decode())


async def test_concurrent_updates_from_two_gateways_all_land(kafka: KafkaBroker) -> None:
    """Compare-and-set on the log: no append is lost, whichever store wrote it.

    (On Apache Kafka: the stores trust the offsets of the produce answers, which a
    stand-in broker has been seen to get wrong under two producers at once.)"""
    topic = f"subs-{uuid.uuid4().hex[:6]}"
    stores = [TopicSubscriptionStore(kafka.bootstrap, topic, fetch_wait_ms=500) for _ in range(2)]
    for store in stores:
        await store.start(lambda n, c: None)

    def append(item: str) -> Callable[[dict[str, str]], dict[str, str]]:
        def change(stored: dict[str, str]) -> dict[str, str]:
            listed = [m for m in stored.get("metrics", "").split(",") if m]
            return {**stored, "metrics": ",".join([*listed, item])}

        return change

    async def writer(store: TopicSubscriptionStore, who: int) -> None:
        for i in range(15):
            await store.update("shared", append(f"s{who}.m{i}"))

    try:
        await asyncio.gather(*(writer(store, who) for who, store in enumerate(stores)))
        expected = {f"s{w}.m{i}" for w in range(2) for i in range(15)}
        reopened = TopicSubscriptionStore(kafka.bootstrap, topic, fetch_wait_ms=500)
        state = await reopened.start(lambda n, c: None)
        await reopened.close()
        assert set(state["shared"]["metrics"].split(",")) == expected
    finally:
        for store in stores:
            await store.close()


async def test_a_hung_cluster_gets_clients_a_retriable_answer_and_bounds_the_wait(
    kafka: KafkaBroker, gateways: list[GatewayProcess], tmp_path: Path
) -> None:
    toml = gateway_toml(kafka.bootstrap, queue_size=2, timeout_ms=2000)
    gw = await asyncio.to_thread(GatewayProcess(tmp_path / "c", toml).start)
    conns = [await open_connection("127.0.0.1", gw.port, f"hung-{i}") for i in range(5)]
    instances = [uuid.uuid4() for _ in conns]
    assert kafka.proc is not None
    try:
        subscription_ids = []
        for conn, instance in zip(conns[:4], instances, strict=False):
            get = get_request(1, conn.next_correlation_id(), conn.client_id, instance)
            answer = await conn.call(*get)
            assert int(answer.error_code) == 0
            subscription_ids.append(int(answer.subscription_id))

        def push(i: int) -> asyncio.Future[Any]:
            conn = conns[i]
            request = push_request(
                1,
                conn.next_correlation_id(),
                conn.client_id,
                instances[i],
                subscription_id=subscription_ids[i],
                terminating=False,
                compression_type=0,
                metrics=payload(i),
            )
            return conn.call(*request)

        os.kill(kafka.proc.pid, signal.SIGSTOP)
        try:
            waiting = [push(0), push(1)]
            await asyncio.sleep(0.3)
            refused = [push(2), push(3)]
            codes = [int(r.error_code) for r in await asyncio.gather(*refused)]
            assert codes == [ErrorCode.THROTTLING_QUOTA_EXCEEDED] * 2, "past the bound: at once"
            # The two within the bound still wait for the cluster; the gateway answers others.
            get = get_request(1, conns[4].next_correlation_id(), conns[4].client_id, instances[4])

            assert int((await conns[4].call(*get)).error_code) == 0
            metrics = await asyncio.to_thread(scrape, gw)
            assert not any(f.done() for f in waiting)
            assert 'clientmetrics_exporter_queue_depth{exporter="topic"} 2.0' in metrics
            codes = [int(r.error_code) for r in await asyncio.gather(*waiting)]
            assert codes == [ErrorCode.THROTTLING_QUOTA_EXCEEDED] * 2, "after delivery_timeout_ms"
        finally:
            os.kill(kafka.proc.pid, signal.SIGCONT)
        metrics = await asyncio.to_thread(scrape, gw)
        assert 'clientmetrics_exporter_dropped_total{exporter="topic"} 2.0' in metrics
        assert 'clientmetrics_exporter_failed_total{exporter="topic"} 2.0' in metrics
        # The cluster is back: a push is acknowledged again (each try a new client, so
        # that the manager's push interval does not throttle it).
        deadline = time.monotonic() + MIN_DEADLINE_S
        while True:
            instances[0] = uuid.uuid4()
            get = get_request(1, conns[0].next_correlation_id(), conns[0].client_id, instances[0])
            subscription_ids[0] = int((await conns[0].call(*get)).subscription_id)
            code = int((await push(0)).error_code)
            if code == 0 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        assert code == 0
    finally:
        for conn in conns:
            conn.close()
        assert await asyncio.to_thread(gw.stop) == 0
