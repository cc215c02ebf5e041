"""Proxy mode in front of a secured Apache Kafka 4.4: SASL_SSL, mutual TLS, StandardAuthorizer.

One broker for the module: a SASL_SSL listener (SCRAM) that also requires a client
certificate, and ``StandardAuthorizer``. Every gateway link to it presents the
gateway's certificate (mutual TLS to the cluster). Two gateways:

* passthrough (no ``[sasl]``): clients log in to the cluster through the gateway;
  the cluster's authorizer decides who may change or read client-metrics
  subscriptions, and does so with each client's own identity; librdkafka and the
  Java client (an idempotent producer, a KIP-848 consumer) work through it as alice;
* terminate (``[sasl]``, ``[proxy] sasl = "terminate"``): the gateway checks its
  own users, and each client's upstream link logs in to the cluster as the
  gateway's own user, whose ACLs the cluster then applies.
"""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.index import load_request_schema
from peers.free_ports import free_port_block
from peers.kafka import KafkaBroker

from clientmetrics.admin import AdminConfig
from clientmetrics.admin.connection import BrokerConnection
from clientmetrics.client.properties import read_properties
from clientmetrics.wire import ZERO_UUID, ApiKey, request_type
from clientmetrics.wire.build import build
from tests.admin.tool import run_tool
from tests.kafka import broker_tls, kafka_broker
from tests.landed import rows_of
from tests.peers.clients import java
from tests.procs import BIN, MIN_DEADLINE_S, GatewayProcess, wait_for
from tests.proxy.answers import decode_any_response, error_codes
from tests.proxy.conftest import FAST_LANDING
from tests.tlsfiles import Pem, TestCA

pytestmark = [pytest.mark.integration, pytest.mark.kafka]

NODE = 1
USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret", "gw": "gw-secret"}
#: What our tool prints, as Kafka's does, when the cluster's authorizer refuses.
REFUSED = "Error while executing client metrics command : Cluster authorization failed.\n"


@dataclass
class Secured:
    kafka: KafkaBroker
    ca: TestCA
    server: Pem  # the gateways' certificate for their clients
    client: Pem  # the gateways' certificate towards the cluster


@pytest.fixture(scope="module")
def secured(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Secured]:
    ca = TestCA(tmp_path_factory.mktemp("pki"))
    server, client = ca.issue("gateway"), ca.issue("gateway-client", common_name="gateway")
    for kafka in kafka_broker(
        request,
        tmp_path_factory,
        listener="SASL_SSL",
        users=USERS,
        tls=broker_tls(ca),
        client_auth=True,
        authorizer=True,
    ):
        yield Secured(kafka, ca, server, client)


def gateway_config(s: Secured, upstream_user: str, extra: str = "") -> str:
    password = s.kafka.admin_password if upstream_user == "admin" else USERS[upstream_user]
    return (
        FAST_LANDING
        + f'[tls]\ncertificate = "{s.server.certificate}"\nprivate_key = "{s.server.private_key}"\n'
        + '[upstream]\nsecurity_protocol = "SASL_SSL"\n'
        + f'ca = "{s.ca.ca}"\ncertificate = "{s.client.certificate}"\n'
        + f'private_key = "{s.client.private_key}"\nsasl_mechanism = "SCRAM-SHA-512"\n'
        + f'sasl_username = "{upstream_user}"\nsasl_password = "{password}"\n'
        + extra
    )


def start_gateway(s: Secured, data_dir: Path, config: str, *args: str) -> GatewayProcess:
    base = free_port_block(NODE + 1)
    gw = GatewayProcess(
        data_dir,
        config,
        extra_args=("--upstream", s.kafka.bootstrap, "--broker-port-base", str(base), *args),
        listen_protocol="SASL_SSL",
    )
    return gw.start(timeout=60)


