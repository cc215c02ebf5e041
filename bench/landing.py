"""Landing exporter throughput: 200k pushes of ~1.5 KB through export(), 1,000 tasks.

Run by hand: ``.venv/bin/python bench/landing.py [--pushes N] [--tasks N] [--dir D]``.
Prints pushes/s, p50/p99 export latency, fsyncs/s and the gateway target ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import uvloop

from clientmetrics.exporters import LandingExporter, LandingOptions
from clientmetrics.telemetry.model import AcceptedPush

TARGET_PUSHES_PER_S = 17_000


def _pushes(count: int, payload_size: int) -> list[AcceptedPush]:
    now_ms = int(time.time() * 1000)
    payloads = [os.urandom(payload_size) for _ in range(64)]
    ids = [uuid.uuid4() for _ in range(1000)]
    return [
        AcceptedPush(
            received_at_ms=now_ms + i // 20,
            client_instance_id=ids[i % len(ids)],
            subscription_id=12345,
            terminating=False,
            client_id=f"producer-{i % 1000}",
            client_software_name="librdkafka",
            client_software_version="2.16.0",
            client_source_address="10.0.0.1",
            client_source_port=40000 + i % 1000,
            principal="User:ANONYMOUS",
            node_id=0,
            listener="PLAINTEXT",
            security_protocol="PLAINTEXT",
            compression_type=4,
            push_interval_ms=5000,
            payload=payloads[i % len(payloads)],
        )
        for i in range(count)
    ]


async def _run(args: argparse.Namespace, data_dir: Path) -> None:
    pushes = _pushes(args.pushes, args.payload)
    exporter = LandingExporter(data_dir, LandingOptions())
    await exporter.start()
    latencies: list[float] = []
    queue = iter(pushes)

    async def worker() -> None:
        for push in queue:
            began = time.perf_counter()
            await exporter.export(push)
            latencies.append(time.perf_counter() - began)

    began = time.perf_counter()
    cpu_began = time.process_time()
    await asyncio.gather(*(worker() for _ in range(args.tasks)))
    elapsed = time.perf_counter() - began
    cpu = time.process_time() - cpu_began
    stats = exporter.stats
    await exporter.close(timeout_s=120)
    files = sorted((data_dir / "landing" / "pushes").rglob("*.parquet"))
    quantiles = statistics.quantiles(latencies, n=100)
    rate = len(latencies) / elapsed
    print(f"pushes:        {len(latencies)} in {elapsed:.2f} s")
    print(f"pushes/s:      {rate:,.0f}  ({rate / TARGET_PUSHES_PER_S:.2f}x the 17k/s target)")
    print(f"export p50:    {quantiles[49] * 1000:.2f} ms")
    print(f"export p99:    {quantiles[98] * 1000:.2f} ms")
    print(
        f"fsyncs/s:      {stats.fsyncs / elapsed:,.0f}  ({stats.batches} group commits, "
        f"{stats.pushes / max(stats.batches, 1):.0f} pushes each)"
    )
    print(
        f"cpu per push:  {cpu / len(latencies) * 1e6:.1f} us (all threads; "
        f"{cpu / elapsed:.2f} cores busy)"
    )
    print(f"parquet files: {len(files)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pushes", type=int, default=200_000)
    parser.add_argument("--tasks", type=int, default=1_000)
    parser.add_argument("--payload", type=int, default=1_500)
    parser.add_argument("--dir", type=Path, default=None, help="data dir (default: a temp dir)")
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop")
    args = parser.parse_args()
    runner = asyncio.run
    if args.uvloop:
        runner = uvloop.run
    if args.dir is not None:
        runner(_run(args, args.dir))
        return
    with tempfile.TemporaryDirectory(prefix="landing-bench-") as tmp:
        runner(_run(args, Path(tmp)))


if __name__ == "__main__":
    main()
