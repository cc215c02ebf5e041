"""The broker plugin's cost: a Kafka 4.4 broker with it against the same broker with a no-op one.

Each round starts a fresh broker with the launcher's no-op telemetry plugin, drives it with
the project's load simulator (``clientmetrics simulate``: real KIP-714 clients, half
producers and half consumers, pushing every ``--interval-ms``) for ``--warmup`` seconds
(the JIT compiles the hot paths; not measured), then for ``--duration`` seconds while the
broker's CPU time is read per thread from /proc; then the same with the clientmetrics
plugin (its records to the broker itself, the default, or with ``--target other`` to a
second broker), and with ``--baseline-jar`` also an earlier build of the plugin (with its
own defaults) in the same rounds. The order rotates each round, JMX is on for every
variant, and the simulator runs in ``--processes`` processes so the offered load is
reached (a note says when it was not); medians and per-round ratios are compared:

    python bench/broker_plugin.py --clients 60 --duration 30 --rounds 3 --target other

Prints pushes/s answered, p99 push latency, and the broker's CPU per 1000 pushes: all its
threads, the same without the JIT compiler's threads (which still compile for a while
after the warm-up on a busy machine: a one-off cost that blurs the per-push one), and the
plugin's own threads (its forwarder and its producer's network thread). Then the ratios,
and the plugin's counters (read over JMX once its queue drained).
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from peers.kafka import KafkaBroker, Plugin, clientmetrics_plugin, minimal_plugin  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu import thread_cpu  # noqa: E402

COUNTERS = "kafka.server:type=client-metrics-plugin"
NOOP, PLUGIN, BASELINE = "no-op plugin", "clientmetrics plugin", "baseline plugin"
#: The one-minute load average as each round began.
LOADS: list[float] = []


def simulate(bootstrap: str, args: argparse.Namespace, seconds: float) -> dict[str, Any]:
    proc = subprocess.run(
        [
            str(Path(sys.executable).with_name("clientmetrics")),
            "simulate",
            *("--bootstrap-server", bootstrap, "--clients", str(args.clients)),
            *("--interval-ms", str(args.interval_ms), "--duration", str(seconds)),
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


def plugins(name: str, args: argparse.Namespace, target: KafkaBroker | None) -> list[Plugin]:
    if name == NOOP:
        return [minimal_plugin()]
    props = dict(args.set)
    if target is not None:
        props["bootstrap.servers"] = target.bootstrap
    ours = clientmetrics_plugin(props)
    if name == BASELINE:
        return [Plugin((args.baseline_jar,), ours.class_name, ours.properties)]
    return [ours]


def one_run(
    work: Path, name: str, args: argparse.Namespace, target: KafkaBroker | None
) -> dict[str, Any]:
    folder = work / name.replace(" ", "-")
    broker = KafkaBroker(folder, plugins=plugins(name, args, target), jmx=True)  # both alike
    broker.start()
    try:
        assert broker.proc is not None
        time.sleep(args.settle)  # let start-up work (topic creation) pass
        if args.warmup > 0:
            simulate(broker.bootstrap, args, args.warmup)
        began = thread_cpu(broker.proc.pid)
        report = simulate(broker.bootstrap, args, args.duration)
        ended = thread_cpu(broker.proc.pid)
        counters = drained(broker) if name != NOOP else {}
    finally:
        broker.stop()
        shutil.rmtree(folder, ignore_errors=True)
    pushes = max(report["pushes"], 1)
    cpu = {k: ended[k] - began[k] for k in ended}
    return {
        "pushes_per_s": report["pushes_per_s"],
        "p99_ms": report["latency_ms"]["p99"],
        "errors": report["errors"],
        "disabled": report["disabled_clients"],
        "cpu_s": cpu["all"],
        "all": cpu["all"] * 1e6 / pushes,
        "no_jit": (cpu["all"] - cpu["jit"]) * 1e6 / pushes,
        "plugin": cpu["plugin"] * 1e6 / pushes,
        "counters": counters,
    }


def line(name: str, runs: list[dict[str, Any]]) -> dict[str, float]:
    keys = ("pushes_per_s", "p99_ms", "cpu_s", "all", "no_jit", "plugin")
    med = {k: statistics.median(r[k] for r in runs) for k in keys}
    each = ", ".join(f"{r['pushes_per_s']:.0f}" for r in runs)
    print(
        f"{name:<21} {med['pushes_per_s']:5.0f} pushes/s (rounds: {each})  "
        f"p99 {med['p99_ms']:6.1f} ms  CPU-ms per 1000 pushes: {med['all']:6.1f} all threads, "
        f"{med['no_jit']:6.1f} without the JIT's, {med['plugin']:5.1f} the plugin's own"
    )
    errors = [r["errors"] for r in runs if r["errors"]] + [
        r["disabled"] for r in runs if r["disabled"]
    ]
    if errors:
        print(f"{'':<21} errors by code / disabled clients: {errors}")
    for run in runs:
        c = run["counters"]
        if c:
            print(
                f"{'':<21} plugin: received {c.get('received-total', 0):.0f}, sent "
                f"{c.get('sent-total', 0):.0f}, dropped {c.get('dropped-total', 0):.0f}, "
                f"failed {c.get('failed-total', 0):.0f}"
            )
    return med


def ratios(name: str, base: dict[str, float], ours: dict[str, float]) -> None:
    print(f"{name}: pushes/s {ours['pushes_per_s'] / base['pushes_per_s']:.3f} (plugin / no-op)")
    print(
        f"{name}: CPU per push {base['all'] / ours['all']:.3f} all threads, "
        f"{base['no_jit'] / ours['no_jit']:.3f} without the JIT's (no-op / plugin)"
    )


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--clients", type=int, default=60)
    parser.add_argument("--interval-ms", type=int, default=100)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds of load, unmeasured")
    parser.add_argument(
        "--processes", type=int, default=2,
        help="simulator processes (one reaches ~300 pushes/s on a busy core)",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settle", type=float, default=3.0)
    parser.add_argument("--target", choices=("self", "other"), default="self")
    parser.add_argument(
        "--baseline-jar",
        type=Path,
        help="an earlier build of the plugin jar, measured in the same rounds",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        type=lambda text: tuple(text.split("=", 1)),
        metavar="NAME=VALUE",
        help="a plugin setting (without clientmetrics.), e.g. --set linger.ms=20",
    )
    return parser.parse_args(argv)


def main() -> int:
    args = parse()
    work = Path(tempfile.mkdtemp(prefix="bench-plugin-"))
    target = None
    names = [NOOP, PLUGIN, *([BASELINE] if args.baseline_jar else [])]
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    try:
        if args.target == "other":
            target = KafkaBroker(work / "target", plugins=[]).start()
        for i in range(args.rounds):
            LOADS.append(os.getloadavg()[0])
            for name in names[i % len(names) :] + names[: i % len(names)]:  # order rotates
                results[name].append(one_run(work, name, args, target))
    finally:
        if target is not None:
            target.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"{args.clients} simulated clients pushing every {args.interval_ms} ms, "
        f"{args.warmup:.0f} s warm-up then {args.duration:.0f} s measured, {args.rounds} rounds "
        f"each, records to {'the broker itself' if args.target == 'self' else 'a second broker'}, "
        f"load average {os.getloadavg()[0]:.1f} at the end"
    )
    offered = args.clients * 1000 / args.interval_ms
    print(f"offered {offered:.0f} pushes/s; load average per round: "
          + " ".join(f"{x:.2f}" for x in LOADS))  # fmt: skip
    medians = {name: line(name, runs) for name, runs in results.items()}
    for name in names[1:]:
        ratios(name, medians[NOOP], medians[name])
        pairs = list(zip(results[NOOP], results[name], strict=True))
        per_round = " ".join(f"{b['all'] / o['all']:.2f}" for b, o in pairs)
        print(f"{name}: CPU per push no-op / plugin per round: {per_round}")
    reached = min(r["pushes_per_s"] for runs in results.values() for r in runs)
    if reached < 0.9 * offered:
        print(f"note: a round reached {reached:.0f} of the {offered:.0f} pushes/s offered: "
              "the simulator, not the broker, set the rate (raise --processes)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
