"""The gateway beside Apache Kafka 4.4.0: the same KIP-714 load, same run, same machine.

Every server is started once and kept for the whole run, and they take turns:

  * Kafka 4.4.0 (KRaft, one node, JVM flags as ``kafka-server-start.sh`` sets them) with
    the launcher's no-op telemetry plugin;
  * the same Kafka with the project's broker plugin (its records to a topic on that
    broker: the durable path the gateway is compared with);
  * the standalone gateway with ``--workers`` worker processes (landing durably).

First an unmeasured warm-up round on each (``--warmup`` instances: Kafka's JIT, the page
cache, the generators' imports), then ``--rounds`` rounds, the order rotating each round
(the host is shared and its load drifts). Each round, on each server, fresh instances
send one GetTelemetrySubscriptions (zero id) and then one PushTelemetry (the golden
librdkafka consumer payload, zstd). Per round it prints the one-minute load average and,
per server:

  * Gets/s and pushes/s accepted, and errors by code;
  * CPU seconds per 10k Gets and per 10k pushes of every process and thread of the
    server (a gateway's workers and landing converters; all of Kafka's threads), and
    for Kafka the same without its JIT compiler threads (C1/C2), reported apart.

Then the medians and, per round and as their median, the ratios gateway / each Kafka.
``--pin`` puts every server thread on core 0 and the load generators on the other
cores, so the servers compete for one core as in production and not with the load::

    python bench/kafka_compare.py --instances 15000 --rounds 4 --pin
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cpu import pin_threads, thread_cpu, tree_cpu, tree_pids
from ingest import FIXTURE, run_generators, serving, totals
from peers.kafka import KafkaBroker, Plugin, clientmetrics_plugin, minimal_plugin
from tests.frames import recv_frame

from clientmetrics.wire import RequestHeader, decode_response, encode_request, request_type

#: kafka-server-start.sh's KAFKA_HEAP_OPTS and KAFKA_JVM_PERFORMANCE_OPTS.
KAFKA_JVM = (
    "-Xmx1G",
    "-Xms1G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
SUBSCRIPTION = {"metrics": "org.apache.kafka.", "interval.ms": "60000"}


def kafka_sees_subscription(port: int) -> bool:
    """A Get with a fresh id asks for metrics once Kafka applied the subscription."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        body = request_type(71, 0)(client_instance_id=uuid.uuid4())
        sock.sendall(encode_request(RequestHeader(71, 0, 1, "bench-probe"), body))
        _, answer = decode_response(71, 0, recv_frame(sock))
    return bool(answer.requested_metrics)


@contextlib.contextmanager
def kafka_serving(workdir: Path, plugins: list[Plugin]) -> Iterator[tuple[int, list[int]]]:
    """Kafka 4.4.0 with ``plugins`` and the bench subscription applied: its port and pid."""
    from tests.kadmin import set_subscription

    broker = KafkaBroker(workdir, jvm_options=KAFKA_JVM, plugins=plugins).start()
    try:
        print(broker.summary(), flush=True)
        set_subscription(broker.bootstrap, "bench", SUBSCRIPTION)
        deadline = time.monotonic() + 30
        while not kafka_sees_subscription(broker.port):
            if time.monotonic() > deadline:
                raise RuntimeError("Kafka did not apply the bench subscription")
            time.sleep(0.2)
        assert broker.proc is not None
        yield broker.port, [broker.proc.pid]
    finally:
        broker.stop()


#: CPU seconds so far of one server: "all" its processes and threads, "jit" Kafka's
#: compiler threads among them (0 for the gateway).
CpuReader = Callable[[], dict[str, float]]


def gateway_cpu(pid: int) -> CpuReader:
    return lambda: {"all": tree_cpu(pid), "jit": 0.0}


def kafka_cpu(pid: int) -> CpuReader:
    def read() -> dict[str, float]:
        threads = thread_cpu(pid)
        return {"all": threads["all"], "jit": threads["jit"]}

    return read


def one_round(
    label: str, port: int, cpu: CpuReader, instances: int, args: argparse.Namespace, payload: bytes
) -> dict[str, float]:
    """Fresh instances Get then push once each: rates, errors and CPU per 10k."""
    marks: list[dict[str, float]] = [cpu()]
    results = run_generators(
        port, args.generators, args.connections, instances, args.window, args.rate,
        payload, "push", between=lambda: marks.append(cpu()),
    )  # fmt: skip
    marks.append(cpu())
    gets, get_s, get_errors, _ = totals(results, "get")
    pushes, push_s, push_errors, _ = totals(results, "push")

    def per_10k(phase: int, count: int, kind: str) -> float:
        used = marks[phase + 1][kind] - marks[phase][kind]
        return used / max(count, 1) * 10_000

    row = {
        "gets/s": gets / get_s if get_s else 0.0,
        "pushes/s": pushes / push_s if push_s else 0.0,
        "cpu/10k gets": per_10k(0, gets, "all"),
        "cpu/10k pushes": per_10k(1, pushes, "all"),
        "jit/10k gets": per_10k(0, gets, "jit"),
        "jit/10k pushes": per_10k(1, pushes, "jit"),
        "errors": float(sum(get_errors.values()) + sum(push_errors.values())),
    }
    jit = (
        f" (JIT threads {row['jit/10k gets']:.2f}, {row['jit/10k pushes']:.2f})"
        if row["jit/10k gets"] or row["jit/10k pushes"]
        else ""
    )
    print(
        f"  {label:<34} Gets {gets:>6} {row['gets/s']:>8,.0f}/s errors {get_errors}  "
        f"pushes {pushes:>6} {row['pushes/s']:>8,.0f}/s errors {push_errors}  "
        f"CPU s per 10k: Gets {row['cpu/10k gets']:.2f}, pushes {row['cpu/10k pushes']:.2f}"
        f"{jit}",
        flush=True,
    )
    return row


