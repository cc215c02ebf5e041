"""A connection storm beside pushes: connection records stay bounded, pushes keep their rate.

One gateway (connection records every second, at most ``--max-keys`` client keys an
interval). Its accepted pushes/s are measured alone, then beside a storm of short
connections (each connects, sends ApiVersions v3 under a client id of its own —
every connection a new client key, the worst case for the bound — reads the answer
and closes), then alone again, all in one run. Prints the storm's connections/s,
the push rate beside it as a share of the mean of the two runs alone, and what the
connection records held: records written, connections dropped by the bound, the
largest interval's records (at most ``--max-keys``) and the landed files' size.

    python bench/connection_storm.py --instances 20000 --rate 4000 --storm-procs 2

The machine may be shared: compare runs of the same session.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import shutil
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import FIXTURE, push_figures, run_generators, serving

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clientmetrics.wire import RequestHeader, encode_request, request_type  # noqa: E402


def storm(port: int, seconds: float, concurrency: int, out: Any) -> None:
    """One storm process: ``concurrency`` loops of connect, ApiVersions v3, close."""
    import uvloop

    api_versions = request_type(18, 3)(client_software_name="storm", client_software_version="1.0")

    async def loop(deadline: float, counts: list[int]) -> None:
        while time.monotonic() < deadline:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                header = RequestHeader(18, 3, 1, f"storm-{uuid.uuid4().hex[:12]}")
                writer.write(encode_request(header, api_versions))
                size = int.from_bytes(await reader.readexactly(4), "big")
                await reader.readexactly(size)
                writer.close()
                await writer.wait_closed()
                counts[0] += 1
            except OSError:
                counts[1] += 1
                await asyncio.sleep(0.01)

    async def main() -> None:
        counts = [0, 0]
        started = time.monotonic()
        await asyncio.gather(*(loop(started + seconds, counts) for _ in range(concurrency)))
        out.put({"connections": counts[0], "failures": counts[1],
                 "seconds": time.monotonic() - started})  # fmt: skip

    uvloop.run(main())


def metrics(admin_port: int) -> dict[str, float]:
    url = f"http://127.0.0.1:{admin_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    prefix = "kafka_server_client_metrics_connection_records_"
    return {
        line.split()[0].removeprefix(prefix): float(line.split()[1])
        for line in text.splitlines()
        if line.startswith(prefix)
    }


def push_rate(args: argparse.Namespace, port: int, payload: bytes) -> tuple[float, float]:
    results = run_generators(
        port, 1, args.connections, args.instances, 32, args.rate, payload, "push"
    )
    rate, p99, _errors = push_figures(results)
    return rate, p99


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--instances", type=int, default=20_000, help="pushes per push run")
    ap.add_argument("--rate", type=float, default=4_000, help="target pushes/s")
    ap.add_argument("--connections", type=int, default=20, help="push connections")
    ap.add_argument("--storm-procs", type=int, default=2, help="storm processes")
    ap.add_argument("--storm-concurrency", type=int, default=64, help="connect loops each")
    ap.add_argument("--max-keys", type=int, default=10_000, help="connection_records_max_keys")
    args = ap.parse_args()

    payload = zstandard.ZstdCompressor().compress(FIXTURE.read_bytes())
    tmp = Path(tempfile.mkdtemp(prefix="cm-storm-"))
    from ports import free_port

    admin_port = free_port()
    toml = (
        "[gateway]\nconnection_records_interval_ms = 1000\n"
        f"connection_records_max_keys = {args.max_keys}\n"
    )
    try:
        with serving(tmp / "data", 1, extra_toml=toml, admin_port=admin_port) as (port, _gw):
            alone, p99_alone = push_rate(args, port, payload)
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            seconds = args.instances / args.rate + 5
            storms = [
                ctx.Process(target=storm, args=(port, seconds, args.storm_concurrency, q))
                for _ in range(args.storm_procs)
            ]
            for p in storms:
                p.start()
            time.sleep(2)  # the storm at full rate before the pushes start
            beside, p99_beside = push_rate(args, port, payload)
            made = [q.get(timeout=seconds + 120) for _ in storms]
            for p in storms:
                p.join()
            again, p99_again = push_rate(args, port, payload)
            time.sleep(2.5)  # the last interval's records land
            counters = metrics(admin_port)
    finally:
        files = sorted((tmp / "data" / "landing" / "connections").rglob("*.parquet"))
        rows = [pq.read_metadata(f).num_rows for f in files]
        size = sum(f.stat().st_size for f in files)
        shutil.rmtree(tmp, ignore_errors=True)
    connections = sum(m["connections"] for m in made)
    storm_s = max(m["seconds"] for m in made)
    baseline = (alone + again) / 2
    print(f"storm: {connections:,} connections in {storm_s:.1f} s = {connections / storm_s:,.0f}/s "
          f"({sum(m['failures'] for m in made)} failed)")  # fmt: skip
    print(f"pushes alone:  {alone:,.0f}/s (p99 {p99_alone:.1f} ms), again {again:,.0f}/s "
          f"(p99 {p99_again:.1f} ms)")  # fmt: skip
    print(f"pushes beside the storm: {beside:,.0f}/s (p99 {p99_beside:.1f} ms) = "
          f"{beside / baseline:.1%} of alone")  # fmt: skip
    print(f"connection records: {counters.get('written_total', 0):,.0f} written, "
          f"{counters.get('dropped_total', 0):,.0f} connections dropped by the bound; "
          f"{len(files)} files, largest {max(rows, default=0):,} records "
          f"(bound {args.max_keys:,}), {size / 1e6:.1f} MB")  # fmt: skip


if __name__ == "__main__":
    main()
