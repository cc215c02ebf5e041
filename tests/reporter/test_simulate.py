"""``clientmetrics simulate``: payload shape against the golden pushes, and a small real run."""

from __future__ import annotations

import json
import random
import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from clientmetrics.admin import list_client_metrics_resources
from clientmetrics.reporter.cli import SUBSCRIPTION_PREFIX
from clientmetrics.reporter.driver import new_client_instance_id
from clientmetrics.reporter.sim_payloads import SimMetrics
from clientmetrics.reporter.simulate import RunTag
from clientmetrics.telemetry.configs import validate
from clientmetrics.telemetry.matching import PatternCache
from clientmetrics.telemetry.model import ClientContext, kafka_uuid_text
from tests.golden import LIBRDKAFKA as GOLDEN
from tests.landed import landed_rows
from tests.procs import BIN, GatewayProcess, free_port, http_port, wait_for

LATENCY = "org.apache.kafka.producer.node.request.latency.avg"


def golden(kind: str) -> tuple[set[str], dict[str, str]]:
    data = MetricsData()
    data.ParseFromString((GOLDEN / f"{kind}-push.otlp.bin").read_bytes())
    names = {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    kinds = {
        m.name: m.WhichOneof("data")
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    return names, kinds


@pytest.mark.parametrize("kind", ["producer", "consumer"])
def test_simulated_metrics_have_librdkafkas_names_and_types(kind: str) -> None:
    names, kinds = golden(kind)
    points = SimMetrics(kind, False, 8000.0, 0).points(random.Random(1), 10**18, delta=False)
    assert {p.name for p in points} == names
    assert {p.name: ("sum" if p.is_sum else "gauge") for p in points} == kinds


def test_unhealthy_clients_report_far_higher_latency() -> None:
    rng = random.Random(3)
    healthy = SimMetrics("producer", False, 8000.0, 0).points(rng, 1, delta=True)
    sick = SimMetrics("producer", True, 8000.0, 0).points(rng, 1, delta=True)

    def latency(points: list) -> float:  # type: ignore[type-arg]
        return next(p.value for p in points if p.name == LATENCY)

    assert latency(healthy) < 20
    assert latency(sick) >= 8000 * 0.95


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path / "data", "[exporters.landing]\nroll_seconds = 0.3\n").start()
    yield gw
    assert gw.stop() == 0


@pytest.mark.integration
@pytest.mark.parametrize(("processes", "keep"), [(1, False), (2, True)])
def test_simulate_against_the_gateway(gateway: GatewayProcess, processes: int, keep: bool) -> None:
    out = subprocess.run(
        [
            str(BIN / "clientmetrics"),
            "simulate",
            "--bootstrap-server",
            gateway.bootstrap,
            "--clients",
            "200",
            "--interval-ms",
            "1000",
            "--duration",
            "4",
            # 200 goodbyes at once from one starved event loop took longer than the
            # default 5 s on a busy machine (76 of 200 in time): a deadline, not a measure.
            "--close-timeout",
            "60",
            "--processes",
            str(processes),
            "--unhealthy",
            "3",
            "--json",
            *(["--keep-subscription"] if keep else []),
        ],
        capture_output=True,
        check=True,
        timeout=180,  # the run, its start and the 60 s close deadline
        text=True,
    )
    report = json.loads(out.stdout)
    assert report["clients"] == 200
    assert report["handshakes"] == 200
    assert report["errors"] == {}
    assert report["terminating_pushes"] == 200, report
    # First push in [0.5, 1.5] s, then one a second: about 3 regular pushes each in 4 s,
    # never more (the interval is the product's bound). At least the first one each: a
    # busy machine may make fewer of the others, so their count is the benchmarks'.
    assert 200 <= report["pushes"] - report["terminating_pushes"] <= 4.2 * 200
    assert report["requests_by_version"] == {"v1": report["handshakes"] + report["pushes"]}
    # The run's own subscription lasts the run only, unless asked to stay.
    name = report["subscription"]
    assert name.startswith(SUBSCRIPTION_PREFIX)
    names = list(list_client_metrics_resources(gateway.bootstrap))
    assert names == ([name] if keep else [])

    def unhealthy_latencies() -> list[float]:
        out: list[float] = []
        for row in landed_rows(gateway.data_dir):
            if not str(row["client_id"]).startswith("unhealthy-") or not row["payload"]:
                continue
            data = MetricsData()
            data.ParseFromString(bytes(row["payload"]))  # type: ignore[arg-type]
            for rm in data.resource_metrics:
                for sm in rm.scope_metrics:
                    out += [
                        p.as_double
                        for m in sm.metrics
                        if m.name == LATENCY
                        for p in m.gauge.data_points
                    ]
        return out

    wait_for(unhealthy_latencies, 60, what="pushes from unhealthy clients")
    assert min(unhealthy_latencies()) > 5000

    # Every client has its own client id, as real clients on their own connections do.
    # Acknowledged pushes are in the WAL; wait for them to land as Parquet (the niced
    # converter runs behind a busy machine's other work).
    def instances_landed() -> bool:
        return len({r["client_instance_id"] for r in landed_rows(gateway.data_dir)}) >= 200

    wait_for(instances_landed, 60, what="every simulated instance landed")
    rows = landed_rows(gateway.data_dir)
    ids = {(str(r["client_instance_id"]), str(r["client_id"])) for r in rows}
    assert len({instance for instance, _ in ids}) == 200
    assert len({client_id for _, client_id in ids}) == 200


@pytest.mark.parametrize("extra", [(), ("--interval-ms", "1000"), ("--processes", "2")])
def test_a_closed_port_is_one_line(extra: tuple[str, ...]) -> None:
    port = free_port()
    done = subprocess.run(
        [str(BIN / "clientmetrics"), "simulate", "--bootstrap-server", f"127.0.0.1:{port}",
         "--duration", "1", *extra],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"clientmetrics simulate: cannot connect to 127.0.0.1:{port}: Connection refused"
    ]


def run_simulate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "clientmetrics"), "simulate", "--clients", "2", *args],
        capture_output=True, text=True, timeout=20, check=False,
    )  # fmt: skip