FIGURES = ("gets/s", "pushes/s", "cpu/10k gets", "cpu/10k pushes")
KAFKA_NOOP, KAFKA_PLUGIN = "Kafka 4.4.0, no-op plugin", "Kafka 4.4.0, clientmetrics plugin"


def without_jit(row: dict[str, float], figure: str) -> float:
    """A CPU figure without the JIT compiler's threads (the same for the gateway)."""
    return row[figure] - row.get(figure.replace("cpu", "jit"), 0.0)


def report(rows: dict[str, list[dict[str, float]]], loads: list[float]) -> None:
    print(f"\nmedians over {len(loads)} rounds (load average per round: "
          + " ".join(f"{x:.2f}" for x in loads) + ")")  # fmt: skip
    for label, runs in rows.items():
        cells = ", ".join(f"{f} {statistics.median(r[f] for r in runs):,.2f}" for f in FIGURES)
        print(f"  {label:<34} {cells}")
    gateways = [label for label in rows if label.startswith("gateway")]
    for gateway in gateways:
        for kafka in (KAFKA_NOOP, KAFKA_PLUGIN):
            print(f"ratio {gateway} / {kafka}, per round (median):")
            pairs = list(zip(rows[gateway], rows[kafka], strict=True))
            for figure in FIGURES:
                ratios = [g[figure] / k[figure] if k[figure] else float("nan") for g, k in pairs]
                line = " ".join(f"{r:.2f}" for r in ratios)
                print(f"  {figure:<22} {line}  ({statistics.median(ratios):.2f})")
                if figure.startswith("cpu"):
                    ratios = [without_jit(g, figure) / without_jit(k, figure) for g, k in pairs]
                    line = " ".join(f"{r:.2f}" for r in ratios)
                    print(f"  {figure + ', no JIT':<22} {line}  ({statistics.median(ratios):.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--instances",
        type=int,
        default=15_000,
        help="instances per server per round (one Get, one push each); Kafka caches 16384",
    )
    ap.add_argument("--warmup", type=int, default=3_000, help="instances in the warm-up round")
    ap.add_argument("--rounds", type=int, default=3, help="measured rounds, order rotating")
    ap.add_argument("--workers", type=int, nargs="+", default=[1], help="gateway variants")
    ap.add_argument("--rate", type=float, default=1e9, help="target pushes/s (default: as fast)")
    ap.add_argument("--generators", type=int, default=2, help="load generator processes")
    ap.add_argument("--connections", type=int, default=20, help="connections per generator")
    ap.add_argument("--window", type=int, default=32, help="in-flight requests per connection")
    ap.add_argument("--pin", action="store_true", help="servers on core 0, generators elsewhere")
    args = ap.parse_args()  # fmt: skip

    payload = zstandard.ZstdCompressor().compress(FIXTURE.read_bytes())
    tmp = Path(tempfile.mkdtemp(prefix="cm-kafka-compare-"))
    print(
        f"machine: {os.cpu_count()} cores, shared with whatever else runs; generators "
        f"{args.generators} x {args.connections} connections x window {args.window}; "
        f"{args.instances:,} instances per round after {args.warmup:,} warm-up; payload "
        f"{len(payload)} B zstd ({FIXTURE.stat().st_size} B OTLP); pinned: {args.pin}",
        flush=True,
    )
    servers: dict[str, tuple[int, CpuReader, list[int]]] = {}
    try:
        with contextlib.ExitStack() as stack:
            for label, plugins in ((KAFKA_NOOP, [minimal_plugin()]),
                                   (KAFKA_PLUGIN, [clientmetrics_plugin()])):  # fmt: skip
                folder = tmp / label.split(", ")[1].replace(" ", "-")
                port, pids = stack.enter_context(kafka_serving(folder, plugins))
                servers[label] = (port, kafka_cpu(pids[0]), pids)
            for workers in args.workers:
                label = f"gateway, {workers} worker{'s' if workers > 1 else ''}"
                port, gw = stack.enter_context(serving(tmp / f"gateway-{workers}", workers))
                servers[label] = (port, gateway_cpu(gw.pid), tree_pids(gw.pid))
            if args.pin:
                for _, _, pids in servers.values():
                    pin_threads(pids, 0)
                os.sched_setaffinity(0, set(range(1, os.cpu_count() or 2)))
            print("warm-up round (not measured):", flush=True)
            for label, (port, cpu, _) in servers.items():
                one_round(label, port, cpu, args.warmup, args, payload)
            rows: dict[str, list[dict[str, float]]] = {label: [] for label in servers}
            loads, labels = [], list(servers)
            for i in range(args.rounds):
                loads.append(os.getloadavg()[0])
                print(f"round {i + 1}, load average {loads[-1]:.2f}:", flush=True)
                for label in labels[i % len(labels) :] + labels[: i % len(labels)]:
                    port, cpu, _ = servers[label]
                    rows[label].append(one_round(label, port, cpu, args.instances, args, payload))
            report(rows, loads)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
