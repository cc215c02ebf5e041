"""Proxy mode in front of Apache Kafka 4.4 (PLAINTEXT), with librdkafka clients.

One broker for the module, carrying the launcher's telemetry plugin with a record
file, so the broker's own receiver can be told apart from the gateway's. Through
the gateway: an idempotent producer, a transactional one (a commit and an abort),
consumer groups on the classic and the KIP-848 protocol reading committed records
only, and an admin client. librdkafka's own statistics list every broker
connection it made: all of them must be gateway ports. Telemetry lands at the
gateway and never reaches the broker's plugin, unless the gateway is told
``[proxy] telemetry = "cluster"``: then the cluster's own subscription and plugin
take it. First, with no client at all, the broker's own request counts (JMX) show
what an idle proxy costs the cluster: its subscription topic followed by one long poll.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from peers.free_ports import free_port_block
from peers.kafka import KafkaBroker, PeerUnavailable, minimal_plugin

from tests.admin.tool import run_tool
from tests.kadmin import set_subscription
from tests.kafka import kafka_broker
from tests.landed import rows_of
from tests.procs import MIN_DEADLINE_S, GatewayProcess, wait_for
from tests.proxy.conftest import FAST_LANDING

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

NODE = 1  # the launcher's node.id
PARTITIONS = 3
IDEMPOTENT, COMMITTED, ABORTED = 300, 40, 25
#: Every request the broker received, by API and version (Kafka's request metrics).
REQUESTS = "kafka.network:type=RequestMetrics,name=RequestsPerSec,*"
#: Not counted: what the broker's own controller side receives (a combined KRaft node
#: heartbeats to itself), and Kafka's second count of each Fetch by who sent it.
NOT_COUNTED = frozenset(
    {"BrokerHeartbeat", "BrokerRegistration", "ControllerRegistration", "AssignReplicasToDirs"}
    | {"FetchConsumer", "FetchFollower"}
)
IDLE_WINDOW_S = 30.0


@pytest.fixture(scope="module")
def plugin_record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("plugin") / "pushes.jsonl"


@pytest.fixture(scope="module")
def kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, plugin_record: Path
) -> Iterator[KafkaBroker]:
    try:
        plugin = minimal_plugin(plugin_record)
    except PeerUnavailable as exc:
        pytest.skip(f"Apache Kafka 4.4 is not available here: {exc}")
    yield from kafka_broker(request, tmp_path_factory, plugins=[plugin], jmx=True)


class KafkaProxy(GatewayProcess):
    broker_port: int = 0


def start_gateway(kafka: KafkaBroker, data_dir: Path, config: str = "") -> KafkaProxy:
    base = free_port_block(NODE + 1)
    gw = KafkaProxy(
        data_dir,
        FAST_LANDING + config,
        extra_args=("--upstream", kafka.bootstrap, "--broker-port-base", str(base)),
    )
    gw.broker_port = base + NODE
    gw.start()
    return gw


@pytest.fixture(scope="module")
def gateway(kafka: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaProxy]:
    gw = start_gateway(kafka, tmp_path_factory.mktemp("gw"))
    try:
        yield gw
    finally:
        code = gw.stop()
    assert code == 0
    assert gw.tracebacks() == []


class Stats:
    """The broker connections librdkafka reports (``statistics.interval.ms``)."""

    def __init__(self) -> None:
        self.endpoints: set[str] = set()

    def __call__(self, text: str) -> None:
        for broker in json.loads(text).get("brokers", {}).values():
            if broker["nodename"]:  # empty for a coordinator not yet known
                self.endpoints.add(str(broker["nodename"]))


def list_subscriptions(gw: GatewayProcess) -> list[str]:
    result = run_tool("--bootstrap-server", gw.bootstrap, "--list")
    assert result.code == 0, result.out
    return sorted(result.out.split())


def client(gw: KafkaProxy, stats: Stats, client_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": gw.bootstrap,
        "client.id": client_id,
        "statistics.interval.ms": 200,
        "stats_cb": stats,
        "log_level": 0,
        **extra,
    }


def landed(gw: GatewayProcess, client_id: str, pump: Producer | Consumer) -> None:
    """Wait until ``client_id``'s telemetry landed at ``gw`` (``pump`` keeps it pushing)."""

    def found() -> bool:
        pump.poll(0.1)
        return bool(rows_of(gw.data_dir, client_id))

    wait_for(found, 30, interval=0, what=f"telemetry of {client_id}")