def test_a_port_that_is_not_kafka_is_one_line_at_once() -> None:
    # Before: the frame reader waited for b"HTTP"'s 1.2 GB "frame" for ever.
    with http_port() as port:
        done = run_simulate("--bootstrap-server", f"127.0.0.1:{port}", "--duration", "60")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"clientmetrics simulate: cannot use 127.0.0.1:{port}: "
        "not a Kafka broker: it answered '<!DOCTYPE HTML>'"
    ]


def test_a_port_that_never_answers_does_not_outlast_the_duration() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        port = sock.getsockname()[1]
        done = run_simulate("--bootstrap-server", f"127.0.0.1:{port}", "--duration", "1")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"clientmetrics simulate: cannot use 127.0.0.1:{port}: no answer to ApiVersions within 1 s"
    ]


def test_a_run_tag_matches_its_own_clients_in_both_texts_and_no_other() -> None:
    rng = random.Random(7)
    ours, theirs = RunTag.new(rng), RunTag.new(rng)
    sub = validate(
        ours.subscription_name,
        {"metrics": "org.apache.kafka.", "interval.ms": "1000", "match": ours.match},
    )
    assert sub is not None
    compiled = PatternCache().compile_subscription(sub)
    ctx = ClientContext(
        1, "sim-producer-0", "clientmetrics-simulator", "1.0", "127.0.0.1", 1, "", 0
    )
    for _ in range(200):
        own = new_client_instance_id(rng, prefix=ours.value)
        assert own.version == 4
        assert own.bytes[:6] == ours.value
        assert kafka_uuid_text(own).startswith(ours.id_text)
        assert compiled.matches(own, ctx)
        assert not compiled.matches(new_client_instance_id(rng, prefix=theirs.value), ctx)
        assert not compiled.matches(new_client_instance_id(rng), ctx)
    # Kafka matches the base64 text only: the pattern alone, as Java's Pattern.matches.
    assert re.fullmatch(ours.match.split("=", 1)[1], kafka_uuid_text(own))
    assert ours.subscription_name != theirs.subscription_name