@pytest.fixture(scope="module")
def passthrough(
    secured: Secured, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    # The topic store logs in as the cluster's super user; clients log in as themselves.
    gw = start_gateway(
        secured, tmp_path_factory.mktemp("passthrough"), gateway_config(secured, "admin")
    )
    try:
        yield gw
    finally:
        code = gw.stop()
    assert code == 0
    assert gw.tracebacks() == []


def librdkafka(
    s: Secured, gw: GatewayProcess, user: str, password: str, **extra: Any
) -> dict[str, Any]:
    return {
        "bootstrap.servers": gw.bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(s.ca.ca),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
        "log_level": 0,
        **extra,
    }


def command_config(s: Secured, tmp_path: Path, user: str, password: str) -> Path:
    """One properties file for both our tool and Kafka's (SASL_SSL, SCRAM, the test CA)."""
    path = tmp_path / f"{user}.properties"
    path.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={s.ca.ca}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}";\n'
    )
    return path


def cm_tool(
    s: Secured, gw: GatewayProcess, tmp_path: Path, user: str, *args: str
) -> tuple[int, str]:
    props = command_config(s, tmp_path, user, USERS[user])
    result = run_tool(
        "--bootstrap-server",
        gw.bootstrap,
        "--command-config",
        str(props),
        "--timeout",
        "15000",
        *args,
    )
    return result.code, result.out


def grant(admin: AdminClient, *bindings: AclBinding) -> None:
    for future in admin.create_acls(list(bindings)).values():
        future.result(MIN_DEADLINE_S)


