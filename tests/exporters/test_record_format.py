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
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from clientmetrics.exporters.topic import topic_record
from clientmetrics.telemetry.model import AcceptedPush
from clientmetrics.telemetry.otlp import InvalidPayload

VECTORS = Path(__file__).resolve().parent.parent / "data" / "record-format"
CASES: list[dict[str, Any]] = json.loads((VECTORS / "vectors.json").read_text("utf-8"))["cases"]


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


def test_the_vectors_file_is_what_its_generator_writes() -> None:
    spec = importlib.util.spec_from_file_location("make_vectors", VECTORS / "make_vectors.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (VECTORS / "vectors.json").read_text("utf-8") == module.render()
