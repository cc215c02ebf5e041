"""The golden test: the same pushes through the gateway and through the plugin, the same tables.

The pipeline's golden input (tests/pipeline/golden.py: producers that fire and resolve an
alert, delta and cumulative sums with resets, a histogram, librdkafka's consumer push),
its non-empty pushes only (Kafka hands a plugin none of the empty ones), goes at once to a
standalone gateway (its topic exporter writing to the target cluster) and to the Kafka
4.4 broker with the plugin (writing to the same cluster), from one client per instance
over SASL_SSL as alice (``twins``). The pipeline's Kafka source reads each topic into its
own tables. They are equal but for what each server stamps on a push itself: the
client's source port (a connection of its own to each) and the time the push was
received (``received_at`` and the clients' ``first_seen``, ``last_seen``, ``last_push``);
the alerts carry the port among their ``labels``.
The gateway runs as node 1, the broker's ``node.id``, so ``node_id`` agrees too.

Both topics have 4 partitions: each instance's records are on the same partition in
both, the one the record format's vectors give for its key.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from pyspark.sql import SparkSession

from clientmetrics.admin.properties import ClientSecurity
from clientmetrics.pipeline.jobs.job import PipelineJob
from clientmetrics.pipeline.jobs.sources import KafkaSource
from tests.kadmin import set_subscription
from tests.pipeline.golden import FAST, TABLES, canonical_rows, golden_batches, read_table
from tests.pipeline.test_golden import golden_config
from tests.plugin.conftest import EVERY_LABEL, PARTITIONS, USERS, Cluster
from tests.plugin.records import Record
from tests.plugin.twins import Server, Twin, push_rounds
from tests.procs import BIN, GatewayProcess
from tests.spark import KAFKA_SOURCE_MISSING
from tests.tlsfiles import TestCA

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.integration]

PLUGIN_TOPIC = "golden_plugin"
GATEWAY_TOPIC = "golden_gateway"
INTERVAL_MS = 200
VECTORS = Path(__file__).resolve().parents[1] / "data" / "record-format" / "vectors.json"
#: What each server stamps on a push itself: the only columns allowed to differ.
OWN_STAMPS = {"client_source_port", "received_at", "first_seen", "last_seen", "last_push"}


@dataclass(frozen=True)
class Gateway:
    process: GatewayProcess
    ca: Path


@pytest.fixture(scope="module")
def gateway(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A standalone gateway on SASL_SSL (alice), node 1, its topic exporter to the target."""
    work = tmp_path_factory.mktemp("gateway")
    ca = TestCA(work / "pki")
    server = ca.issue("server", common_name="localhost")
    data = work / "data"
    subprocess.run(
        [str(BIN / "clientmetrics"), "users", "add", "alice", "--data-dir", str(data),
         "--password-stdin"],
        input=USERS["alice"] + "\n", text=True, check=True, capture_output=True,
    )  # fmt: skip
    labels = ", ".join(f'"{label}"' for label in EVERY_LABEL.split(","))
    config = f"""
[gateway]
node_id = 1
[tls]
certificate = "{server.certificate}"
private_key = "{server.private_key}"
[sasl]
mechanisms = ["SCRAM-SHA-512"]
[exporters.landing]
enabled = false
[exporters.topic]
bootstrap_servers = "{cluster.target.bootstrap}"
topic = "{GATEWAY_TOPIC}"
partitions = {PARTITIONS}
labels = [{labels}]
"""
    gw = GatewayProcess(data, config, listen_protocol="SASL_SSL").start()
    try:
        yield Gateway(gw, ca.ca)
    finally:
        assert gw.stop() == 0
        assert gw.tracebacks() == []


def rounds() -> list[list[Twin]]:
    """The golden input's non-empty pushes, each instance's in order, in rounds that end
    together (but for the consumer's one push, in the first): whether a client is
    ``silent`` then never hangs on a few milliseconds."""
    by_instance: dict[str, list[Twin]] = {}
    for push in (p for batch in golden_batches() for p in batch if p.payload):
        by_instance.setdefault(push.client_instance_id, []).append(
            Twin(uuid.UUID(push.client_instance_id), f"golden-{push.client_id}", push.payload)
        )
    last = by_instance[FAST][-1]  # its goodbye carries metrics (the golden one is empty)
    by_instance[FAST][-1] = Twin(last.instance, last.client_id, last.payload, terminating=True)
    length = max(len(twins) for twins in by_instance.values())
    out: list[list[Twin]] = [[] for _ in range(length)]
    for twins in by_instance.values():
        start = 0 if len(twins) == 1 else length - len(twins)
        for index, twin in enumerate(twins):
            out[start + index].append(twin)
    return out


def tables(spark: SparkSession, cluster: Cluster, topic: str, data: Path) -> dict[str, Any]:
    """The pipeline's four tables from the topic (one run, every window flushed)."""
    source = KafkaSource(cluster.target.bootstrap, topic)
    PipelineJob(spark, golden_config(data, kafka=source, flush_windows=True)).run()
    return {name: unstamped(read_table(data / "tables", name)) for name in TABLES}


