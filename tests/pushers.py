"""Telemetry clients that number their pushes and remember which ones were acknowledged.

Each client pushes one gauge, ``pushers.seq``, whose value is the push's number, so
a record read back from a topic names the push it came from (key: the instance
id). A client whose gateway goes away reconnects to the next address, as a client
behind one bootstrap name for several gateways would, and asks for its
subscription again with the same instance id.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from clientmetrics.reporter.protocol import (
    get_request,
    get_response_event,
    push_request,
    telemetry_version,
)
from clientmetrics.reporter.sim_net import SimConnection, SimulatorError, open_connection
from clientmetrics.telemetry.client_state import SubscriptionReceived
from clientmetrics.telemetry.otlp import build_metrics_data, gauge
from clientmetrics.wire import ErrorCode

METRIC = "pushers.seq"
_TIMEOUT_S = 20.0


@dataclass
class Outcomes:
    """What the clients saw: acknowledged pushes by (instance id, number), the rest counted."""

    acked: set[tuple[uuid.UUID, int]] = field(default_factory=set)
    errors: Counter[int] = field(default_factory=Counter)
    transport_failures: int = 0


def payload(seq: int) -> bytes:
    data = build_metrics_data([gauge(METRIC, seq, time_unix_nano=seq)])
    return bytes(data.SerializeToString())


async def run_client(
    client_id: str,
    addresses: Sequence[tuple[str, int]],
    stop: asyncio.Event,
    outcomes: Outcomes,
    start_at: int = 0,
) -> None:
    """Push until ``stop``; on a lost connection move on to the next address."""
    instance = uuid.uuid4()
    seq = [0]  # the last number used, kept across connections
    turn = start_at
    while not stop.is_set():
        host, port = addresses[turn % len(addresses)]
        try:
            conn = await open_connection(host, port, client_id)
        except SimulatorError:
            outcomes.transport_failures += 1
            turn += 1
            await asyncio.sleep(0.1)
            continue
        try:
            await _session(conn, instance, seq, stop, outcomes)
        except (ConnectionError, TimeoutError):
            outcomes.transport_failures += 1
            turn += 1
        finally:
            conn.close()


async def _session(
    conn: SimConnection,
    instance: uuid.UUID,
    seq: list[int],
    stop: asyncio.Event,
    outcomes: Outcomes,
) -> None:
    """Get a subscription, push every interval until stop or a new subscription."""
    version = telemetry_version(conn.api_versions) or 0
    while not stop.is_set():
        get = get_request(version, conn.next_correlation_id(), conn.client_id, instance)
        event = get_response_event(await asyncio.wait_for(conn.call(*get), _TIMEOUT_S))
        if not isinstance(event, SubscriptionReceived):
            outcomes.errors[event.error_code] += 1
            await asyncio.sleep(0.5)
            continue
        sub = event.subscription
        interval = sub.push_interval_ms / 1000
        while not stop.is_set():
            seq[0] += 1
            number = seq[0]
            push = push_request(
                version,
                conn.next_correlation_id(),
                conn.client_id,
                instance,
                subscription_id=sub.subscription_id,
                terminating=False,
                compression_type=0,
                metrics=payload(number),
            )
            answer = await asyncio.wait_for(conn.call(*push), _TIMEOUT_S)
            code = int(answer.error_code)
            if code == 0:
                outcomes.acked.add((instance, number))
            else:
                outcomes.errors[code] += 1
            if code != ErrorCode.UNKNOWN_SUBSCRIPTION_ID:
                await _sleep_until(stop, time.monotonic() + interval)
            if code != 0:  # as Kafka's clients do: ask for the subscription again
                break


async def _sleep_until(stop: asyncio.Event, at: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), max(0.0, at - time.monotonic()))