def consume(consumer: Consumer, topic: str, count: int) -> list[bytes]:
    consumer.subscribe([topic])
    values: list[bytes] = []

    def got_all() -> bool:
        for message in consumer.consume(500, 0.2):
            if message.error() is None:
                values.append(message.value() or b"")
        return len(values) >= count

    wait_for(got_all, 90, interval=0, what=f"{count} records")
    return values


def client_requests(kafka: KafkaBroker) -> dict[str, float]:
    """Requests the broker received from clients so far, by API name."""
    out: dict[str, float] = {}
    for name, count in kafka.jmx_counts(REQUESTS).items():
        api = dict(part.split("=", 1) for part in name.split(":", 1)[1].split(","))["request"]
        if api not in NOT_COUNTED:
            out[api] = out.get(api, 0) + count
    return out


def quiet_for(kafka: KafkaBroker, seconds: float) -> Callable[[], bool]:
    """A check that is true once no request but Fetch reached the cluster for ``seconds``."""
    last: dict[str, float] = {}
    since = time.monotonic()

    def quiet() -> bool:
        nonlocal last, since
        time.sleep(0.5)
        now = {api: n for api, n in client_requests(kafka).items() if api != "Fetch"}
        if now != last:
            last, since = now, time.monotonic()
        return time.monotonic() - since >= seconds

    return quiet


def test_an_idle_proxy_sends_the_cluster_a_few_requests_a_minute(
    kafka: KafkaBroker, tmp_path: Path
) -> None:
    """Defaults (the subscription topic followed by a 30 s long poll), no client: the
    cluster's own request counts over a window. Runs first: nothing else talks to it."""
    gw = KafkaProxy(
        tmp_path / "idle",
        "",
        extra_args=("--upstream", kafka.bootstrap, "--broker-port-base", str(free_port_block(2))),
    )
    gw.start()
    try:
        # The store's start-up (create, catch up, assign) is not idleness: the window
        # opens once the cluster has seen nothing but the long-polling Fetch for 3 s
        # (on a busy machine the start-up takes longer than any fixed wait).
        wait_for(quiet_for(kafka, 3.0), 90, interval=0, what="the proxy's start-up to end")
        before, started = client_requests(kafka), time.monotonic()
        time.sleep(IDLE_WINDOW_S)
        after, window = client_requests(kafka), time.monotonic() - started
    finally:
        assert gw.stop() == 0
    assert gw.tracebacks() == []
    sent = {
        api: after[api] - before.get(api, 0) for api in after if after[api] > before.get(api, 0)
    }
    per_minute = sum(sent.values()) * 60 / window
    print(f"idle proxy: {sum(sent.values()):.0f} requests in {window:.1f} s {sent}")
    print(f"idle proxy: {per_minute:.1f} requests a minute to the cluster")
    # One long-polling Fetch per 30 s. In its first minute librdkafka's consumer also
    # asks for its group coordinator again (FindCoordinator, a connection's ApiVersions);
    # after that only the Fetch (2 a minute, seen over four more windows), and a Metadata
    # refresh every 5 min. The old follower's ListOffsets polling sent ~20 a second.
    assert set(sent) <= {"Fetch", "Metadata", "FindCoordinator", "ApiVersions"}, sent
    assert sent.get("Fetch", 0) <= 2, sent
    assert sum(sent.values()) <= 4, sent


