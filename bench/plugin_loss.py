"""What a broker with the plugin loses when it is SIGKILLed: pushes taken, never on the topic.

Run by hand: ``.venv/bin/python bench/plugin_loss.py [--linger 500 0] [--rounds 2]``.

A target broker holds the plugin's topic; each round starts a fresh Kafka 4.4 broker with
the clientmetrics plugin (its records to the target, ``clientmetrics.linger.ms`` as given)
and the launcher's recording plugin beside it (the witness: every push Kafka hands its
plugins, one line each, written before the push is answered). The project's simulator
pushes at it for ``--load`` seconds, then the broker is SIGKILLed mid-load. Lost = pushes
the witness saw minus records on the target's topic, counted per client instance (the
records are a subset: the plugin writes nothing it was not handed). The window is the lost
pushes over the push rate the witness saw: how many seconds of pushes went with the broker.
Docs: docs/kafka-plugin.md, "What a broker that dies loses".
"""

from __future__ import annotations

import argparse
import base64
import collections
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from confluent_kafka import Consumer  # noqa: E402
from peers.kafka import KafkaBroker, clientmetrics_plugin, minimal_plugin  # noqa: E402


def witnessed(path: Path) -> collections.Counter[str]:
    """Pushes per instance (canonical UUID) the witness wrote; a line cut by the kill skipped."""
    counts: collections.Counter[str] = collections.Counter()
    for line in path.read_text(errors="replace").splitlines():
        try:
            push = json.loads(line)
        except json.JSONDecodeError:
            continue
        counts[str(uuid.UUID(bytes=base64.urlsafe_b64decode(push["instance_id"] + "==")))] += 1
    return counts


def on_topic(bootstrap: str, topic: str, quiet_s: float = 5.0) -> collections.Counter[str]:
    """Records per key on ``topic``, read until nothing new came for ``quiet_s``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"loss-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.metrics.push": False,
            "log_level": 3,
        }
    )
    consumer.subscribe([topic])
    counts: collections.Counter[str] = collections.Counter()
    last = time.monotonic()
    try:
        while time.monotonic() - last < quiet_s:
            for message in consumer.consume(500, 0.5):
                if message.error() is None and message.key() is not None:
                    counts[bytes(message.key()).decode()] += 1
                    last = time.monotonic()
    finally:
        consumer.close()
    return counts


def one_round(
    work: Path, target: KafkaBroker, linger: int, args: argparse.Namespace
) -> dict[str, float]:
    topic = f"loss-{linger}-{uuid.uuid4().hex[:8]}"
    witness = work / f"{topic}.jsonl"
    plugin = clientmetrics_plugin(
        {"bootstrap.servers": target.bootstrap, "topic": topic, "linger.ms": str(linger)}
    )
    broker = KafkaBroker(work / topic, plugins=[plugin, minimal_plugin(witness)])
    broker.start()
    load = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("clientmetrics")),
            "simulate",
            *("--bootstrap-server", broker.bootstrap, "--clients", str(args.clients)),
            *("--interval-ms", str(args.interval_ms), "--duration", str(args.load + 60)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        began = time.monotonic()
        time.sleep(args.load)  # the load runs meanwhile: a bench, not a test
        broker.kill()
        elapsed = time.monotonic() - began
    finally:
        load.terminate()
        try:
            load.wait(30)
        except subprocess.TimeoutExpired:  # its goodbye to a dead broker takes too long
            load.kill()
            load.wait()
        broker.stop()
    seen = witnessed(witness)
    landed = on_topic(target.bootstrap, topic)
    extra = sum(max(0, landed[k] - seen[k]) for k in landed)
    lost = sum(max(0, seen[k] - landed[k]) for k in seen)
    pushes = sum(seen.values())
    rate = pushes / elapsed
    return {
        "pushes": pushes,
        "lost": lost,
        "extra": extra,
        "rate": rate,
        "window_ms": lost / rate * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--linger", type=int, nargs="+", default=[500, 0], help="linger.ms values")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--clients", type=int, default=40)
    parser.add_argument("--interval-ms", type=int, default=100)
    parser.add_argument("--load", type=float, default=15.0, help="seconds of load before the kill")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="plugin-loss-") as tmp:
        work = Path(tmp)
        target = KafkaBroker(work / "target").start()
        try:
            print(
                f"{args.clients} simulated clients pushing every {args.interval_ms} ms, "
                f"the broker SIGKILLed after {args.load:g} s, {args.rounds} rounds per linger.ms"
            )
            for linger in args.linger:
                runs = [one_round(work, target, linger, args) for _ in range(args.rounds)]
                lost = ", ".join(f"{r['lost']:.0f} of {r['pushes']:.0f}" for r in runs)
                windows = ", ".join(f"{r['window_ms']:.0f}" for r in runs)
                window = statistics.median(r["window_ms"] for r in runs)
                rate = statistics.median(r["rate"] for r in runs)
                extra = sum(r["extra"] for r in runs)
                print(
                    f"linger.ms={linger:<5} lost {lost}; window {window:.0f} ms median "
                    f"(rounds: {windows}) at {rate:.0f} pushes/s; "
                    f"records not witnessed: {extra:.0f}",
                    flush=True,
                )
        finally:
            target.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
