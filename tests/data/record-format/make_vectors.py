"""Write ``vectors.json``: the record format's test vectors (docs/record-format.md).

Run ``python tests/data/record-format/make_vectors.py`` after changing a case. Inputs are
built here with the OTLP protobuf classes (one real librdkafka push among them); each
expected record is spelled out by hand: its key, headers and the exact resource attributes
of every ``ResourceMetrics`` in its value. The writers are never called here: the gateway's
topic exporter (tests/exporters/test_record_format.py) and the broker plugin
(broker-plugin/src/test/.../RecordFormatTest.java) are each checked against this file.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource

HERE = Path(__file__).resolve().parent
LIBRDKAFKA_PRODUCER = HERE.parent / "librdkafka-2.16" / "producer-push.otlp.bin"
INSTANCE = "5f8b7c1e-2a4d-4e6f-9b0a-1c2d3e4f5a6b"

PUSH = {
    "received_at_ms": 1767225600123,
    "client_instance_id": INSTANCE,
    "terminating": False,
    "push_interval_ms": 5000,
    "client_id": "orders",
    "client_software_name": "librdkafka",
    "client_software_version": "2.16.0",
    "client_source_address": "10.1.2.3",
    "client_source_port": 50123,
    "principal": "User:alice",
    "node_id": 3,
    "listener": "SASL_SSL",
    "security_protocol": "SASL_SSL",
}


def kv(key: str, value: str | int) -> KeyValue:
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def gauge(name: str, value: int) -> Metric:
    point = NumberDataPoint(time_unix_nano=1767225600000000000, as_int=value)
    return Metric(name=name, gauge=Gauge(data_points=[point]))


def resource_metrics(attributes: list[KeyValue] | None, *metrics: Metric) -> ResourceMetrics:
    scope = ScopeMetrics(scope=InstrumentationScope(name="org.apache.kafka"), metrics=list(metrics))
    if attributes is None:  # no resource field at all
        return ResourceMetrics(scope_metrics=[scope])
    return ResourceMetrics(resource=Resource(attributes=attributes), scope_metrics=[scope])


def expected(payload: bytes, attributes: list[list[KeyValue]]) -> bytes:
    """The value: the payload's ResourceMetrics, each with exactly ``attributes[i]``."""
    data = MetricsData.FromString(payload)
    assert len(data.resource_metrics) == len(attributes)
    out = ExportMetricsServiceRequest()
    for rm, attrs in zip(data.resource_metrics, attributes, strict=True):
        rm.resource.Clear()
        rm.resource.attributes.extend(attrs)
        out.resource_metrics.append(rm)
    value: bytes = out.SerializeToString()
    return value


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def case(
    name: str,
    push: dict[str, Any],
    payload: bytes,
    labels: list[str],
    headers: list[list[str]] | None,
    value: bytes | None,
) -> dict[str, Any]:
    """``headers``/``value`` None: the payload is not OTLP and both writers must refuse it."""
    out: dict[str, Any] = {
        "name": name,
        "push": {**push, "payload": b64(payload)},
        "labels": labels,
    }
    if value is None:
        out["invalid"] = True
    else:
        out["record"] = {
            "key": push["client_instance_id"],
            "timestamp_ms": push["received_at_ms"],
            "headers": headers,
            "value": b64(value),
        }
    return out