def acl(
    principal: str,
    resource: ResourceType,
    name: str,
    operation: AclOperation,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
) -> AclBinding:
    return AclBinding(resource, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


def test_passthrough_the_clusters_authorizer_decides_on_subscriptions(
    secured: Secured, passthrough: GatewayProcess, tmp_path: Path
) -> None:
    s, gw = secured, passthrough
    # The cluster's super user sets the ACLs, through the gateway (SCRAM and mutual TLS).
    admin = AdminClient(librdkafka(s, gw, "admin", s.kafka.admin_password))
    topic = f"px-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(MIN_DEADLINE_S)
    grant(
        admin,
        acl("User:bob", ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER_CONFIGS),
        acl("User:carol", ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE_CONFIGS),
        acl(
            "User:alice", ResourceType.TOPIC, "px-", AclOperation.ALL, ResourcePatternType.PREFIXED
        ),
        acl(
            "User:alice", ResourceType.GROUP, "px-", AclOperation.ALL, ResourcePatternType.PREFIXED
        ),
    )
    alter = ("--alter", "--name", "by-bob", "--metrics", "org.apache.kafka.", "--interval", "500")
    # alice may produce, not change subscriptions; nor read them.
    assert cm_tool(s, gw, tmp_path, "alice", *alter) == (1, REFUSED)
    assert cm_tool(s, gw, tmp_path, "alice", "--list") == (1, REFUSED)
    # carol may read them, not change them.
    assert cm_tool(s, gw, tmp_path, "carol", *alter) == (1, REFUSED)
    # bob may change them (ALTER_CONFIGS implies DESCRIBE_CONFIGS in Kafka).
    assert cm_tool(s, gw, tmp_path, "bob", *alter) == (
        0,
        "Altered client metrics config for by-bob.\n",
    )
    assert cm_tool(s, gw, tmp_path, "bob", "--list") == (0, "by-bob\n")
    assert cm_tool(s, gw, tmp_path, "carol", "--list") == (0, "by-bob\n")
    # Kafka's own tool (the Java admin client) as carol, through the gateway.
    described = s.kafka.tool(
        "client-metrics", "--bootstrap-server", gw.bootstrap,
        "--command-config", str(command_config(s, tmp_path, "carol", USERS["carol"])),
        "--describe", "--name", "by-bob",
    )  # fmt: skip
    assert described.returncode == 0, described.stderr
    assert "interval.ms=500" in described.stdout, described.stdout
    assert "metrics=org.apache.kafka." in described.stdout, described.stdout

    # alice's clients work through the gateway and their telemetry lands as alice.
    producer = Producer(librdkafka(s, gw, "alice", USERS["alice"], **{"client.id": "px-alice-p"}))
    for i in range(50):
        producer.produce(topic, value=f"v{i}".encode())
    assert producer.flush(30) == 0
    group = {"group.id": f"px-g-{topic}", "auto.offset.reset": "earliest"}
    consumer = Consumer(
        librdkafka(s, gw, "alice", USERS["alice"], **{"client.id": "px-alice-c", **group})
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:

        def all_back_and_landed() -> bool:
            message = consumer.poll(0.2)
            producer.poll(0)
            if message is not None and message.error() is None:
                got.append(message.value() or b"")
            return len(got) >= 50 and all(
                rows_of(gw.data_dir, c) for c in ("px-alice-p", "px-alice-c")
            )

        wait_for(all_back_and_landed, 60, interval=0, what="records back and telemetry landed")
    finally:
        consumer.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(50))
    for client_id in ("px-alice-p", "px-alice-c"):
        assert {r["principal"] for r in rows_of(gw.data_dir, client_id)} == {"User:alice"}
    java_as_alice(s, gw, admin, tmp_path)


def java_as_alice(s: Secured, gw: GatewayProcess, admin: AdminClient, tmp_path: Path) -> None:
    """The Java client (kafka-clients 4.4) as alice: its idempotent producer (Java's
    default) and a consumer on the KIP-848 protocol, SCRAM over TLS through the gateway."""
    topic, group = f"px-java-{uuid.uuid4().hex[:6]}", f"px-java-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(MIN_DEADLINE_S)
    props = command_config(s, tmp_path, "alice", USERS["alice"])
    with java(
        gw.bootstrap, tmp_path, "--command-config", str(props), "--client-id", "px-java",
        "--topic", topic, "--group", group, "--messages", "50", "--rate", "100",
        "--property", "group.protocol=consumer", "--close",
    ) as jv:  # fmt: skip
        roles = ("px-java-producer", "px-java-consumer")

        def consumed_and_landed() -> bool:
            wanted = ConsumerGroupTopicPartitions(group)
            offsets = admin.list_consumer_group_offsets([wanted])[group].result(MIN_DEADLINE_S)
            committed = sum(max(tp.offset, 0) for tp in offsets.topic_partitions or [])
            return committed >= 50 and all(rows_of(gw.data_dir, c) for c in roles)

        wait_for(consumed_and_landed, 90, what="Java's records consumed (committed) and landed")
        jv.stop()
    assert jv.wait_event("delivered", 5) == {
        "event": "delivered", "role": "producer", "acked": 52, "failed": 0,
    }  # fmt: skip
    assert jv.wait_event("done", 5, role="consumer")["consumed"] >= 50
    assert not jv.events("error")
    for client_id in roles:
        rows = rows_of(gw.data_dir, client_id)
        assert {r["principal"] for r in rows} == {"User:alice"}, client_id
        assert {r["client_software_name"] for r in rows} == {"apache-kafka-java"}, client_id


def test_terminate_logs_each_link_in_as_the_gateways_own_user(
    secured: Secured, passthrough: GatewayProcess, tmp_path: Path
) -> None:
    s = secured
    admin = AdminClient(librdkafka(s, passthrough, "admin", s.kafka.admin_password))
    allowed, denied = f"gwok-{uuid.uuid4().hex[:6]}", f"gwno-{uuid.uuid4().hex[:6]}"
    for topic in (allowed, denied):
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(MIN_DEADLINE_S)
    grant(
        admin,
        acl("User:gw", ResourceType.TOPIC, "gwok-", AclOperation.ALL, ResourcePatternType.PREFIXED),
    )

    data_dir = tmp_path / "terminate"
    data_dir.mkdir()
    subprocess.run(
        [str(BIN / "clientmetrics"), "users", "add", "dave", "--data-dir", str(data_dir),
         "--password", "dave-secret"],
        check=True, capture_output=True,
    )  # fmt: skip
    terminate = '[sasl]\nmechanisms = ["SCRAM-SHA-512"]\n[proxy]\nsasl = "terminate"\n'
    gw = start_gateway(s, data_dir, gateway_config(s, "gw", terminate), "--store", "sqlite")
    try:
        # Subscriptions are the gateway's own here (its SQLite store), set as dave.
        props = command_config(s, tmp_path, "dave", "dave-secret")
        subscribed = run_tool(
            "--bootstrap-server", gw.bootstrap, "--command-config", str(props),
            "--alter", "--name", "all", "--metrics", "org.apache.kafka.", "--interval", "500",
        )  # fmt: skip
        assert subscribed.code == 0, subscribed.out
        # dave is the gateway's user, unknown to the cluster; the cluster sees User:gw.
        producer = Producer(librdkafka(s, gw, "dave", "dave-secret", **{"client.id": "px-dave"}))
        failures: list[KafkaError | None] = []
        producer.produce(allowed, value=b"ok")
        producer.produce(denied, value=b"no", on_delivery=lambda err, _m: failures.append(err))
        assert producer.flush(30) == 0
        codes = [e.code() if e is not None else None for e in failures]
        assert codes == [KafkaError.TOPIC_AUTHORIZATION_FAILED]

        def landed() -> bool:
            producer.poll(0.1)
            return bool(rows_of(gw.data_dir, "px-dave"))

        wait_for(landed, 30, interval=0, what="dave's telemetry")
        assert {r["principal"] for r in rows_of(gw.data_dir, "px-dave")} == {"User:dave"}
        # A wrong password is refused by the gateway itself.
        errors: list[str] = []
        intruder = Producer(
            librdkafka(s, gw, "dave", "dave-secreT", error_cb=lambda e: errors.append(e.str()))
        )

        def refused() -> bool:
            intruder.poll(0.1)
            return bool(errors)

        wait_for(refused, 15, interval=0, what="the refusal")
        kafkas = "Authentication failed during authentication due to invalid credentials"
        assert any(kafkas in e for e in errors), errors  # the gateway words it as Kafka does
    finally:
        code = gw.stop()
    assert code == 0
    assert gw.tracebacks() == []
    assert gw.events("upstream_login_failed") == []


#: The guarded gateway's store topic: its own, so that the passthrough gateway's
#: subscriptions (kept in the default topic) do not mix into what its clients get.
STORE = "__client_metrics_subscriptions_guarded"
#: What an intruder writes to the store's topic: every client, every metric, 100 ms.
TAKEOVER = b'{"configs":{"metrics":"*","interval.ms":"100"}}'


def record_batch(key: bytes, value: bytes) -> bytes:
    """One valid v2 record batch (kafka-python's builder: Kafka checks its CRC)."""
    builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    builder.append(0, timestamp=None, key=key, value=value, headers=[])
    return bytes(builder.build())


def store_end_offset(s: Secured) -> int:
    """The store topic's end offset, asked of the broker itself as its super user."""
    consumer = Consumer(
        {
            **librdkafka(s, s.kafka, "admin", s.kafka.admin_password),
            "ssl.certificate.location": str(s.client.certificate),
            "ssl.key.location": str(s.client.private_key),
            "group.id": "store-end-offset",
        }
    )
    try:
        return int(
            consumer.get_watermark_offsets(TopicPartition(STORE, 0), timeout=MIN_DEADLINE_S)[1]
        )
    finally:
        consumer.close()


async def raw_requests(
    s: Secured, gw: GatewayProcess, props: Path, requests: list[tuple[int, int, dict[str, Any]]]
) -> list[Any]:
    """Each request as written (no Metadata first, as a real client would do), on one
    SASL_SSL connection through the gateway; the decoded answers."""
    config = AdminConfig.from_properties(gw.bootstrap, read_properties(props))
    conn = await BrokerConnection.connect(config)
    answers = []
    try:
        for api_key, version, values in requests:
            body = build(load_request_schema(api_key, version), values, blank=True)
            header = conn._header(api_key, version)
            frame = await conn._exchange(
                conn._framing.request(header, body), header.correlation_id, 30, str(api_key)
            )
            answers.append(decode_any_response(api_key, version, frame)[1])
    finally:
        await conn.close()
    return answers


def test_terminate_no_client_request_touches_the_subscription_store(
    secured: Secured, passthrough: GatewayProcess, tmp_path: Path
) -> None:
    """The topic store's topic is the gateway's own: its upstream user (gw) may do
    anything there, as the store needs; dave, a user of the gateway without
    ALTER_CONFIGS, goes upstream as gw too, and still cannot change the fleet's
    subscriptions by any request."""
    s = secured
    admin = AdminClient(librdkafka(s, passthrough, "admin", s.kafka.admin_password))
    # What the topic store needs, as the gateway's own user (docs/security.md).
    grant(
        admin,
        acl("User:gw", ResourceType.TOPIC, STORE, AclOperation.ALL),
        acl("User:gw", ResourceType.GROUP, "clientmetrics-topic-store", AclOperation.READ),
    )
    data_dir = tmp_path / "guarded"
    data_dir.mkdir()
    for user in ("dave", "erin"):
        subprocess.run(
            [str(BIN / "clientmetrics"), "users", "add", user, "--data-dir", str(data_dir),
             "--password", f"{user}-secret"],
            check=True, capture_output=True,
        )  # fmt: skip
    extra = (
        '[sasl]\nmechanisms = ["SCRAM-SHA-512"]\n[proxy]\nsasl = "terminate"\n'
        '[authorization]\nacls = [{ principal = "User:erin", operation = "ALTER_CONFIGS", '
        'permission = "allow" }]\n'
    )
    config = gateway_config(s, "gw", extra)
    gw = start_gateway(s, data_dir, config, "--subscriptions-topic", STORE)  # the topic store
    try:
        dave = command_config(s, tmp_path, "dave", "dave-secret")
        erin = command_config(s, tmp_path, "erin", "erin-secret")
        fleet = ("--alter", "--name", "fleet", "--metrics", "org.apache.kafka.producer.",
                 "--interval", "5000")  # fmt: skip
        tool = ("--bootstrap-server", gw.bootstrap, "--timeout", "15000")
        assert run_tool(*tool, "--command-config", str(erin), *fleet).out == (
            "Altered client metrics config for fleet.\n"
        )
        subscribed = (5000, ("org.apache.kafka.producer.",))
        assert asyncio.run(get_subscription(gw, dave)) == subscribed
        end = store_end_offset(s)
        [learned] = gw.events("store_topic_id")
        store_id = uuid.UUID(learned["topic_id"])

        # The config RPCs refuse dave (31), as before.
        takeover = ("--alter", "--name", "fleet", "--metrics", "*", "--interval", "100")
        refused = run_tool(*tool, "--command-config", str(dave), *takeover)
        assert (refused.code, refused.out) == (1, REFUSED)

        # Every request naming the topic, by name or by id: 29 on each item.
        batch = record_batch(b"fleet", TAKEOVER)
        by_name = [{"name": STORE, "partitions": [{"partition_index": 0, "offset": -1}]}]
        requests: list[tuple[int, int, dict[str, Any]]] = [
            (0, 9, {"acks": -1, "timeout": 5000, "topic_data": [
                {"name": STORE, "partition_data": [{"index": 0, "records": batch}]}]}),
            (0, 13, {"acks": -1, "timeout": 5000, "topic_data": [
                {"topic_id": store_id, "partition_data": [{"index": 0, "records": batch}]}]}),
            (21, 2, {"timeout": 5000, "topics": by_name}),
            (20, 5, {"timeout": 5000, "topic_names": [STORE]}),
            (20, 6, {"timeout": 5000, "topics": [{"name": None, "topic_id": store_id}]}),
            (37, 3, {"timeout": 5000, "topics": [{"name": STORE, "count": 3}]}),
            (44, 1, {"resources": [{"resource_type": 2, "resource_name": STORE, "configs": [
                {"name": "cleanup.policy", "config_operation": 0, "value": "delete"}]}]}),
            (1, 12, {"max_wait": 0, "max_bytes": 1 << 20, "topics": [{"topic": STORE,
                "partitions": [{"partition": 0, "partition_max_bytes": 1 << 20}]}]}),
            (1, 16, {"max_wait": 0, "max_bytes": 1 << 20, "topics": [{"topic_id": store_id,
                "partitions": [{"partition": 0, "partition_max_bytes": 1 << 20}]}]}),
            (2, 9, {"replica_id": -1, "topics": [{"name": STORE, "partitions": [
                {"partition_index": 0, "timestamp": -1}]}]}),
        ]  # fmt: skip
        answers = asyncio.run(raw_requests(s, gw, dave, requests))
        assert [error_codes(a)[1] for a in answers] == [[29]] * len(requests)
        assert [error_codes(a)[0] for a in answers] == [None] * 7 + [0, 0, None]

        # librdkafka as dave: the topic is not listed, and producing to it is refused.
        client = librdkafka(s, gw, "dave", "dave-secret")
        assert STORE not in AdminClient(client).list_topics(timeout=MIN_DEADLINE_S).topics
        failures: list[KafkaError | None] = []
        producer = Producer(client)
        producer.produce(
            STORE, key=b"fleet", value=TAKEOVER, on_delivery=lambda e, _m: failures.append(e)
        )
        producer.flush(30)
        assert [e.code() if e is not None else None for e in failures] == [
            KafkaError.TOPIC_AUTHORIZATION_FAILED
        ]

        # Nothing changed: no record was written, a Get returns the subscription erin set.
        assert store_end_offset(s) == end
        assert asyncio.run(get_subscription(gw, dave)) == subscribed
        described = run_tool(*tool, "--command-config", str(erin), "--describe", "--name", "fleet")
        assert "interval.ms=5000" in described.out, described.out
        # The audit trail names each refusal: who, from where, which api (the lines are
        # read from the gateway's output as it writes them: wait for the seven).
        wait_for(
            lambda: len({e["api"] for e in gw.events("store_topic_refused")}) >= 7,
            60,
            what="the audit lines of the seven refused apis",
        )
        audit = gw.events("store_topic_refused")
        assert {(e["principal"], e["topic"], e["error_code"]) for e in audit} == {
            ("User:dave", STORE, 29)
        }
        assert sorted({e["api"] for e in audit}) == [
            "CreatePartitions", "DeleteRecords", "DeleteTopics", "Fetch",
            "IncrementalAlterConfigs", "ListOffsets", "Produce",
        ]  # fmt: skip
        assert all(e["source"].startswith("127.0.0.1:") for e in audit)
        assert gw.events("subscription_change_refused")[0]["principal"] == "User:dave"

        # Passthrough: not even the cluster's super user writes the store through a gateway.
        su = command_config(s, tmp_path, "admin", s.kafka.admin_password)
        default = [{"name": "__client_metrics_subscriptions", "partition_data": [
            {"index": 0, "records": batch}]}]  # fmt: skip
        produce = (0, 9, {"acks": -1, "timeout": 5000, "topic_data": default})
        [answer] = asyncio.run(raw_requests(s, passthrough, su, [produce]))
        assert error_codes(answer)[1] == [29]
        wait_for(
            lambda: passthrough.events("store_topic_refused"), 60, what="the refusal's audit line"
        )
        [audit] = passthrough.events("store_topic_refused")
        assert (audit["principal"], audit["api"]) == ("User:admin", "Produce")
    finally:
        code = gw.stop()
    assert code == 0
    assert gw.tracebacks() == []


async def get_subscription(gw: GatewayProcess, props: Path) -> tuple[int, tuple[str, ...]]:
    """GetTelemetrySubscriptions through the gateway: (push interval ms, metrics)."""
    config = AdminConfig.from_properties(gw.bootstrap, read_properties(props))
    conn = await BrokerConnection.connect(config)
    try:
        # v0: the instance id in the body (v1, KIP-1313, wants it in the header).
        body = request_type(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0)(client_instance_id=ZERO_UUID)
        answer = await conn._round_trip(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, body, 30, "Get")
    finally:
        await conn.close()
    return int(answer.push_interval.total_seconds() * 1000), tuple(answer.requested_metrics)
