"""A healthy Java client fires no alert under the README's example rule.

Apache Kafka's Java client 4.4 reports NaN for ``node.request.latency.avg`` on its
bootstrap connection (``node_id="node--1"``, decoded ``node.id`` "-1") once that
connection is idle: Kafka's average of a window with no sample. Its real push
(``tests/data/java-4.4.0``, captured through the proxy) replayed once a second for
20 s, through the core pass with the README's rules file as written.
"""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path

import pyarrow as pa
from opentelemetry.proto.metrics.v1 import metrics_pb2 as m

from clientmetrics.pipeline.core.batch import PassPlan, pass_input, process_group
from clientmetrics.pipeline.core.rules import parse_rules
from clientmetrics.pipeline.core.schemas import CARRIED, LANDING_ARROW
from clientmetrics.telemetry.otlp_arrow import decode_points
from tests.pipeline.core.tables import at_us
from tests.synthetic import Push, landing_table

ROOT = Path(__file__).resolve().parents[3]
JAVA_PUSH = ROOT / "tests" / "data" / "java-4.4.0" / "producer-push.otlp.bin"
LATENCY = "org.apache.kafka.producer.node.request.latency.avg"


def readme_rules() -> dict[str, object]:
    """The rules file the README's quick start writes (its ``rules.toml`` here-document)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"cat > rules\.toml <<'RULES'\n(.*?)\nRULES\n", text, re.DOTALL)
    assert found is not None, "the README no longer writes rules.toml"
    return tomllib.loads(found[1])


def at_time(payload: bytes, time_ns: int) -> bytes:
    """The push with every data point's time moved to ``time_ns``."""
    data = m.MetricsData.FromString(payload)
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                kind = metric.WhichOneof("data")
                for point in getattr(metric, kind).data_points:
                    point.time_unix_nano = time_ns
    serialized: bytes = data.SerializeToString()
    return serialized


def test_a_java_clients_bootstrap_nan_fires_no_alert_under_the_readme_rule() -> None:
    rules = parse_rules(readme_rules()).rules
    assert [(r.metric, r.op, r.threshold, r.duration_seconds) for r in rules] == [
        (LATENCY, ">", 5000.0, 5.0)
    ]
    payload = JAVA_PUSH.read_bytes()
    # The cause, as the real client sent it: NaN on the bootstrap connection only.
    points = decode_points(pa.array([payload], pa.binary())).points.to_pylist()
    latency = {dict(p["attributes"])["node.id"]: p["value"] for p in points
               if p["metric_name"] == LATENCY}  # fmt: skip
    assert math.isnan(latency["-1"])
    assert latency["1"] < 5000
    pushes = [
        Push(at_us(s), "java-1", at_time(payload, at_us(s) * 1000), client_id="px-java-producer",
             push_interval_ms=1000, client_software_name="apache-kafka-java",
             client_software_version="4.4.0")
        for s in range(21)
    ]  # fmt: skip
    state = {tag: schema.empty_table() for tag, schema in CARRIED.items()}
    table = landing_table(pushes).cast(LANDING_ARROW)
    plan = PassPlan(staging="", window_seconds=60, rules=rules, as_of_us=at_us(20))
    sides = process_group(pass_input(table, state), plan).sides
    assert sides["alerts"].num_rows == 0
    assert sides["alert_state"].num_rows == 0  # not even an episode under way
