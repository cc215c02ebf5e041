"""Proxy-mode benchmark: librdkafka through the gateway vs directly against the broker.

One run starts a broker (Apache Kafka 4.4 from ``peers/kafka``, or Tansu) and a
gateway in proxy mode in front of it, then measures the same workloads both ways,
alternating which goes first each round after ``--warmup-rounds`` that are not
measured, and prints the medians, every figure's per-round ratio (gateway / the
same round's direct run), the load average at each round, and the CPU the
gateway's process and its children used (all threads):

  * produce throughput (MB/s, messages/s): one producer, ``--messages`` records
    of ``--size`` bytes, acks=all, no compression, from the first produce to flush;
  * consume throughput (MB/s, messages/s): one consumer reading ``--consume-messages``
    back (default: all of them on Kafka; 20k on Tansu, which serves fetches slowly);
  * produce latency p50/p99: one record at a time, produce to delivery report.

The aim (issue 21) is a throughput ratio of at least 0.95 and at most 0.5 ms added
p99. ``--profile out.txt`` runs the gateway under py-spy (``pip install py-spy``)
and writes its folded stacks, to see where the time goes. ``--baseline SRC`` adds
a second gateway running the code in SRC (another checkout's ``src``) to the same
rounds, in rotating order, to compare two versions of the gateway under the same
load. The gateways keep their subscriptions in the topic store (the proxy's
default, whose topic they guard) unless ``--store sqlite``. Usage:

    python bench/proxy.py --upstream kafka --messages 300000 --size 1000 --rounds 4
    python bench/proxy.py --baseline ../main/src --rounds 6
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, Producer
from cpu import tree_cpu
from ports import KafkaBroker, TansuProcess, free_port, stop_process, wait_port

BIN = Path(sys.executable).parent
TANSU_NODE = 111
KAFKA_NODE = 1  # the launcher's node.id


@dataclass(frozen=True)
class Figures:
    produce_mb_s: float
    produce_msg_s: float
    consume_mb_s: float
    consume_msg_s: float
    p50_ms: float
    p99_ms: float


def produce(bootstrap: str, topic: str, messages: int, size: int) -> tuple[float, float]:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "log_level": 3,
        }
    )
    producer.list_topics(topic, timeout=10)  # connect and create before the clock starts
    payload = os.urandom(size)
    started = time.perf_counter()
    for i in range(messages):
        while True:
            try:
                producer.produce(topic, value=payload, key=str(i).encode())
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120) != 0:
        raise RuntimeError("produce did not complete")
    elapsed = time.perf_counter() - started
    return messages * size / elapsed / 1e6, messages / elapsed


def consume(bootstrap: str, topic: str, messages: int, size: int) -> tuple[float, float]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "fetch.max.bytes": 52428800,
            "log_level": 3,
        }
    )
    consumer.subscribe([topic])
    first = consumer.poll(30)  # the group join is not part of the measurement
    if first is None or first.error():
        raise RuntimeError(f"no first message: {first and first.error()}")
    count = 1
    started = last = time.perf_counter()
    while count < messages:
        # Short waits: librdkafka's batch call holds a large batch back for its whole
        # timeout, which capped both sides at about 9 MB/s (consume(10000, 10)).
        batch = consumer.consume(100_000, 0.05)
        now = time.perf_counter()
        if batch:
            last = now
        elif now - last > 10:
            raise RuntimeError(f"consumer stalled at {count}/{messages}")
        count += sum(1 for m in batch if m.error() is None)
    elapsed = time.perf_counter() - started
    consumer.close()
    return (count - 1) * size / elapsed / 1e6, (count - 1) / elapsed


def latency(bootstrap: str, topic: str, samples: int) -> tuple[float, float]:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "log_level": 3}
    )
    producer.list_topics(topic, timeout=10)
    for _ in range(50):  # warm up connections and metadata
        producer.produce(topic, value=b"w")
        producer.flush(10)
    times: list[float] = []
    done: list[int] = []
    for i in range(samples):
        started = time.perf_counter()
        producer.produce(topic, value=b"x" * 100, on_delivery=lambda _e, _m: done.append(0))
        while len(done) <= i:
            producer.poll(0.0005)
        times.append((time.perf_counter() - started) * 1000)
    quantiles = statistics.quantiles(times, n=100)
    return quantiles[49], quantiles[98]


def measure(
    bootstrap: str, args: argparse.Namespace, label: str, cpu: Callable[[], float]
) -> tuple[Figures, float]:
    """The round's figures, and the CPU seconds ``cpu`` counted during its latency run."""
    topic = f"bench-{label}-{uuid.uuid4().hex[:6]}"
    p_mb, p_msg = produce(bootstrap, topic, args.messages, args.size)
    c_mb, c_msg = consume(bootstrap, topic, min(args.consume_messages, args.messages), args.size)
    before = cpu()
    p50, p99 = latency(bootstrap, f"{topic}-lat", args.latency_samples)
    return Figures(p_mb, p_msg, c_mb, c_msg, p50, p99), cpu() - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", choices=("kafka", "tansu"), default="kafka")
    parser.add_argument("--messages", type=int, default=300_000, help="produced per round")
    parser.add_argument(
        "--consume-messages", type=int, default=None, help="read back per round (default: all; "
        "20000 on Tansu)"
    )  # fmt: skip
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--latency-samples", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=4, help="alternating direct/gateway runs")
    parser.add_argument(
        "--warmup-rounds", type=int, default=1,
        help="rounds run first and not measured (JIT, page cache, connections)",
    )  # fmt: skip
    parser.add_argument("--profile", type=Path, help="py-spy's folded stacks of the gateway")
    parser.add_argument("--store", choices=("topic", "sqlite"), default="topic")
    parser.add_argument("--baseline", help="a second gateway runs the code in this src directory")
    args = parser.parse_args()
    if args.consume_messages is None:
        args.consume_messages = args.messages if args.upstream == "kafka" else 20_000

    workdir = Path(tempfile.mkdtemp(prefix="cm-bench-proxy-"))
    node = KAFKA_NODE if args.upstream == "kafka" else TANSU_NODE
    broker: KafkaBroker | TansuProcess
    if args.upstream == "kafka":
        broker = KafkaBroker(workdir / "kafka", plugins=()).start()
    else:
        broker = TansuProcess().start()
    gateways: dict[str, tuple[subprocess.Popen[bytes], str]] = {}
    profiler = None
    try:
        sources = {"gateway": None, **({"baseline": args.baseline} if args.baseline else {})}
        for label, source in sources.items():
            gateways[label] = start_gateway(args, broker.bootstrap, workdir / label, node, source)
        if args.profile is not None:
            profiler = subprocess.Popen(
                [str(BIN / "py-spy"), "record", "--format", "raw", "--rate", "500", "--nonblocking",
                 "--pid", str(gateways["gateway"][0].pid), "-o", str(args.profile)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        targets = {"direct": broker.bootstrap, **{k: v[1] for k, v in gateways.items()}}
        pids = {label: process.pid for label, (process, _) in gateways.items()}
        run_rounds(args, targets, pids, args.warmup_rounds)  # warm-up: not measured
        runs, cpu, latency_cpu = run_rounds(args, targets, pids, args.rounds)
        report(args, runs)
        # Noise-free figure on a shared host: what the proxy itself costs per GB moved
        # (each message is produced once and consumed once through it).
        moved = args.messages + min(args.consume_messages, args.messages)
        moved_gb = args.rounds * moved * args.size / 1e9
        for label in pids:
            # The proxy's own cost per request, free of the host's scheduling noise: a
            # lower bound of the latency it adds (request and response cross it once).
            per_request = latency_cpu[label] / (args.rounds * args.latency_samples) * 1e6
            print(f"{label} CPU: {cpu[label]:.2f} s for {moved_gb:.2f} GB through it "
                  f"({cpu[label] / moved_gb:.2f} s/GB, latency runs included); "
                  f"{per_request:.0f} us per produce round trip (latency runs)")  # fmt: skip
    finally:
        if profiler is not None:  # py-spy writes its file on SIGINT
            profiler.send_signal(signal.SIGINT)
            profiler.wait(60)
        for process, _ in gateways.values():
            stop_process(process, 30)
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def start_gateway(
    args: argparse.Namespace, upstream: str, data_dir: Path, node: int, source: str | None
) -> tuple[subprocess.Popen[bytes], str]:
    """A proxy in front of ``upstream`` (the code in ``source`` when given); its bootstrap."""
    port, base = free_port(), _port_block(node)
    command = [
        str(BIN / "clientmetrics"), "serve", "--listen", f"127.0.0.1:{port}",
        "--upstream", upstream, "--broker-port-base", str(base), "--store", args.store,
        "--data-dir", str(data_dir), "--log-level", "warning",
    ]  # fmt: skip
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(Path(source).resolve())
    gateway = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    wait_port(port)
    wait_port(base + node)
    return gateway, f"127.0.0.1:{port}"


def run_rounds(
    args: argparse.Namespace, targets: dict[str, str], pids: dict[str, int], rounds: int
) -> tuple[dict[str, list[Figures]], dict[str, float], dict[str, float]]:
    """Every target once a round, the order rotating (the host is shared, load drifts
    during a run); each gateway's CPU seconds in all, and in its latency runs. Each
    round's one-minute load average is kept in ``LOADS``."""
    runs: dict[str, list[Figures]] = {label: [] for label in targets}
    cpu = dict.fromkeys(pids, 0.0)
    latency_cpu = dict.fromkeys(pids, 0.0)
    labels = list(targets)
    LOADS.clear()
    for i in range(rounds):
        LOADS.append(os.getloadavg()[0])
        for label in labels[i % len(labels) :] + labels[: i % len(labels)]:
            pid = pids.get(label)
            if pid is None:
                runs[label].append(measure(targets[label], args, label, lambda: 0.0)[0])
                continue
            before = tree_cpu(pid)
            figures, during_latency = measure(
                targets[label], args, label, functools.partial(tree_cpu, pid)
            )
            runs[label].append(figures)
            cpu[label] += tree_cpu(pid) - before
            latency_cpu[label] += during_latency
    return runs, cpu, latency_cpu


#: The one-minute load average at the start of each measured round.
LOADS: list[float] = []


def _port_block(node: int) -> int:
    """A base port such that base + the broker's node id is free."""
    for _ in range(100):
        candidate = free_port()
        base = candidate - node
        if base > 1024:
            return base
    raise RuntimeError("no port block")


def median(runs: list[Figures]) -> Figures:
    """The median of every figure over the rounds."""
    return Figures(
        *(statistics.median(getattr(r, f) for r in runs) for f in Figures.__dataclass_fields__)
    )


def report(args: argparse.Namespace, runs: dict[str, list[Figures]]) -> None:
    d = median(runs["direct"])
    gateways = [label for label in runs if label != "direct"]
    print(
        f"proxy benchmark ({args.upstream}, {args.store} store): {args.messages} x {args.size} B "
        f"produced, {args.consume_messages} consumed, {args.latency_samples} latency samples, "
        f"median of {args.rounds} rounds, load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'':24}{'direct':>12}" + "".join(f"{g:>12}{'ratio':>8}" for g in gateways))
    medians = {g: median(runs[g]) for g in gateways}
    for name, field in (
        ("produce MB/s", "produce_mb_s"),
        ("produce msgs/s", "produce_msg_s"),
        ("consume MB/s", "consume_mb_s"),
        ("consume msgs/s", "consume_msg_s"),
    ):
        direct = getattr(d, field)
        cells = "".join(
            f"{getattr(m, field):12.1f}{getattr(m, field) / direct:8.3f}" for m in medians.values()
        )
        print(f"{name:24}{direct:12.1f}{cells}")
    for name, field in (("produce p50 ms", "p50_ms"), ("produce p99 ms", "p99_ms")):
        direct = getattr(d, field)
        cells = "".join(
            f"{getattr(m, field):12.3f}{getattr(m, field) - direct:+8.3f}" for m in medians.values()
        )
        print(f"{name:24}{direct:12.3f}{cells}")
    print("(ratio = gateway / direct for throughput; latency column = added ms)")
    print("load average per round:", " ".join(f"{load:.2f}" for load in LOADS))
    for g in gateways:
        print(f"{g} per round, paired with the same round's direct run:")
        for name, field, added in _FIGURES:
            pairs = zip(runs["direct"], runs[g], strict=True)
            if added:
                per_round = [getattr(gw, field) - getattr(dr, field) for dr, gw in pairs]
                cells, unit = " ".join(f"{r:+.3f}" for r in per_round), "added ms"
            else:
                per_round = [getattr(gw, field) / getattr(dr, field) for dr, gw in pairs]
                cells, unit = " ".join(f"{r:.2f}" for r in per_round), "ratio"
            print(f"  {name:22}{cells}  (median {unit} {statistics.median(per_round):.3f})")


#: (label, Figures field, whether the per-round figure is a difference rather than a ratio).
_FIGURES = (
    ("produce MB/s", "produce_mb_s", False),
    ("produce msgs/s", "produce_msg_s", False),
    ("consume MB/s", "consume_mb_s", False),
    ("consume msgs/s", "consume_msg_s", False),
    ("produce p50 ms", "p50_ms", True),
    ("produce p99 ms", "p99_ms", True),
)


if __name__ == "__main__":
    main()
