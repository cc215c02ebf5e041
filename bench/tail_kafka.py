"""``tail_latency.py --target kafka|both``: the same open-loop push load on Apache Kafka
4.4 with the project's broker plugin, alone or taking turns with the gateway.

Both servers run for the whole bench on the same core (``--target both``: every
thread of Kafka and the gateway's worker on the first core; the gateway's landing
converter moves itself off the worker's core, as in production, and runs beside
the generators), each with its own load generator on the second core, and the
same subscription (every standard metric, ``interval.ms`` 1000). A warm-up phase
on each (``--warmup-seconds`` at the first rate: Kafka's JIT, the page cache) is
not measured. Then for each of ``--rates``, ``--rounds`` rounds, the order
rotating, each an open-loop phase of ``--seconds`` per server. Per round and
server: p50 / p99 from each push's due time, the answers by error code, the load
average, and the CPU per push of every thread of the server, with Kafka's JIT
compiler threads and the gateway's child processes (the converter) also apart.
Per rate: the per-round ratios gateway / Kafka of the p99 and of the CPU per push,
the p50 difference, and their medians.

Kafka keeps 16,384 client instances: the default is 15,000 instances here.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu import cpu_seconds, pin_threads, thread_cpu, tree_cpu
from peers.kafka import clientmetrics_plugin
from ports import KafkaBroker
from tail_latency import Generator, cores, gateway, percentile, subscribe

#: CPU seconds so far: (all threads, of which apart: Kafka's JIT compiler threads, or
#: the gateway's child processes, its landing converter).
CpuReader = Callable[[], tuple[float, float]]


@contextlib.contextmanager
def kafka(core: int | None, work: Path) -> Iterator[tuple[int, CpuReader]]:
    """Kafka 4.4 with the project's plugin, pinned to ``core``: its port and CPU reader."""
    broker = KafkaBroker(work / "kafka", plugins=[clientmetrics_plugin()]).start()
    try:
        assert broker.proc is not None
        pid = broker.proc.pid
        if core is not None:
            pin_threads([pid], core)
        subscribe(broker.port)

        def cpu() -> tuple[float, float]:
            threads = thread_cpu(pid)
            return threads["all"], threads["jit"]

        yield broker.port, cpu
    finally:
        broker.stop()


@contextlib.contextmanager
def our_gateway(core: int | None, work: Path) -> Iterator[tuple[int, CpuReader]]:
    with gateway(core, work / "gateway") as (port, _, proc):

        def cpu() -> tuple[float, float]:
            whole = tree_cpu(proc.pid)
            return whole, whole - cpu_seconds([proc.pid])

        yield port, cpu


def phase(gen: Generator, cpu: CpuReader, rate: float, seconds: float) -> dict[str, float]:
    before = cpu()
    latencies, codes, _ = gen.open_loop(rate, seconds)
    after = cpu()
    answered = max(len(latencies), 1)
    return {
        "p50": percentile(latencies, 0.5),
        "p99": percentile(latencies, 0.99),
        "errors": float(sum(n for code, n in codes.items() if code != 0)),
        "throttled": float(codes.get(89, 0)),
        "cpu/push ms": (after[0] - before[0]) / answered * 1000,
        "apart/push ms": (after[1] - before[1]) / answered * 1000,
    }


def line(label: str, row: dict[str, float]) -> str:
    what = "JIT" if label.startswith("kafka") else "children"
    jit = f" ({what} {row['apart/push ms']:.3f})"
    return (
        f"    {label:<8} p50 {row['p50']:8.2f} ms  p99 {row['p99']:8.2f} ms  errors "
        f"{row['errors']:.0f} (89: {row['throttled']:.0f})  CPU per push "
        f"{row['cpu/push ms']:.3f} ms{jit}"
    )


def ratios(rows: dict[str, list[dict[str, float]]]) -> None:
    pairs = list(zip(rows["gateway"], rows["kafka"], strict=True))

    def show(name: str, values: list[float], unit: str = "") -> None:
        cells = " ".join(f"{v:.2f}" for v in values)
        print(f"    {name:<34} {cells}  (median {statistics.median(values):.2f}{unit})")

    show("p99 gateway / Kafka", [g["p99"] / k["p99"] for g, k in pairs])
    show("p50 gateway - Kafka", [g["p50"] - k["p50"] for g, k in pairs], " ms")
    show("CPU per push gateway / Kafka", [g["cpu/push ms"] / k["cpu/push ms"] for g, k in pairs])
    no_jit = [g["cpu/push ms"] / (k["cpu/push ms"] - k["apart/push ms"]) for g, k in pairs]
    show("CPU per push gateway / Kafka no JIT", no_jit)


def run(args: argparse.Namespace, work: Path) -> None:
    """The ``--target kafka`` or ``--target both`` bench."""
    server_core, gen_core = cores()
    rates = args.rates or [1000.0, 2000.0, 3000.0]
    print(
        f"cores: servers {server_core}, generators {gen_core} (of {os.cpu_count()}); load "
        f"average {os.getloadavg()[0]:.1f}; {args.instances:,} instances on "
        f"{args.connections} connections each; rates {rates}; {args.rounds} rounds of "
        f"{args.seconds:.0f} s per rate and server after {args.warmup_seconds:.0f} s warm-up"
    )
    with contextlib.ExitStack() as stack:
        servers: dict[str, tuple[Generator, CpuReader]] = {}
        starts = {"kafka": kafka, "gateway": our_gateway}
        for label in ("kafka", "gateway") if args.target == "both" else ("kafka",):
            port, cpu = stack.enter_context(starts[label](server_core, work))
            gen = Generator(gen_core, port, args)
            stack.callback(gen.close)
            servers[label] = (gen, cpu)
        for gen, cpu in servers.values():
            phase(gen, cpu, rates[0], args.warmup_seconds)  # not measured
        labels = list(servers)
        for rate in rates:
            print(f"{rate:,.0f} pushes/s:")
            rows: dict[str, list[dict[str, float]]] = {label: [] for label in labels}
            for i in range(args.rounds):
                print(f"  round {i + 1}, load average {os.getloadavg()[0]:.2f}", flush=True)
                for label in labels[i % len(labels) :] + labels[: i % len(labels)]:
                    time.sleep(1.5)  # a quiet core between phases, and the push interval
                    gen, cpu = servers[label]
                    rows[label].append(phase(gen, cpu, rate, args.seconds))
                    print(line(label, rows[label][-1]), flush=True)
            for label in labels:
                medians = {k: statistics.median(r[k] for r in rows[label]) for k in rows[label][0]}
                print(line(f"{label}~", medians).replace("    ", "  median ", 1))
            if "gateway" in rows:
                ratios(rows)
