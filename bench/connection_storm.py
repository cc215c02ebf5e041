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
import functools
import multiprocessing as mp
import os
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


class _Once(asyncio.Protocol):
    """One short connection: ApiVersions v3 out, its whole answer in, closed."""

    def __init__(self, request: bytes, done: asyncio.Future[bool]) -> None:
        self.request, self.done, self.got = request, done, b""
        self.transport: Any = None  # uvloop's transports are no asyncio.Transport

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.got += data
        if len(self.got) >= 4 and len(self.got) >= 4 + int.from_bytes(self.got[:4], "big"):
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(exc is None and len(self.got) > 4)


def storm(port: int, seconds: float, concurrency: int, out: Any) -> None:
    """One storm process: ``concurrency`` loops of connect, ApiVersions v3, close.

    A bare protocol (no streams) on uvloop: the generator's own cost per connection
    is reported (its CPU time), to tell its limit from the gateway's.
    """
    import uvloop

    api_versions = request_type(18, 3)(client_software_name="storm", client_software_version="1.0")

    async def loop(deadline: float, counts: list[int]) -> None:
        running = asyncio.get_running_loop()
        while time.monotonic() < deadline:
            header = RequestHeader(18, 3, 1, f"storm-{uuid.uuid4().hex[:12]}")
            done: asyncio.Future[bool] = running.create_future()
            make = functools.partial(_Once, encode_request(header, api_versions), done)
            try:
                await running.create_connection(make, "127.0.0.1", port)
                ok = await done
            except OSError:
                ok = False
            counts[0 if ok else 1] += 1
            if not ok:
                await asyncio.sleep(0.01)

    async def main() -> None:
        counts = [0, 0]
        started, cpu = time.monotonic(), time.process_time()
        await asyncio.gather(*(loop(started + seconds, counts) for _ in range(concurrency)))
        out.put({"connections": counts[0], "failures": counts[1],
                 "seconds": time.monotonic() - started,
                 "cpu_s": time.process_time() - cpu})  # fmt: skip

    uvloop.run(main())


def cpu_s(pid: int) -> float:
    """A process's CPU time so far (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def _storm(ctx: Any, q: Any, port: int, args: argparse.Namespace, seconds: float) -> list[Any]:
    storms = [
        ctx.Process(target=storm, args=(port, seconds, args.storm_concurrency, q))
        for _ in range(args.storm_procs)
    ]
    for p in storms:
        p.start()
    made = [q.get(timeout=seconds + 120) for _ in storms]
    for p in storms:
        p.join()
    return made


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
    ap.add_argument("--storm-seconds", type=float, default=10, help="the storm alone, first")
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
        with serving(tmp / "data", 1, extra_toml=toml, admin_port=admin_port) as (port, gw):
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            # The storm alone first: what a connection costs the gateway and the generator.
            cpu0 = cpu_s(gw.pid)
            solo = _storm(ctx, q, port, args, args.storm_seconds)
            gateway_cpu = cpu_s(gw.pid) - cpu0
            alone, p99_alone = push_rate(args, port, payload)
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
    solo_n = sum(m["connections"] for m in solo)
    solo_s = max(m["seconds"] for m in solo)
    print(f"storm alone: {solo_n:,} connections in {solo_s:.1f} s = {solo_n / solo_s:,.0f}/s; "
          f"CPU per connection: gateway {gateway_cpu / solo_n * 1e6:,.0f} us, generators "
          f"{sum(m['cpu_s'] for m in solo) / solo_n * 1e6:,.0f} us")  # fmt: skip
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
