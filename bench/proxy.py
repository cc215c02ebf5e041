"""Proxy-mode benchmark: librdkafka through the gateway vs directly against the broker.

One run starts a broker (Apache Kafka 4.4 from ``peers/kafka``, or Tansu) and a
gateway in proxy mode in front of it, then measures the same workloads both ways,
alternating which goes first each round, and prints the ratios (gateway / direct):

  * produce throughput (MB/s, messages/s): one producer, ``--messages`` records
    of ``--size`` bytes, acks=all, no compression, from the first produce to flush;
  * consume throughput (MB/s, messages/s): one consumer reading ``--consume-messages``
    back (default: all of them on Kafka; 20k on Tansu, which serves fetches slowly);
  * produce latency p50/p99: one record at a time, produce to delivery report.

The aim (issue 21) is a throughput ratio of at least 0.95 and at most 0.5 ms added
p99. ``--profile out.txt`` runs the gateway under py-spy (``pip install py-spy``)
and writes its folded stacks, to see where the time goes. Usage:

    python bench/proxy.py --upstream kafka --messages 300000 --size 1000 --rounds 4
"""

from __future__ import annotations

import argparse
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


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
    parser.add_argument("--profile", type=Path, help="py-spy's folded stacks of the gateway")
    args = parser.parse_args()
    if args.consume_messages is None:
        args.consume_messages = args.messages if args.upstream == "kafka" else 20_000

    workdir = Path(tempfile.mkdtemp(prefix="cm-bench-proxy-"))
    gw_port = free_port()
    node = KAFKA_NODE if args.upstream == "kafka" else TANSU_NODE
    base = _port_block(node)
    broker: KafkaBroker | TansuProcess
    if args.upstream == "kafka":
        broker = KafkaBroker(workdir / "kafka", plugins=()).start()
    else:
        broker = TansuProcess().start()
    gateway = profiler = None
    try:
        command = [
            str(BIN / "clientmetrics"), "serve", "--listen", f"127.0.0.1:{gw_port}",
            "--upstream", broker.bootstrap, "--broker-port-base", str(base),
            "--store", "sqlite", "--data-dir", str(workdir / "gw"), "--log-level", "warning",
        ]  # fmt: skip
        gateway = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(gw_port)
        wait_port(base + node)
        if args.profile is not None:
            profiler = subprocess.Popen(
                [str(BIN / "py-spy"), "record", "--format", "raw", "--rate", "500", "--nonblocking",
                 "--pid", str(gateway.pid), "-o", str(args.profile)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        runs: dict[str, list[Figures]] = {"direct": [], "gateway": []}
        targets = {"direct": broker.bootstrap, "gateway": f"127.0.0.1:{gw_port}"}
        gateway_cpu = latency_cpu = 0.0
        pid = gateway.pid
        for i in range(args.rounds):
            # Alternate which goes first: the host is shared, load drifts during a run.
            order = ("direct", "gateway") if i % 2 == 0 else ("gateway", "direct")
            for label in order:
                before = cpu_seconds(pid)
                figures, during_latency = measure(
                    targets[label], args, label, lambda: cpu_seconds(pid)
                )
                runs[label].append(figures)
                if label == "gateway":
                    gateway_cpu += cpu_seconds(pid) - before
                    latency_cpu += during_latency
        report(args, runs)
        # Noise-free figure on a shared host: what the proxy itself costs per GB moved
        # (each message is produced once and consumed once through it).
        moved = args.messages + min(args.consume_messages, args.messages)
        moved_gb = args.rounds * moved * args.size / 1e9
        print(f"gateway CPU: {gateway_cpu:.2f} s for {moved_gb:.2f} GB through it "
              f"({gateway_cpu / moved_gb:.2f} s/GB, latency runs included)")  # fmt: skip
        # The proxy's own cost per request, free of the host's scheduling noise: a lower
        # bound of the latency it adds (request and response each cross it once).
        per_request = latency_cpu / (args.rounds * args.latency_samples) * 1e6
        print(f"gateway CPU per produce round trip (latency runs): {per_request:.0f} us")
    finally:
        if profiler is not None:  # py-spy writes its file on SIGINT
            profiler.send_signal(signal.SIGINT)
            profiler.wait(60)
        if gateway is not None:
            stop_process(gateway, 30)
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


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
    d, g = median(runs["direct"]), median(runs["gateway"])
    per_round = [
        gw.produce_mb_s / direct.produce_mb_s
        for direct, gw in zip(runs["direct"], runs["gateway"], strict=True)
    ]
    print(
        f"proxy benchmark ({args.upstream}): {args.messages} x {args.size} B produced, "
        f"{args.consume_messages} consumed, {args.latency_samples} latency samples, median of "
        f"{args.rounds} rounds, load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'':24}{'direct':>12}{'gateway':>12}{'ratio':>10}")
    rows = [
        ("produce MB/s", d.produce_mb_s, g.produce_mb_s),
        ("produce msgs/s", d.produce_msg_s, g.produce_msg_s),
        ("consume MB/s", d.consume_mb_s, g.consume_mb_s),
        ("consume msgs/s", d.consume_msg_s, g.consume_msg_s),
    ]
    for name, direct, gateway in rows:
        print(f"{name:24}{direct:12.1f}{gateway:12.1f}{gateway / direct:10.3f}")
    print(f"{'produce p50 ms':24}{d.p50_ms:12.3f}{g.p50_ms:12.3f}{g.p50_ms - d.p50_ms:+10.3f}")
    print(f"{'produce p99 ms':24}{d.p99_ms:12.3f}{g.p99_ms:12.3f}{g.p99_ms - d.p99_ms:+10.3f}")
    print("(ratio = gateway / direct for throughput; latency column = added ms)")
    print(
        "produce ratio per round:",
        " ".join(f"{r:.2f}" for r in per_round),
        f"(median of paired ratios {statistics.median(per_round):.3f})",
    )


if __name__ == "__main__":
    main()