def test_librdkafka_through_the_proxy_never_learns_the_brokers_address(
    kafka: KafkaBroker, gateway: KafkaProxy, plugin_record: Path
) -> None:
    set_subscription(
        gateway.bootstrap, "all", {"metrics": "org.apache.kafka.", "interval.ms": "500"}
    )
    stats = Stats()
    topic = f"px-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(client(gateway, stats, "k-admin"))
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(MIN_DEADLINE_S)
    metadata = admin.list_topics(topic, timeout=MIN_DEADLINE_S)
    assert {(str(b.host), b.port) for b in metadata.brokers.values()} == {
        ("127.0.0.1", gateway.broker_port)
    }
    assert len(metadata.topics[topic].partitions) == PARTITIONS
    described = admin.describe_cluster().result(MIN_DEADLINE_S)
    assert [(n.id, n.host, n.port) for n in described.nodes] == [
        (NODE, "127.0.0.1", gateway.broker_port)
    ]

    idempotent = Producer(client(gateway, stats, "k-idem", **{"enable.idempotence": True}))
    for i in range(IDEMPOTENT):
        idempotent.produce(topic, key=str(i).encode(), value=f"idem-{i}".encode())
    assert idempotent.flush(30) == 0

    tx = Producer(client(gateway, stats, "k-tx", **{"transactional.id": f"tx-{topic}"}))
    tx.init_transactions(30)
    tx.begin_transaction()
    for i in range(COMMITTED):
        tx.produce(topic, key=str(i).encode(), value=f"committed-{i}".encode())
    tx.commit_transaction(30)
    tx.begin_transaction()
    for i in range(ABORTED):
        tx.produce(topic, key=str(i).encode(), value=f"aborted-{i}".encode())
    tx.flush(30)
    tx.abort_transaction(30)

    expected = {f"idem-{i}".encode() for i in range(IDEMPOTENT)}
    expected |= {f"committed-{i}".encode() for i in range(COMMITTED)}
    for protocol in ("classic", "consumer"):  # KIP-848's protocol is "consumer"
        settings: dict[str, Any] = {
            "group.id": f"g-{protocol}-{topic}",
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
        if protocol == "classic":
            settings["session.timeout.ms"] = 6000
        consumer = Consumer(client(gateway, stats, f"k-{protocol}", **settings))
        try:
            values = consume(consumer, topic, len(expected))
            assert set(values) == expected, protocol
            assert len(values) == len(expected), "each record once"
            consumer.commit(asynchronous=False)
            committed = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)])
            assert sum(tp.offset for tp in committed) >= len(expected), protocol
            landed(gateway, f"k-{protocol}", consumer)  # the proxy answers 71/72 itself
        finally:
            consumer.close()

    landed(gateway, "k-idem", idempotent)
    landed(gateway, "k-tx", tx)
    for name in ("k-idem", "k-tx", "k-classic", "k-consumer"):
        rows = rows_of(gateway.data_dir, name)  # what confluent-kafka sends in ApiVersions
        assert {r["client_software_name"] for r in rows} == {"confluent-kafka-python"}
    # Every connection each client made (bootstrap, broker, group and transaction
    # coordinators) went to the gateway: the broker's own port never reached a client.
    ports = {int(endpoint.rsplit(":", 1)[1]) for endpoint in stats.endpoints}
    assert gateway.broker_port in ports, stats.endpoints
    assert ports <= {gateway.port, gateway.broker_port}, stats.endpoints
    assert kafka.port not in ports
    assert not plugin_record.exists() or plugin_record.read_text() == ""


def test_telemetry_cluster_mode_hands_pushes_to_the_brokers_own_plugin(
    kafka: KafkaBroker, gateway: KafkaProxy, plugin_record: Path, tmp_path: Path
) -> None:
    cluster_mode = start_gateway(kafka, tmp_path / "gw", '[proxy]\ntelemetry = "cluster"\n')
    try:
        # Through this gateway the subscription goes to the cluster (Kafka validates it).
        set_subscription(
            cluster_mode.bootstrap,
            "cluster-all",
            {"metrics": "org.apache.kafka.", "interval.ms": "1000"},
        )
        stats = Stats()
        producer = Producer(client(cluster_mode, stats, "k-cluster"))
        producer.produce(f"px-cluster-{uuid.uuid4().hex[:6]}", value=b"v")
        assert producer.flush(30) == 0

        def recorded() -> list[dict[str, Any]]:
            text = plugin_record.read_text() if plugin_record.exists() else ""
            lines = [json.loads(line) for line in text.splitlines()]
            return [line for line in lines if line["client_id"] == "k-cluster"]

        def pushed() -> bool:
            producer.poll(0.1)
            return bool(recorded())

        wait_for(pushed, 30, interval=0, what="the broker plugin's record of a push")
        assert {line["principal"] for line in recorded()} == {"User:ANONYMOUS"}
        assert rows_of(cluster_mode.data_dir, "k-cluster") == []
        # Each gateway lists the subscriptions in force for it: the cluster's, or its own.
        assert list_subscriptions(cluster_mode) == ["cluster-all"]
        assert list_subscriptions(gateway) == ["all"]
    finally:
        assert cluster_mode.stop() == 0
    assert cluster_mode.tracebacks() == []