def unstamped(table: Any) -> list[dict[str, Any]]:
    """The rows without ``OWN_STAMPS`` (also in the alerts' ``labels``), in a fixed order."""
    rows = []
    for full in canonical_rows(table):
        row = {k: v for k, v in full.items() if k not in OWN_STAMPS}
        if isinstance(row.get("labels"), dict):
            row["labels"] = {k: v for k, v in row["labels"].items() if k not in OWN_STAMPS}
        rows.append(row)
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True))


def test_the_same_pushes_through_the_gateway_and_the_plugin_make_the_same_tables(
    spark: SparkSession, cluster: Cluster, gateway: Gateway, tmp_path: Path
) -> None:
    if KAFKA_SOURCE_MISSING:
        pytest.skip(KAFKA_SOURCE_MISSING[0])
    broker = cluster.broker
    assert broker.tls is not None
    subscription = {"metrics": "*", "interval.ms": str(INTERVAL_MS), "match": "client_id=golden-.*"}
    set_subscription(
        broker.bootstrap,
        "golden",
        subscription,
        **kafka_python("admin", broker.admin_password, broker.tls.ca),
    )
    set_subscription(
        gateway.process.bootstrap,
        "golden",
        subscription,
        **kafka_python("alice", USERS["alice"], gateway.ca),
    )
    cluster.alter({"clientmetrics.topic": PLUGIN_TOPIC})
    try:
        plan = rounds()
        servers = [
            server(broker.bootstrap, broker.tls.ca),
            server(gateway.process.bootstrap, gateway.ca),
        ]
        throttled = asyncio.run(push_rounds(servers, plan, step_s=INTERVAL_MS * 1.5 / 1000))
        sent = sum(len(r) for r in plan)
        plugin = cluster.records(PLUGIN_TOPIC, sent)
        via_gateway = cluster.records(GATEWAY_TOPIC, sent)
    finally:
        cluster.alter({"clientmetrics.topic": None})
    print(f"{sent} pushes to each, {throttled} throttled and sent again")

    # Every writer puts an instance's records on the partition its key hashes to.
    vectors = json.loads(VECTORS.read_text("utf-8"))["partitions"]
    column = vectors["counts"].index(PARTITIONS)
    for records in (plugin, via_gateway):
        assert {r.key: r.partition for r in records} == {
            r.key: vectors["keys"][r.key][column] for r in records
        }
        assert len({r.partition for r in records}) > 1
    assert sorted(map(summary, plugin)) == sorted(map(summary, via_gateway))

    began = time.time()
    ours = tables(spark, cluster, PLUGIN_TOPIC, tmp_path / "plugin")
    theirs = tables(spark, cluster, GATEWAY_TOPIC, tmp_path / "gateway")
    print(f"two pipeline runs in {time.time() - began:.1f} s")
    assert {name: len(rows) for name, rows in ours.items()} == {
        name: len(rows) for name, rows in theirs.items()
    }
    for name in TABLES:
        assert ours[name] == theirs[name], name
    clients = {row["client_instance_id"]: row for row in ours["clients"]}
    assert len(clients) == 4
    assert clients[FAST]["terminated"] is True
    assert {row["client_instance_id"] for row in ours["clients"] if row["silent"]} == {
        "00000000-0000-0000-0000-00000000000d"  # the consumer's one push, in the first round
    }
    assert {row["principal"] for row in ours["points"]} == {"User:alice"}
    assert {(row["node_id"], row["listener"]) for row in ours["points"]} == {(1, "SASL_SSL")}
    assert {row["push_interval_ms"] for row in ours["points"]} == {INTERVAL_MS}
    assert ours["alerts"]
    assert ours["client_windows"]


def summary(record: Record) -> tuple[str, int, str, bytes]:
    """What must agree between the two writers' copies of a push: all but the port (a
    header and an attribute of each resource) and ``push_id``."""
    skip = ("client_source_port", "push_id")
    labels = {k: v for k, v in record.headers.items() if k not in skip}
    value = ExportMetricsServiceRequest.FromString(record.value)
    for rm in value.resource_metrics:
        kept = [kv for kv in rm.resource.attributes if kv.key != "client_source_port"]
        del rm.resource.attributes[:]
        rm.resource.attributes.extend(kept)
    return (
        record.key,
        record.partition,
        json.dumps(labels, sort_keys=True),
        value.SerializeToString(),
    )


def server(bootstrap: str, ca: Path) -> Server:
    host, port = bootstrap.rsplit(":", 1)
    security = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
            f'required username="alice" password="{USERS["alice"]}";',
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca),
        }
    )
    return Server(host, int(port), security)


def kafka_python(user: str, password: str, ca: Path) -> dict[str, object]:
    """kafka-python's settings for SCRAM-SHA-512 over TLS (``tests.kadmin``)."""
    return {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": user,
        "sasl_plain_password": password,
        "ssl_cafile": str(ca),
    }
