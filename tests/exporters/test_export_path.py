"""The export path: landing gates the answer, queued exporters are fail-open unless required."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest
from landing_helpers import build_push
from prometheus_client.parser import text_string_to_metric_families
from tests.procs import MIN_DEADLINE_S

from clientmetrics.errors import ConfigurationError
from clientmetrics.exporters import ExportError, InMemoryExporter, LandingExporter
from clientmetrics.exporters.landing_options import LandingOptions
from clientmetrics.exporters.path import ExportPath
from clientmetrics.exporters.queued import ExporterStats, QueuedExporter, QueueOptions
from clientmetrics.gateway.config_load import load_config
from clientmetrics.gateway.metrics_http import MetricsServer
from clientmetrics.telemetry.model import AcceptedPush


def push(n: int = 0) -> AcceptedPush:
    return build_push(n, received_at_ms=n, client_instance_id=uuid.uuid4(), payload=b"")


class GateSink:
    """A sink whose sends wait for ``release`` and can be made to fail."""

    max_batch = 4
    max_delay_s = 0.0

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.batches: list[list[int]] = []
        self.fail = False
        self.closed = False

    async def start(self, stats: ExporterStats) -> None:
        pass

    async def send(self, pushes: Sequence[AcceptedPush]) -> int:
        await self.release.wait()
        if self.fail:
            raise ExportError("endpoint said no")
        self.batches.append([p.received_at_ms for p in pushes])
        return len(pushes)

    async def flush(self, timeout_s: float) -> None:
        pass

    async def close(self, timeout_s: float) -> None:
        self.closed = True


async def started(*exporters: object) -> None:
    for e in exporters:
        await e.start()  # type: ignore[attr-defined]


async def test_a_stuck_queued_exporter_neither_delays_nor_fails_the_answer() -> None:
    landing, sink = InMemoryExporter(), GateSink()
    queued = QueuedExporter("otlp", sink, QueueOptions(queue_size=3))
    await started(landing, queued)
    path = ExportPath([landing, queued])
    await path.export(push(0))
    await asyncio.sleep(0.01)  # the worker takes push 0 and blocks in send
    for n in range(1, 10):
        # Not held by the stuck send (which holds it for ever); 10 s is a busy machine's slack.
        await asyncio.wait_for(path.export(push(n)), MIN_DEADLINE_S)
    assert len(landing.pushes) == 10
    # Pushes 1-3 wait in the queue of 3; 4-9 are dropped.
    stats = {s.name: s for s in path.stats()}
    assert (stats["otlp"].received, stats["otlp"].dropped, stats["otlp"].queue_depth) == (10, 6, 3)
    assert (stats["memory"].received, stats["memory"].exported) == (10, 10)
    sink.release.set()
    await queued.flush(1)
    assert sink.batches == [[0], [1, 2, 3]]
    assert (stats["otlp"].exported, path.stats()[1].queue_depth) == (4, 0)
    await queued.close(1)
    assert sink.closed


async def test_landing_failure_fails_the_push_and_nothing_is_offered() -> None:
    landing, sink = InMemoryExporter(), GateSink()
    sink.release.set()
    queued = QueuedExporter("otlp", sink, QueueOptions())
    await started(landing, queued)
    landing.fail_with(ExportError("disk full"))
    path = ExportPath([landing, queued])
    with pytest.raises(ExportError, match="disk full"):
        await path.export(push())
    assert path.stats()[0].failed == 1
    assert queued.stats.received == 0
    await queued.close(1)


async def test_a_required_exporter_gates_the_answer_and_its_failure() -> None:
    sink = GateSink()
    queued = QueuedExporter("topic", sink, QueueOptions(required=True))
    await started(queued)
    path = ExportPath([queued])
    answer = asyncio.ensure_future(path.export(push(1)))
    await asyncio.sleep(0.05)
    assert not answer.done()
    sink.release.set()
    await asyncio.wait_for(answer, MIN_DEADLINE_S)
    sink.fail = True
    with pytest.raises(ExportError, match="endpoint said no"):
        await path.export(push(2))
    assert (queued.stats.exported, queued.stats.failed) == (1, 1)
    await queued.close(1)


def test_queue_options_are_validated() -> None:
    opts, rest = QueueOptions.take("otlp", {"labels": ["client_id", "principal"], "endpoint": "x"})
    assert opts.labels == ("client_id", "principal")
    assert rest == {"endpoint": "x"}
    assert QueueOptions.take("otlp", {})[0].labels == ("client_id", "client_instance_id")
    with pytest.raises(ConfigurationError, match="unknown client_rack"):
        QueueOptions.take("otlp", {"labels": ["client_rack"]})
    with pytest.raises(ConfigurationError, match="queue_size"):
        QueueOptions.take("otlp", {"queue_size": 0})


def test_exporter_tables_add_to_landing_and_can_be_disabled(tmp_path: Path) -> None:
    cfg_path = tmp_path / "gw.toml"
    cfg_path.write_text(
        "[exporters.prometheus]\nenabled = true\nlisten = '127.0.0.1:0'\n"
        "[exporters.otlp]\nenabled = false\n"
    )
    cfg = load_config(cfg_path, data_dir=tmp_path, environ={})
    assert [(e.name, dict(e.options)) for e in cfg.exporters] == [
        ("landing", {}),
        ("prometheus", {"listen": "127.0.0.1:0"}),
    ]
    cfg_path.write_text(
        "[gateway]\nupstream = '127.0.0.1:9092'\n[exporters.landing]\nenabled = false\n"
        "[exporters.topic]\n"
    )
    cfg = load_config(cfg_path, data_dir=tmp_path, environ={})
    assert [(e.name, dict(e.options)) for e in cfg.exporters] == [
        (
            "topic",
            {
                "bootstrap_servers": "127.0.0.1:9092",
                "producer": {"security.protocol": "plaintext"},
            },
        )
    ]


async def test_admin_metrics_show_each_exporters_counters() -> None:
    stats = [ExporterStats("landing", received=5, exported=4, failed=1)]
    stats.append(ExporterStats("prometheus", received=5, dropped=2, queue_depth=3))
    stats[0].timed(0.25)
    stats[1].extra["series_refused"] = 9
    server = MetricsServer(dict, lambda: stats)
    port = await server.start("127.0.0.1", 0)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        raw = await reader.read()
        writer.close()
    finally:
        await server.close()
    text = raw.split(b"\r\n\r\n", 1)[1].decode()
    values = {
        (s.name, s.labels.get("exporter")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    assert values[("clientmetrics_exporter_received_total", "landing")] == 5
    assert values[("clientmetrics_exporter_failed_total", "landing")] == 1
    assert values[("clientmetrics_exporter_dropped_total", "prometheus")] == 2
    assert values[("clientmetrics_exporter_queue_depth", "prometheus")] == 3
    assert values[("clientmetrics_exporter_export_seconds_sum", "landing")] == 0.25
    assert values[("clientmetrics_exporter_export_seconds_count", "landing")] == 1
    assert values[("clientmetrics_exporter_series_refused_total", "prometheus")] == 9


def test_each_worker_gets_its_own_exporter_listen_port(tmp_path: Path) -> None:
    from clientmetrics.gateway.cli import _worker_config

    cfg_path = tmp_path / "gw.toml"
    cfg_path.write_text(
        "[gateway]\nworkers = 2\n[exporters.prometheus]\nlisten = '127.0.0.1:9465'\n"
    )
    cfg = load_config(cfg_path, data_dir=tmp_path, environ={})
    second = _worker_config(cfg, 1)
    assert dict(second.exporters[1].options) == {"listen": "127.0.0.1:9466"}
    assert dict(_worker_config(cfg, 0).exporters[1].options) == {"listen": "127.0.0.1:9465"}


def test_in_proxy_mode_the_topic_exporter_reaches_the_upstream_as_the_gateway_does(
    tmp_path: Path,
) -> None:
    cfg_path = tmp_path / "gw.toml"
    cfg_path.write_text(
        "[gateway]\nupstream = '10.0.0.1:9093'\n"
        "[upstream]\nsecurity_protocol = 'SASL_PLAINTEXT'\nsasl_mechanism = 'PLAIN'\n"
        "sasl_username = 'gw'\nsasl_password = 'pw'\n"
        "[exporters.topic]\nproducer = { 'linger.ms' = 5, 'sasl.username' = 'exporter' }\n"
    )
    cfg = load_config(cfg_path, data_dir=tmp_path, environ={})
    (topic,) = [e for e in cfg.exporters if e.name == "topic"]
    assert topic.options["bootstrap_servers"] == "10.0.0.1:9093"
    assert topic.options["producer"] == {
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "exporter",  # the exporter's own setting wins
        "sasl.password": "pw",
        "linger.ms": 5,
    }


async def test_submit_tells_the_outcome_and_offers_after_the_gate(tmp_path: Path) -> None:
    """The hot path (``submit``): the landing exporter's outcome is told through the
    callback, the push is offered to the fail-open exporters only once landed, and a
    refusal at once (a full disk) is told before ``submit`` returns."""
    landing = LandingExporter(tmp_path, LandingOptions(max_pending=1, commit_interval_ms=20))
    sink = GateSink()
    sink.release.set()
    queued = QueuedExporter("otlp", sink, QueueOptions())
    await started(landing, queued)
    path = ExportPath([landing, queued])
    told: list[BaseException | None] = []
    path.submit(push(0), told.append)
    path.submit(push(1), told.append)  # no slot: export's task waits for one
    assert told == []
    assert queued.stats.received == 0
    for _ in range(6000):  # 60 s at most: generous for a busy machine
        await asyncio.sleep(0.01)
        if len(told) == 2:
            break
    assert told == [None, None]
    assert queued.stats.received == 2
    landing._failure = OSError(28, "No space left on device")
    path.submit(push(2), told.append)
    assert isinstance(told[2], ExportError)
    assert "No space left" in str(told[2])
    stats = {s.name: s for s in path.stats()}
    assert (stats["landing"].received, stats["landing"].exported) == (3, 2)
    assert stats["landing"].failed == 1
    assert queued.stats.received == 2
    landing._failure = None
    await landing.close(60)
    await queued.close(1)
