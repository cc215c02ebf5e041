"""What the store topic's guard costs a forwarded request, without sockets.

Every request the proxy forwards is first searched for the store topic's name and
id (``gateway/proxy/guard.py``); only a request containing one is decoded. This
times that check on Produce requests that do not name the topic, from 100 B to
1 MB of records (searched up to 16 KiB, walked above), and on one that does
(decoded and refused), and prints the cost per request and per MB. Usage:

    python bench/store_guard.py
"""

from __future__ import annotations

import os
import time
import uuid

import structlog
from kio.index import load_request_schema

from clientmetrics.gateway.handlers import ConnectionState
from clientmetrics.gateway.proxy.guard import StoreTopicGuard
from clientmetrics.wire import RequestHeader, encode_request, parse_request_header
from clientmetrics.wire.build import build
from clientmetrics.wire.headers import request_header_version
from clientmetrics.wire.results import Request

TOPIC = "__client_metrics_subscriptions"


def produce(topic: str, records: int) -> Request:
    values = {
        "acks": -1,
        "timeout": 30000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": os.urandom(records)}]}
        ],
    }
    body = build(load_request_schema(0, 9), values, blank=True)
    header = RequestHeader(0, 9, 1, "bench", None, request_header_version(0, 9))
    frame = encode_request(header, body)[4:]
    parsed, offset = parse_request_header(frame)
    return Request(1, parsed, bytearray(frame), offset)  # large frames arrive as bytearrays


def per_call_us(guard: StoreTopicGuard, request: Request, seconds: float = 0.5) -> float:
    conn = ConnectionState(1, "127.0.0.1", 1, 1)
    calls, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds:
        for _ in range(100):
            guard.refuse(conn, request)
        calls += 100
    return elapsed / calls * 1e6


def main() -> None:
    guard = StoreTopicGuard(TOPIC)
    guard.learn(uuid.uuid4())
    print(f"{'Produce request':28}{'us per request':>16}{'us per MB':>12}")
    for size in (100, 1_000, 16_000, 17_000, 64_000, 1_000_000):
        us = per_call_us(guard, produce("orders", size))
        print(f"{f'{size} B of records':28}{us:16.2f}{us / (size / 1e6):12.1f}")
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())  # no audit output
    us = per_call_us(guard, produce(TOPIC, 1_000))
    print(f"{'naming the topic (refused)':28}{us:16.2f}")


if __name__ == "__main__":
    main()