def cases() -> list[dict[str, Any]]:
    out = []
    producer = LIBRDKAFKA_PRODUCER.read_bytes()
    out.append(
        case(
            "librdkafka producer push, the client id and instance id only",
            PUSH,
            producer,
            ["client_id", "client_instance_id"],
            [
                ["client_id", "orders"],
                ["client_instance_id", INSTANCE],
                ["terminating", "false"],
                ["push_interval_ms", "5000"],
            ],
            expected(producer, [[kv("client_id", "orders"), kv("client_instance_id", INSTANCE)]]),
        )
    )
    # The Java client's shape: one ResourceMetrics per metric, the same resource in each. The
    # client's own client_id attribute is replaced by the broker's; its rack is kept.
    client = [kv("client_rack", "rack-1"), kv("client_id", "spoofed"), kv("group_id", "g")]
    java = MetricsData(
        resource_metrics=[
            resource_metrics(client, gauge("org.apache.kafka.producer.record.queue.time.max", 7)),
            resource_metrics(client, gauge("org.apache.kafka.producer.io.wait.ratio", 0)),
        ]
    ).SerializeToString()
    every = [
        "principal",
        "client_instance_id",
        "client_id",
        "client_software_name",
        "client_software_version",
        "client_source_address",
        "client_source_port",
        "node_id",
        "listener",
        "security_protocol",
    ]
    java_push = {
        **PUSH,
        "client_software_name": "apache-kafka-java",
        "client_software_version": "4.4.0",
    }
    attrs = [
        kv("client_rack", "rack-1"),
        kv("group_id", "g"),
        kv("principal", "User:alice"),
        kv("client_instance_id", INSTANCE),
        kv("client_id", "orders"),
        kv("client_software_name", "apache-kafka-java"),
        kv("client_software_version", "4.4.0"),
        kv("client_source_address", "10.1.2.3"),
        kv("client_source_port", 50123),
        kv("node_id", 3),
        kv("listener", "SASL_SSL"),
        kv("security_protocol", "SASL_SSL"),
    ]
    out.append(
        case(
            "java client shape, every label, a client attribute replaced",
            java_push,
            java,
            every,
            [
                ["principal", "User:alice"],
                ["client_instance_id", INSTANCE],
                ["client_id", "orders"],
                ["client_software_name", "apache-kafka-java"],
                ["client_software_version", "4.4.0"],
                ["client_source_address", "10.1.2.3"],
                ["client_source_port", "50123"],
                ["node_id", "3"],
                ["listener", "SASL_SSL"],
                ["security_protocol", "SASL_SSL"],
                ["terminating", "false"],
                ["push_interval_ms", "5000"],
            ],
            expected(java, [attrs, attrs]),
        )
    )
    kept = [kv("group_id", "g"), kv("member_id", "m-1")]
    consumer = MetricsData(
        resource_metrics=[resource_metrics(kept, gauge("org.apache.kafka.consumer.poll.idle", 1))]
    ).SerializeToString()
    out.append(
        case(
            "no labels, terminating push",
            {**PUSH, "terminating": True, "push_interval_ms": 60000},
            consumer,
            [],
            [["terminating", "true"], ["push_interval_ms", "60000"]],
            expected(consumer, [kept]),
        )
    )
    bare = MetricsData(
        resource_metrics=[resource_metrics(None, gauge("org.apache.kafka.producer.x", 1))]
    ).SerializeToString()
    out.append(
        case(
            "a ResourceMetrics without a resource gets one",
            PUSH,
            bare,
            ["client_instance_id"],
            [
                ["client_instance_id", INSTANCE],
                ["terminating", "false"],
                ["push_interval_ms", "5000"],
            ],
            expected(bare, [[kv("client_instance_id", INSTANCE)]]),
        )
    )
    odd = {
        **PUSH,
        "client_id": "caf\u00e9-\u2603",
        "principal": "User:CN=alice,O=Example Corp",
        "client_software_version": "",
        "client_source_port": 65535,
        "node_id": 0,
    }
    labels = ["client_id", "principal", "client_software_version", "client_source_port", "node_id"]
    out.append(
        case(
            "UTF-8 text, an empty value and a zero integer are written as they are",
            odd,
            bare,
            labels,
            [
                ["client_id", "caf\u00e9-\u2603"],
                ["principal", "User:CN=alice,O=Example Corp"],
                ["client_software_version", ""],
                ["client_source_port", "65535"],
                ["node_id", "0"],
                ["terminating", "false"],
                ["push_interval_ms", "5000"],
            ],
            expected(
                bare,
                [
                    [
                        kv("client_id", "caf\u00e9-\u2603"),
                        kv("principal", "User:CN=alice,O=Example Corp"),
                        kv("client_software_version", ""),
                        kv("client_source_port", 65535),
                        kv("node_id", 0),
                    ]
                ],
            ),
        )
    )
    out.append(
        case(
            "an empty push (the gateway's; a broker never hands one to a plugin)",
            PUSH,
            b"",
            ["client_id"],
            [["client_id", "orders"], ["terminating", "false"], ["push_interval_ms", "5000"]],
            b"",
        )
    )
    out.append(
        case(
            "a payload that is not protobuf is refused",
            PUSH,
            b"\x0a\x05\x01",  # field 1, length 5, one byte present
            ["client_id"],
            None,
            None,
        )
    )
    return out


#: Partition counts of the partition vectors.
PARTITION_COUNTS = [1, 3, 4, 12]
#: Each key's partition for each of ``PARTITION_COUNTS``, taken from Kafka 4.4.0 itself
#: (``BuiltInPartitioner.partitionForKey``: murmur2 of the key's bytes, made positive,
#: modulo the count): the partition the Java producer, so the broker plugin, puts a keyed
#: record on. librdkafka's ``murmur2_random`` partitioner must agree (its default,
#: ``consistent_random``, a CRC32, puts some of these keys elsewhere).
PARTITIONS = {
    INSTANCE: [0, 1, 2, 10],
    "00000000-0000-0000-0000-00000000000a": [0, 0, 1, 9],
    "00000000-0000-0000-0000-00000000000b": [0, 0, 0, 0],
    "00000000-0000-0000-0000-00000000000c": [0, 0, 0, 0],
    "00000000-0000-0000-0000-00000000000d": [0, 2, 1, 5],
    "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9": [0, 0, 1, 9],
    "c0ffee00-1234-4abc-8def-0123456789ab": [0, 2, 3, 11],
    "9b2e6c1a-77d4-4f3e-a0b1-5c6d7e8f9a0b": [0, 2, 0, 8],
}


#: The labels both writers add when none are configured: all the inventory shows of a client.
DEFAULT_LABELS = [
    "client_id",
    "client_instance_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
    "principal",
]


def document() -> dict[str, Any]:
    return {
        "about": "The record format's test vectors (docs/record-format.md), by make_vectors.py.",
        "default_labels": DEFAULT_LABELS,
        "cases": cases(),
        "partitions": {
            "about": "key -> partition for each count: where every writer puts a record",
            "counts": PARTITION_COUNTS,
            "keys": PARTITIONS,
        },
    }


def render() -> str:
    return json.dumps(document(), indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    (HERE / "vectors.json").write_text(render(), encoding="utf-8")
