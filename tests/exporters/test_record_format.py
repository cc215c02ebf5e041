"""The topic exporter's records against the record format's shared test vectors.

``tests/data/record-format/vectors.json`` (docs/record-format.md) spells out, by hand, the
record each push must become; the broker plugin's JUnit tests check the same file.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Message, Producer
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from clientmetrics.exporters.queued import QueuedExporter
from clientmetrics.exporters.topic import TopicSink, create, producer_config, topic_record
from clientmetrics.exporters.topic_acked import AckedTopicExporter
from clientmetrics.telemetry.model import AcceptedPush
from clientmetrics.telemetry.otlp import InvalidPayload

VECTORS = Path(__file__).resolve().parent.parent / "data" / "record-format"
DOCUMENT: dict[str, Any] = json.loads((VECTORS / "vectors.json").read_text("utf-8"))
CASES: list[dict[str, Any]] = DOCUMENT["cases"]


def accepted(push: dict[str, Any]) -> AcceptedPush:
    fields = {k: v for k, v in push.items() if k != "payload"}
    fields["client_instance_id"] = uuid.UUID(fields["client_instance_id"])
    # Not part of the record: what the gateway knows and a broker does not tell a plugin.
    fields |= {"subscription_id": 11, "compression_type": 4}
    return AcceptedPush(**fields, payload=base64.b64decode(push["payload"]))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_each_push_becomes_the_record_the_vectors_spell_out(case: dict[str, Any]) -> None:
    push = accepted(case["push"])
    if case.get("invalid"):
        with pytest.raises(InvalidPayload):
            topic_record(push, case["labels"])
        return
    want = case["record"]
    record = topic_record(push, case["labels"])
    assert record.key == want["key"].encode()
    assert record.timestamp_ms == want["timestamp_ms"]
    *headers, (last, push_id) = record.headers
    assert [(name, value.decode()) for name, value in headers] == [
        (name, value) for name, value in want["headers"]
    ]
    # The last header is the push's own id: random, so the vectors cannot spell it out.
    assert last == "push_id"
    assert uuid.UUID(push_id.decode()).version == 4
    value = base64.b64decode(want["value"])
    parse = ExportMetricsServiceRequest.FromString
    assert parse(record.value) == parse(value)
    assert record.value == value  # canonical input, canonical bytes (both writers)


def test_the_topic_exporters_producer_puts_each_key_on_the_partition_the_vectors_say() -> None:
    """librdkafka's mock cluster, whose new topics have 4 partitions (more counts, on a real
    broker: tests/plugin/). Kafka's Java producer, so the plugin, puts them there too."""
    vectors = json.loads((VECTORS / "vectors.json").read_text("utf-8"))["partitions"]
    column = vectors["counts"].index(4)
    want = {key: parts[column] for key, parts in vectors["keys"].items()}
    mock = {"test.mock.num.brokers": 1, "enable.metrics.push": False}

    def partitions(config: dict[str, object]) -> dict[str, int | None]:
        producer = Producer(config)
        found: dict[str, int | None] = {}

        def delivered(_error: object, message: Message) -> None:
            key = message.key()
            found[key.decode() if isinstance(key, bytes) else str(key)] = message.partition()

        for key in want:
            producer.produce("t", b"v", key.encode(), on_delivery=delivered)
        assert producer.flush(10) == 0
        assert len(producer.list_topics("t").topics["t"].partitions) == 4
        return found

    config = producer_config({"bootstrap_servers": "127.0.0.1:9", "producer": mock})
    assert partitions(config) == want
    # The vectors tell the partitioners apart: librdkafka's default puts some keys elsewhere.
    assert partitions({**config, "partitioner": "consistent_random"}) != want


def test_the_vectors_file_is_what_its_generator_writes() -> None:
    spec = importlib.util.spec_from_file_location("make_vectors", VECTORS / "make_vectors.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (VECTORS / "vectors.json").read_text("utf-8") == module.render()


@pytest.mark.parametrize("required", [False, True])
def test_without_a_labels_option_the_exporter_adds_the_formats_default(
    tmp_path: Path, required: bool
) -> None:
    """The broker plugin's RecordFormatTest checks its default against the same list."""
    exporter = create({"bootstrap_servers": "127.0.0.1:9", "required": required}, tmp_path)
    assert isinstance(exporter, QueuedExporter | AckedTopicExporter)
    assert isinstance(exporter.sink, TopicSink)
    assert exporter.sink.labels == tuple(DOCUMENT["default_labels"])
    assert "client_software_name" in DOCUMENT["default_labels"]
