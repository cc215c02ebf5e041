"""The gateway's own metric names: Prometheus' conventions, one list, documented as exposed."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from clientmetrics.exporters.queued import ExporterStats
from clientmetrics.gateway.metrics_http import (
    LABELLED,
    METRICS,
    PREFIX,
    MetricsServer,
    exposed_name,
)
from clientmetrics.http_endpoint import HttpRequest

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def exposed() -> set[str]:
    # A labelled metric's values are keyed ``name:label value``.
    values = {f"{name}:some" if name in LABELLED else name: 1.0 for name in METRICS}
    server = MetricsServer(lambda: values, lambda: [ExporterStats(name="landing")])
    response = asyncio.run(server._answer(HttpRequest("GET", "/metrics", {})))
    return {
        sample.name
        for family in text_string_to_metric_families(response.body.decode())
        for sample in family.samples
        if not sample.name.endswith("_created")
    }


def test_names_use_base_units_and_counters_end_in_total() -> None:
    names = exposed()
    assert not [name for name in names if re.search(r"_(ms|milliseconds)(_|$)", name)]
    assert {exposed_name(name) for name in METRICS} <= names
    assert "kafka_server_client_metrics_plugin_export_time_seconds_total" in names


def test_operations_doc_lists_every_gateway_metric_as_exposed() -> None:
    table = DOC.read_text(encoding="utf-8").split("## Counters", 1)[1].split("\n## ", 1)[0]
    documented = {
        name
        for row in table.splitlines()
        if row.startswith("| `")
        for name in re.findall(r"`(\w+)(?:\{\w+\})?`", row.split("|")[1])
    }
    assert documented == {exposed_name(name).removeprefix(PREFIX) for name in METRICS}
