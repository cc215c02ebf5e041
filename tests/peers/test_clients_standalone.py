"""The real Java client, franz-go and librdkafka against the standalone gateway.

One gateway for the module (PLAINTEXT); each test has its own subscription, matched by
client id. A gateway per codec for the compression test, and one with a SASL_SSL
listener for the principal. Kafka's broker is not needed here (see test_clients_proxy).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.kadmin import set_subscription
from tests.landed import landed_rows
from tests.peers.clients import java, names, node_labels, requested_metrics, rows_by_client
from tests.procs import BIN, GatewayProcess, wait_for
from tests.tlsfiles import TestCA

pytestmark = [pytest.mark.kafka, pytest.mark.integration]

FAST = "[exporters.landing]\nroll_seconds = 0.3\n"
#: Metrics the KIP names that the Java producer has under these names (seen on 4.4.0).
JAVA_PRODUCER = {
    "org.apache.kafka.producer.node.request.latency.avg",
    "org.apache.kafka.producer.record.queue.time.avg",
    "org.apache.kafka.producer.produce.throttle.time.avg",
}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path_factory.mktemp("gw") / "data", FAST).start()
    yield gw
    assert gw.stop() == 0
    assert gw.tracebacks() == []


def test_all_metrics_then_a_subscription_change_reach_java_and_librdkafka(
    gateway: GatewayProcess, tmp_path: Path
) -> None:
    """A "*" subscription is said ``[""]`` on the wire, and both clients push everything;
    then a changed subscription reaches the running Java client.

    (franz-go is in test_clients_proxy: it starts its telemetry only once it has a
    produce or fetch connection, which a standalone gateway, serving no topics, never
    gives it.) Java's ``node_id="node-0"`` and librdkafka's ``node.id`` 0 for the
    gateway (node 0) decode as one label with one value. The change takes the
    UNKNOWN_SUBSCRIPTION_ID path: the next push carries the old SubscriptionId, is
    refused with 117, and Java fetches the new subscription at once and goes on (same
    instance, new metrics; its telemetry is not switched off).
    """
    match = {"match": "client_id=all-.*"}
    set_subscription(
        gateway.bootstrap, "everything", {"metrics": "*", "interval.ms": "500", **match}
    )
    assert requested_metrics(gateway.port, "all-raw") == [""]
    rdkafka = Producer({"bootstrap.servers": gateway.bootstrap, "client.id": "all-rdkafka"})
    clients = ("all-java-producer", "all-rdkafka")
    with java(gateway.bootstrap, tmp_path, "--client-id", "all-java", "--role", "producer",
              "--messages", "0") as client:  # fmt: skip
        instance = client.instance_ids()["producer"]

        def both_pushed_metrics() -> bool:
            rdkafka.poll(0.05)
            rows = rows_by_client(gateway.data_dir)
            return all(names(rows.get(c, [])) for c in clients)

        wait_for(both_pushed_metrics, 60, what="metrics from both clients")
        rdkafka.flush(1)
        rows = rows_by_client(gateway.data_dir)
        java_names = names(rows["all-java-producer"])
        assert java_names >= JAVA_PRODUCER
        assert len(java_names) > 50  # every metric in its registry, not a standard few
        assert "org.apache.kafka.producer.node.request.latency.avg" in names(rows["all-rdkafka"])
        software = {c: {str(r["client_software_name"]) for r in rows[c]} for c in clients}
        assert software == {
            "all-java-producer": {"apache-kafka-java"},
            "all-rdkafka": {"confluent-kafka-python"},
        }
        for c in clients:
            labels = node_labels(rows[c])
            assert "0" in labels, (c, labels)
            assert all(label.lstrip("-").isdigit() for label in labels), (c, labels)

        def mine() -> list[dict[str, object]]:
            return [r for r in landed_rows(gateway.data_dir) if r["client_instance_id"] == instance]

        before = {r["subscription_id"] for r in mine()}
        assert len(before) == 1
        narrower = "org.apache.kafka.producer.node."
        set_subscription(gateway.bootstrap, "everything", {"metrics": narrower})

        def after() -> list[dict[str, object]]:
            return [r for r in mine() if r["subscription_id"] not in before and r["payload"]]

        wait_for(lambda: len(after()) >= 2, 30, what="two pushes under the new subscription")
    assert all(n.startswith(narrower) for n in names(after()))
    assert not client.events("no_instance")
    assert not any(r["terminating"] for r in mine())  # not closed: halted


def test_java_pushes_land_with_each_codec_it_may_choose(tmp_path: Path) -> None:
    """One gateway per codec, each accepting only it: the Java client uses it, it lands.

    Its snappy is snappy-java's xerial stream (librdkafka's is a raw block): both decode.
    """
    codes = {"zstd": 4, "lz4": 3, "gzip": 1, "snappy": 2}

    def gateway_for(codec: str) -> GatewayProcess:
        config = f'{FAST}[telemetry]\naccepted_compression_types = ["{codec}"]\n'
        gw = GatewayProcess(tmp_path / codec, config).start()
        subscription = {"metrics": "org.apache.kafka.", "interval.ms": "500"}
        set_subscription(gw.bootstrap, "all", subscription)
        return gw

    with ExitStack() as stack, ThreadPoolExecutor(len(codes)) as pool:
        gateways = dict(zip(codes, pool.map(gateway_for, codes), strict=True))
        for gw in gateways.values():
            stack.callback(gw.stop)
        # One JVM, one producer per gateway (--bootstrap repeated).
        first, *others = (gw.bootstrap for gw in gateways.values())
        more = [arg for bootstrap in others for arg in ("--bootstrap", bootstrap)]
        stack.enter_context(
            java(first, tmp_path, *more, "--client-id", "codec", "--role", "producer",
                 "--messages", "0")
        )  # fmt: skip

        def landed(codec: str) -> bool:
            rows = landed_rows(gateways[codec].data_dir)
            return any(r["payload"] and r["compression_type"] == codes[codec] for r in rows)

        wait_for(lambda: all(landed(c) for c in codes), 60, what="a push in every codec")
        for codec, gw in gateways.items():
            rows = [r for r in landed_rows(gw.data_dir) if r["payload"]]
            assert {r["compression_type"] for r in rows} == {codes[codec]}, codec
            assert names(rows) >= JAVA_PRODUCER, codec


def test_java_over_sasl_ssl_lands_its_principal(tmp_path: Path) -> None:
    """SCRAM-SHA-512 over TLS, settings from a --command-config file as Kafka's tools take."""
    ca = TestCA(tmp_path / "pki")
    server = ca.issue("server", common_name="localhost")
    data = tmp_path / "data"
    subprocess.run(
        [str(BIN / "clientmetrics"), "users", "add", "alice", "--data-dir", str(data),
         "--password-stdin"],
        input="alice-secret\n", text=True, check=True, capture_output=True,
    )  # fmt: skip
    config = (
        f'[tls]\ncertificate = "{server.certificate}"\nprivate_key = "{server.private_key}"\n'
        f'[sasl]\nmechanisms = ["SCRAM-SHA-512"]\n{FAST}'
    )
    gw = GatewayProcess(data, config, listen_protocol="SASL_SSL").start()
    try:
        set_subscription(
            gw.bootstrap,
            "all",
            {"metrics": "org.apache.kafka.producer.", "interval.ms": "500"},
            security_protocol="SASL_SSL",
            ssl_cafile=str(ca.ca),
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="alice",
            sasl_plain_password="alice-secret",
        )
        properties = tmp_path / "client.properties"
        properties.write_text(
            "security.protocol=SASL_SSL\n"
            "sasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="alice" password="alice-secret";\n'
            f"ssl.truststore.type=PEM\nssl.truststore.location={ca.ca}\n"
        )
        with java(gw.bootstrap, tmp_path, "--client-id", "secure", "--role", "producer",
                  "--messages", "0", "--command-config", str(properties)):  # fmt: skip
            wait_for(
                lambda: any(r["payload"] for r in landed_rows(gw.data_dir)),
                60,
                what="a push over SASL_SSL",
            )
        rows = landed_rows(gw.data_dir)
        assert {(r["principal"], r["listener"], r["security_protocol"]) for r in rows} == {
            ("User:alice", "SASL_SSL", "SASL_SSL")
        }
        assert names(rows) >= {"org.apache.kafka.producer.node.request.latency.avg"}
    finally:
        assert gw.stop() == 0
