"""The broker plugin's cost: a Kafka 4.4 broker with it against the same broker with a no-op one.

Each round starts a fresh broker with the launcher's no-op telemetry plugin, drives it with
the project's load simulator (``clientmetrics simulate``: real KIP-714 clients, half
producers and half consumers, pushing every ``--interval-ms``) for ``--duration`` seconds,
and reads the broker's CPU time from /proc over that window; then the same with the
clientmetrics plugin (its records to the broker itself, the default, or with ``--target
other`` to a second broker). Rounds alternate the two, and the medians are compared:

    python bench/broker_plugin.py --clients 400 --interval-ms 100 --duration 20 --rounds 2

Prints pushes/s answered, p99 push latency, broker CPU seconds and CPU ms per 1000 pushes
for both, their ratios, the plugin's own counters (read over JMX once its queue drained)
and the CPU of the plugin's own threads (its forwarder and its producer's network thread,
from /proc: what the plugin costs the broker, less the copy on the request thread).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from peers.kafka import KafkaBroker, clientmetrics_plugin, minimal_plugin  # noqa: E402

COUNTERS = "kafka.server:type=client-metrics-plugin"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


#: Thread names (as /proc shows them, 15 characters) of the plugin's own threads.
PLUGIN_THREADS = ("clientmetrics-p", "kafka-producer-")


def plugin_cpu_seconds(pid: int) -> float:
    """CPU time of the plugin's forwarder and producer threads inside the broker so far."""
    total = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            if name.startswith(PLUGIN_THREADS):
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / TICKS
        except OSError:  # the thread ended meanwhile
            continue
    return total


def simulate(bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    proc = subprocess.run(
        [
            str(Path(sys.executable).with_name("clientmetrics")),
            "simulate",
            *("--bootstrap-server", bootstrap, "--clients", str(args.clients)),
            *("--interval-ms", str(args.interval_ms), "--duration", str(args.duration)),
            *("--processes", str(args.processes), "--seed", "7", "--json"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def drained(broker: KafkaBroker, timeout: float = 60) -> dict[str, float]:
    """The plugin's counters once everything it took is sent, dropped or failed."""
    deadline = time.monotonic() + timeout
    while True:
        c = broker.jmx_values(COUNTERS)
        if c["received-total"] == c["sent-total"] + c["dropped-total"] + c["failed-total"]:
            return c
        if time.monotonic() > deadline:
            return c
        time.sleep(1)


def one_run(
    work: Path, name: str, args: argparse.Namespace, target: KafkaBroker | None
) -> dict[str, Any]:
    if name == "no-op":
        plugins = [minimal_plugin()]
    else:
        props = dict(args.set)
        if target is not None:
            props["bootstrap.servers"] = target.bootstrap
        plugins = [clientmetrics_plugin(props)]
    broker = KafkaBroker(work / name, plugins=plugins, jmx=name != "no-op")
    broker.start()
    try:
        assert broker.proc is not None
        time.sleep(args.settle)  # let start-up work (topic creation, JIT) pass
        began = cpu_seconds(broker.proc.pid)
        plugin_began = plugin_cpu_seconds(broker.proc.pid)
        report = simulate(broker.bootstrap, args)
        cpu = cpu_seconds(broker.proc.pid) - began
        plugin_cpu = plugin_cpu_seconds(broker.proc.pid) - plugin_began
        counters = drained(broker) if name != "no-op" else {}
    finally:
        broker.stop()
        shutil.rmtree(work / name, ignore_errors=True)
    pushes = report["pushes"]
    return {
        "pushes": pushes,
        "pushes_per_s": report["pushes_per_s"],
        "p99_ms": report["latency_ms"]["p99"],
        "errors": report["errors"],
        "disabled": report["disabled_clients"],
        "cpu_s": cpu,
        "cpu_ms_per_1000": cpu * 1e6 / max(pushes, 1),
        "plugin_cpu_ms_per_1000": plugin_cpu * 1e6 / max(pushes, 1),
        "counters": counters,
    }


def line(name: str, runs: list[dict[str, Any]]) -> dict[str, float]:
    med = {k: statistics.median(r[k] for r in runs) for k in ("pushes_per_s", "p99_ms", "cpu_s")}
    med["cpu_ms_per_1000"] = statistics.median(r["cpu_ms_per_1000"] for r in runs)
    each = ", ".join(f"{r['pushes_per_s']:.0f}" for r in runs)
    print(
        f"{name:<22} {med['pushes_per_s']:8.0f} pushes/s (rounds: {each})  "
        f"p99 {med['p99_ms']:7.1f} ms  broker CPU {med['cpu_s']:6.1f} s  "
        f"{med['cpu_ms_per_1000']:6.1f} CPU-ms per 1000 pushes"
    )
    errors = [r["errors"] for r in runs if r["errors"]] + [
        r["disabled"] for r in runs if r["disabled"]
    ]
    if errors:
        print(f"{'':<22} errors by code / disabled clients: {errors}")
    return med


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=400)
    parser.add_argument("--interval-ms", type=int, default=100)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--target", choices=("self", "other"), default="self")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        type=lambda text: tuple(text.split("=", 1)),
        metavar="NAME=VALUE",
        help="a plugin setting (without clientmetrics.), e.g. --set producer.linger.ms=20",
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-plugin-"))
    target = None
    try:
        if args.target == "other":
            target = KafkaBroker(work / "target", plugins=[]).start()
        results: dict[str, list[dict[str, Any]]] = {"no-op": [], "clientmetrics": []}
        for _ in range(args.rounds):
            for name, runs in results.items():
                runs.append(one_run(work, name, args, target))
    finally:
        if target is not None:
            target.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"{args.clients} simulated clients pushing every {args.interval_ms} ms for "
        f"{args.duration:.0f} s, {args.rounds} rounds each, records to "
        f"{'the broker itself' if args.target == 'self' else 'a second broker'}"
    )
    base = line("no-op plugin", results["no-op"])
    ours = line("clientmetrics plugin", results["clientmetrics"])
    for run in results["clientmetrics"]:
        c = run["counters"]
        print(
            f"{'':<22} plugin: received {c.get('received-total', 0):.0f}, sent "
            f"{c.get('sent-total', 0):.0f}, dropped {c.get('dropped-total', 0):.0f}, "
            f"failed {c.get('failed-total', 0):.0f}; its own threads "
            f"{run['plugin_cpu_ms_per_1000']:.1f} CPU-ms per 1000 pushes"
        )
    rate = ours["pushes_per_s"] / base["pushes_per_s"]
    cost = base["cpu_ms_per_1000"] / ours["cpu_ms_per_1000"]
    print(f"ratio pushes/s (plugin / no-op)     = {rate:.3f}")
    print(f"ratio CPU per push (no-op / plugin) = {cost:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
