"""Shared helpers for the telemetry core tests: a client context, a manager, payloads."""

from __future__ import annotations

import random
import uuid

import pytest

from clientmetrics.telemetry import (
    ClientContext,
    ClientMetricsManager,
    PushResult,
    Subscription,
    SubscriptionsResult,
    TelemetryConfig,
    decode_push,
)
from clientmetrics.wire.errors import ErrorCode
from tests.golden import LIBRDKAFKA as FIXTURES

PRODUCER_PREFIX = "org.apache.kafka.producer."
CONSUMER_PREFIX = "org.apache.kafka.consumer."


def make_ctx(
    connection_id: int = 1,
    client_id: str = "probe-client",
    software_name: str = "librdkafka",
    software_version: str = "2.16.0",
    address: str = "127.0.0.1",
    port: int = 50000,
) -> ClientContext:
    return ClientContext(
        connection_id=connection_id,
        client_id=client_id,
        client_software_name=software_name,
        client_software_version=software_version,
        client_source_address=address,
        client_source_port=port,
        principal="User:ANONYMOUS",
        node_id=7,
    )


def sub(
    name: str = "s1",
    metrics: tuple[str, ...] = (PRODUCER_PREFIX,),
    interval_ms: int = 30000,
    match: tuple[tuple[str, str], ...] = (),
) -> Subscription:
    return Subscription(name=name, metrics=metrics, interval_ms=interval_ms, match=match)


def manager(*subs: Subscription, seed: int = 7, **config: object) -> ClientMetricsManager:
    mgr = ClientMetricsManager(TelemetryConfig(**config), rng=random.Random(seed))  # type: ignore[arg-type]
    mgr.set_subscriptions(subs)
    return mgr


def subscribe(
    mgr: ClientMetricsManager,
    now_ms: int,
    client_instance_id: uuid.UUID | None = None,
    ctx: ClientContext | None = None,
) -> SubscriptionsResult:
    """A Get that must succeed."""
    result = mgr.get_telemetry_subscriptions(client_instance_id, ctx or make_ctx(), now_ms)
    assert result.error_code is ErrorCode.NONE, result
    return result


def push_telemetry(
    mgr: ClientMetricsManager,
    client_instance_id: uuid.UUID | None,
    subscription_id: int,
    terminating: bool,
    compression_type: int,
    metrics: bytes,
    ctx: ClientContext,
    now_ms: int,
) -> PushResult:
    """A PushTelemetry answered as the gateway answers it: ``begin_push``, ``decode_push``
    (which the gateway may run off its loop), ``finish_push``."""
    started = mgr.begin_push(
        client_instance_id, subscription_id, terminating, compression_type, metrics, ctx, now_ms
    )
    if isinstance(started, PushResult):
        return started
    code, payload = decode_push(compression_type, metrics, started.max_bytes)
    return mgr.finish_push(started, code, payload)


@pytest.fixture
def producer_payload() -> bytes:
    return (FIXTURES / "producer-push.otlp.bin").read_bytes()


@pytest.fixture
def consumer_payload() -> bytes:
    return (FIXTURES / "consumer-push.otlp.bin").read_bytes()
