"""Pushes whose content the test chooses, sent alike to a gateway and to a Kafka broker.

One telemetry client per instance (the project's own, ``reporter.sim_net``) with one
connection to each server: it asks each for its subscription under the same client
instance id (the broker and the gateway keep a non-zero id a client brings), then sends
every push to both at once, so the two copies of a push differ only in what each server
adds (its labels, when it received it). Pushes go in rounds, so the test decides which
client's last push comes when (the pipeline's ``silent`` depends on it). Kafka answers a
push that comes sooner than the push interval after the last with
THROTTLING_QUOTA_EXCEEDED: such a push is sent again after the interval (to that server
only), as a client would.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from clientmetrics.admin.properties import ClientSecurity
from clientmetrics.reporter.protocol import (
    get_request,
    get_response_event,
    push_request,
    telemetry_version,
)
from clientmetrics.reporter.sim_net import SimConnection, open_connection
from clientmetrics.telemetry.client_state import SubscriptionReceived
from clientmetrics.wire import ErrorCode

_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Server:
    """Where pushes go: an address and the client security settings to reach it."""

    host: str
    port: int
    security: ClientSecurity | None = None


@dataclass(frozen=True)
class Twin:
    """One push: its instance, client id, decompressed payload and terminating flag."""

    instance: uuid.UUID
    client_id: str
    payload: bytes
    terminating: bool = False


@dataclass
class _Session:
    conn: SimConnection
    version: int
    subscription_id: int
    interval_s: float


async def _subscribe(server: Server, client_id: str, instance: uuid.UUID) -> _Session:
    conn = await open_connection(server.host, server.port, client_id, server.security)
    version = telemetry_version(conn.api_versions)
    assert version is not None, f"{server.host}:{server.port} offers no telemetry APIs"
    get = get_request(version, conn.next_correlation_id(), client_id, instance)
    event = get_response_event(await asyncio.wait_for(conn.call(*get), _TIMEOUT_S))
    assert isinstance(event, SubscriptionReceived), (server, event)
    sub = event.subscription
    assert sub.client_instance_id in (None, instance), "the server replaced the instance id"
    return _Session(conn, version, sub.subscription_id, sub.push_interval_ms / 1000)


async def _push(session: _Session, client_id: str, twin: Twin) -> int:
    """Send ``twin`` until it is taken; the THROTTLING_QUOTA_EXCEEDED answers on the way."""
    throttled = 0
    while True:
        push = push_request(
            session.version,
            session.conn.next_correlation_id(),
            client_id,
            twin.instance,
            subscription_id=session.subscription_id,
            terminating=twin.terminating,
            compression_type=0,
            metrics=twin.payload,
        )
        answer = await asyncio.wait_for(session.conn.call(*push), _TIMEOUT_S)
        code = int(answer.error_code)
        if code == 0:
            return throttled
        assert code == ErrorCode.THROTTLING_QUOTA_EXCEEDED, code
        assert throttled < 10, "throttled ten times in a row"
        throttled += 1
        await asyncio.sleep(session.interval_s)


async def push_rounds(
    servers: Sequence[Server], rounds: Sequence[Sequence[Twin]], step_s: float
) -> int:
    """Send every push to every server: round by round, ``step_s`` apart, a round at once.

    Each instance gets its subscription from every server first; a round holds at most
    one push of an instance. Returns how many sends were throttled and sent again (zero
    when the pacing held).
    """
    first: dict[uuid.UUID, str] = {}
    for twin in (t for pushes in rounds for t in pushes):
        first.setdefault(twin.instance, twin.client_id)
    subscribed = await asyncio.gather(
        *(
            asyncio.gather(*(_subscribe(server, client_id, instance) for server in servers))
            for instance, client_id in first.items()
        )
    )
    sessions = dict(zip(first, subscribed, strict=True))
    throttled = 0
    try:
        for index, pushes in enumerate(rounds):
            if index:
                await asyncio.sleep(step_s)
            assert len({t.instance for t in pushes}) == len(pushes), "two pushes in one round"
            results = await asyncio.gather(
                *(
                    _push(session, twin.client_id, twin)
                    for twin in pushes
                    for session in sessions[twin.instance]
                )
            )
            throttled += sum(results)
    finally:
        for both in sessions.values():
            for session in both:
                session.conn.close()
    return throttled
