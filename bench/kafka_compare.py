"""The gateway beside Apache Kafka 4.4.0: the same KIP-714 load, same run, same machine.

Prints, for Kafka 4.4.0 (KRaft, one node, with the launcher's minimal telemetry plugin,
JVM flags as ``kafka-server-start.sh`` sets them) and for the standalone gateway with 1
and 2 worker processes, each on a fresh server:

  * GetTelemetrySubscriptions/s (every instance's first Get, zero id);
  * PushTelemetry/s accepted (each instance pushes once right after its Get: the golden
    librdkafka consumer payload, zstd; the gateway lands it durably, Kafka decompresses
    it and hands it to the plugin);
  * CPU seconds of the server processes (``/proc/<pid>/stat`` utime + stime, children
    included) per 10k Gets and per 10k pushes;
  * the ratios gateway / Kafka.

The load generator (``loadgen.py``, via ``ingest.py``) runs in its own processes on the
same cores. Every server gets a warm-up round first (Kafka's JIT; equal for both)::

    python bench/kafka_compare.py --instances 15000
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ingest import FIXTURE, child_pids, run_generators, serving, totals
from peers.kafka import KafkaBroker
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
_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime (and reaped children's) of ``pids``, from /proc/<pid>/stat."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime
    return total / _TICKS


def kafka_sees_subscription(port: int) -> bool:
    """A Get with a fresh id asks for metrics once Kafka applied the subscription."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        body = request_type(71, 0)(client_instance_id=uuid.uuid4())
        sock.sendall(encode_request(RequestHeader(71, 0, 1, "bench-probe"), body))
        _, answer = decode_response(71, 0, recv_frame(sock))
    return bool(answer.requested_metrics)


@contextlib.contextmanager
def kafka_serving(workdir: Path) -> Iterator[tuple[int, list[int]]]:
    """Kafka 4.4.0 with the bench subscription applied: its port and its pid."""
    from tests.kadmin import set_subscription

    broker = KafkaBroker(workdir, jvm_options=KAFKA_JVM).start()
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


def measure(
    label: str, port: int, pids_of: Any, args: argparse.Namespace, payload: bytes
) -> dict[str, float]:
    """A warm-up round, then the measured one: rates, errors and CPU per 10k."""
    run_generators(port, args.generators, args.connections, args.warmup, args.window,
                   args.rate, payload, "push")  # fmt: skip
    marks: list[float] = [cpu_seconds(pids_of())]
    results = run_generators(
        port, args.generators, args.connections, args.instances, args.window, args.rate,
        payload, "push", between=lambda: marks.append(cpu_seconds(pids_of())),
    )  # fmt: skip
    marks.append(cpu_seconds(pids_of()))
    gets, get_s, get_errors, _ = totals(results, "get")
    pushes, push_s, push_errors, _ = totals(results, "push")
    row = {
        "gets/s": gets / get_s if get_s else 0.0,
        "pushes/s": pushes / push_s if push_s else 0.0,
        "cpu/10k gets": (marks[1] - marks[0]) / max(gets, 1) * 10_000,
        "cpu/10k pushes": (marks[2] - marks[1]) / max(pushes, 1) * 10_000,
    }
    print(
        f"{label:<24} Gets {gets:>6} ok {row['gets/s']:>8,.0f}/s errors {get_errors}  "
        f"pushes {pushes:>6} ok {row['pushes/s']:>8,.0f}/s errors {push_errors}  "
        f"CPU s per 10k: Gets {row['cpu/10k gets']:.2f}, pushes {row['cpu/10k pushes']:.2f}",
        flush=True,
    )
    return row


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--instances",
        type=int,
        default=15_000,
        help="instances (one Get, one push each); Kafka caches 16384",
    )
    ap.add_argument("--warmup", type=int, default=3_000, help="instances in the warm-up round")
    ap.add_argument("--rate", type=float, default=1e9, help="target pushes/s (default: as fast)")
    ap.add_argument("--generators", type=int, default=2, help="load generator processes")
    ap.add_argument("--connections", type=int, default=20, help="connections per generator")
    ap.add_argument("--window", type=int, default=32, help="in-flight requests per connection")
    args = ap.parse_args()  # fmt: skip

    payload = zstandard.ZstdCompressor().compress(FIXTURE.read_bytes())
    tmp = Path(tempfile.mkdtemp(prefix="cm-kafka-compare-"))
    print(
        f"machine: {os.cpu_count()} cores, shared with whatever else runs; generators "
        f"{args.generators} x {args.connections} connections x window {args.window}; "
        f"{args.instances:,} instances after {args.warmup:,} warm-up; payload {len(payload)} B "
        f"zstd ({FIXTURE.stat().st_size} B OTLP)",
        flush=True,
    )
    rows: dict[str, dict[str, float]] = {}
    try:
        with kafka_serving(tmp / "kafka") as (port, pids):
            rows["kafka"] = measure("Kafka 4.4.0 + plugin", port, lambda: pids, args, payload)
        for workers in (1, 2):
            with serving(tmp / f"gateway-{workers}", workers) as (port, gw):
                label = f"gateway, {workers} worker{'s' if workers > 1 else ''}"
                rows[label] = measure(label, port, lambda gw=gw: child_pids(gw.pid), args, payload)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    kafka = rows.pop("kafka")
    for label, row in rows.items():
        print(
            f"ratio {label} / Kafka: Gets/s {row['gets/s'] / kafka['gets/s']:.2f}, "
            f"pushes/s {row['pushes/s'] / kafka['pushes/s']:.2f}, "
            f"CPU per 10k Gets {row['cpu/10k gets'] / kafka['cpu/10k gets']:.2f}, "
            f"CPU per 10k pushes {row['cpu/10k pushes'] / kafka['cpu/10k pushes']:.2f}"
        )


if __name__ == "__main__":
    main()
