"""Micro-benchmark of the gateway's hot path in clientmetrics.wire.

Run by hand: ``.venv/bin/python bench/wire_codec.py [seconds-per-case]``.
Prints decode+encode round trips per second (request frame in, framed response
out) for PushTelemetry v0 with a 1.5 KB payload and GetTelemetrySubscriptions v0,
and the ratio to the gateway's target of 20k PushTelemetry/s on one core.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
import uuid
from collections.abc import Callable

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.static.primitive import i8, i32

from clientmetrics.wire import (
    FrameDecoder,
    RequestHeader,
    decode_request,
    encode_request,
    encode_response,
    peek_request,
    request_type,
    response_type,
)

TARGET_PUSHES_PER_SECOND = 20_000
ZERO = datetime.timedelta(0)


def _push_frame() -> bytes:
    body = request_type(72, 0)(
        client_instance_id=uuid.uuid4(),
        subscription_id=i32(12345),
        terminating=False,
        compression_type=i8(4),
        metrics=os.urandom(1536),
    )
    (frame,) = FrameDecoder().feed(encode_request(RequestHeader(72, 0, 7, "rdkafka"), body))
    return frame


def _get_frame() -> bytes:
    body = request_type(71, 0)(client_instance_id=None)
    (frame,) = FrameDecoder().feed(encode_request(RequestHeader(71, 0, 7, "rdkafka"), body))
    return frame


def push_case() -> Callable[[], bytes]:
    frame = _push_frame()
    reply = response_type(72, 0)(throttle_time=ZERO, error_code=KioErrorCode.none)

    def once() -> bytes:
        peek_request(frame)
        header, _body = decode_request(frame)
        return encode_response(header, reply)

    return once


def get_case() -> Callable[[], bytes]:
    frame = _get_frame()
    reply = response_type(71, 0)(
        throttle_time=ZERO,
        error_code=KioErrorCode.none,
        client_instance_id=uuid.uuid4(),
        subscription_id=i32(12345),
        accepted_compression_types=(i8(4), i8(3), i8(1), i8(2)),
        push_interval=datetime.timedelta(seconds=30),
        telemetry_max_bytes=i32(1048576),
        delta_temporality=True,
        requested_metrics=("org.apache.kafka.",),
    )

    def once() -> bytes:
        header, _body = decode_request(frame)
        return encode_response(header, reply)

    return once


def measure(case: Callable[[], bytes], seconds: float) -> float:
    """Round trips per second, over about ``seconds``."""
    case()  # warm the per-(key, version) caches
    count = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(1000):
            case()
        count += 1000
        now = time.perf_counter()
        if now >= deadline:
            return count / (now - start)


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    push = measure(push_case(), seconds)
    get = measure(get_case(), seconds)
    print(f"PushTelemetry v0 (1.5 KB)       decode+encode: {push:10,.0f} ops/s")
    print(f"GetTelemetrySubscriptions v0    decode+encode: {get:10,.0f} ops/s")
    ratio = push / TARGET_PUSHES_PER_SECOND
    print(f"push headroom vs {TARGET_PUSHES_PER_SECOND:,}/s target: {ratio:.1f}x")


if __name__ == "__main__":
    main()
