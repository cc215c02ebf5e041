"""Memory and speed of the client-instance registry at gateway scale.

Creates N client instances (default 1,000,000) through the public
ClientMetricsManager API, then prints the resident memory per instance and the
Get / Push / expire throughput. Run by hand:

    .venv/bin/python bench/instances_memory.py [--instances N] [--connections C]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import time
import uuid

from clientmetrics.telemetry import (
    ClientContext,
    ClientMetricsManager,
    Subscription,
    TelemetryConfig,
    build_metrics_data,
    gauge,
)
from clientmetrics.wire.errors import ErrorCode


def rss_bytes() -> int:
    """Resident set size from /proc (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def contexts(count: int) -> list[ClientContext]:
    return [
        ClientContext(
            connection_id=i,
            client_id=f"client-{i}",
            client_software_name="librdkafka",
            client_software_version="2.16.0",
            client_source_address=f"10.0.{i // 256 % 256}.{i % 256}",
            client_source_port=40000 + i % 20000,
            principal="User:ANONYMOUS",
            node_id=1,
        )
        for i in range(count)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=1_000_000)
    parser.add_argument(
        "--connections",
        type=int,
        default=1000,
        help="distinct ClientContext objects (shared per connection)",
    )
    args = parser.parse_args()
    n = args.instances

    subs = [
        Subscription(
            "producers",
            ("org.apache.kafka.producer.",),
            30000,
            (("client_software_name", "librdkafka"),),
        ),
        Subscription("everyone", ("org.apache.kafka.consumer.",), 60000, ()),
    ]
    mgr = ClientMetricsManager(TelemetryConfig(max_instances=n), rng=random.Random(1))
    mgr.set_subscriptions(subs)
    ctxs = contexts(args.connections)
    payload = build_metrics_data([gauge("org.apache.kafka.producer.x", 1.0, time_unix_nano=1)])
    body = payload.SerializeToString()

    gc.collect()
    base = rss_bytes()
    now = 1_700_000_000_000
    ids: list[uuid.UUID] = []
    started = time.perf_counter()
    for i in range(n):
        result = mgr.get_telemetry_subscriptions(None, ctxs[i % len(ctxs)], now)
        ids.append(result.client_instance_id)
    get_s = time.perf_counter() - started
    # The id list is the benchmark's, not the registry's: measure before keeping it long.
    gc.collect()
    after_gets = rss_bytes()

    sub_ids = {}
    started = time.perf_counter()
    accepted = 0
    for i, iid in enumerate(ids):
        ctx = ctxs[i % len(ctxs)]
        sid = sub_ids.get(iid)
        if sid is None:
            sid = mgr.get_telemetry_subscriptions(iid, ctx, now + 60000).subscription_id
        res = mgr.push_telemetry(iid, sid, False, 0, body, ctx, now + 60001)
        accepted += res.error_code is ErrorCode.NONE
    get_push_s = time.perf_counter() - started
    gc.collect()
    after_pushes = rss_bytes()

    started = time.perf_counter()
    for second in range(1, 11):
        mgr.expire(now + 60001 + second * 1000)  # nothing is due yet
    idle_expire_s = (time.perf_counter() - started) / 10
    started = time.perf_counter()
    expired = mgr.expire(now + 10 * 3600 * 1000)
    full_expire_s = time.perf_counter() - started

    # The benchmark's own list of UUIDs (pointer + UUID object + 128-bit int) is not
    # registry memory; subtract it.
    ids_overhead = n * (8 + 56 + 44)
    created = (after_gets - base - ids_overhead) / n
    # After Get+Push every instance also holds its own request-time ints, as in a gateway.
    steady = (after_pushes - base - ids_overhead) / n
    print(f"instances:                {n:,} over {len(ctxs):,} connections")
    print(
        f"RSS after creating:       {(after_gets - base) / 2**20:,.1f} MiB "
        f"-> {created:,.0f} B/instance"
    )
    print(
        f"RSS after Get+Push:       {(after_pushes - base) / 2**20:,.1f} MiB "
        f"-> {steady:,.0f} B/instance"
    )
    print(f"  (the bench's own id list, {ids_overhead / n:.0f} B/instance, is subtracted)")
    print(f"projected for 1M:         {steady * 1_000_000 / 2**30:,.2f} GiB")
    print(f"Get (new instance):       {n / get_s:,.0f} ops/s")
    print(
        f"Get+Push (existing):      {2 * n / get_push_s:,.0f} requests/s "
        f"({accepted:,} pushes accepted)"
    )
    print(f"expire() nothing due:     {idle_expire_s * 1e6:,.0f} µs per call")
    print(f"expire() all {expired:,} due: {full_expire_s:,.2f} s")
    print(f"stats:                    {mgr.stats.instance_count:,} instances left")


if __name__ == "__main__":
    main()
