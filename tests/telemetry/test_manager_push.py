"""PushTelemetry: conformance checklist items 22-35 and our deliberate differences."""

from __future__ import annotations

import uuid

import cramjam
import pytest
import zstandard

from clientmetrics.telemetry import (
    ONE_UUID,
    ZERO_UUID,
    ClientContext,
    ClientMetricsManager,
    PushResult,
    SubscriptionsResult,
    compress,
    compress_snappy_xerial,
)
from clientmetrics.wire.errors import ErrorCode

from .conftest import FIXTURES, make_ctx, manager, push_telemetry, sub, subscribe

NOW = 5_000_000
INTERVAL = 30000


def push(
    mgr: ClientMetricsManager,
    got: SubscriptionsResult,
    now_ms: int,
    payload: bytes = b"",
    *,
    terminating: bool = False,
    compression_type: int = 0,
    subscription_id: int | None = None,
    ctx: ClientContext | None = None,
) -> PushResult:
    return push_telemetry(
        mgr,
        got.client_instance_id,
        got.subscription_id if subscription_id is None else subscription_id,
        terminating,
        compression_type,
        payload,
        ctx or make_ctx(),
        now_ms,
    )


@pytest.fixture
def mgr() -> ClientMetricsManager:
    return manager(sub(interval_ms=INTERVAL))


def test_push_after_get_is_accepted(mgr: ClientMetricsManager, producer_payload: bytes) -> None:
    """Checklist 22: Get then an immediate push with NONE compression → NONE, landed as sent."""
    got = subscribe(mgr, NOW)
    result = push(mgr, got, NOW, producer_payload)
    assert result.error_code is ErrorCode.NONE
    assert result.accepted is not None
    accepted = result.accepted
    assert accepted.payload == producer_payload
    assert accepted.terminating is False
    assert accepted.client_instance_id == got.client_instance_id
    assert accepted.subscription_id == got.subscription_id
    assert accepted.push_interval_ms == INTERVAL
    assert (accepted.received_at_ms, accepted.client_id, accepted.node_id) == (
        NOW,
        "probe-client",
        7,
    )
    assert mgr.stats.accepted_pushes == 1


def test_push_to_a_receiver_that_never_saw_the_get(producer_payload: bytes) -> None:
    """Checklist 23: the SubscriptionId recomputes equal on another gateway."""
    got = subscribe(manager(sub()), NOW)
    other = manager(sub())
    assert push(other, got, NOW, producer_payload).error_code is ErrorCode.NONE


def test_pushes_one_interval_apart_are_accepted(mgr: ClientMetricsManager) -> None:
    """Checklist 24: push, wait the interval, push → both NONE."""
    got = subscribe(mgr, NOW)
    assert push(mgr, got, NOW).error_code is ErrorCode.NONE
    assert push(mgr, got, NOW + INTERVAL).error_code is ErrorCode.NONE


@pytest.mark.parametrize("bad_id", [None, ZERO_UUID, ONE_UUID])
def test_missing_or_reserved_id_is_invalid(
    mgr: ClientMetricsManager, bad_id: uuid.UUID | None
) -> None:
    """Checklist 25: null, zero or ONE_UUID → 42, and no instance is created."""
    result = push_telemetry(mgr, bad_id, 0, False, 0, b"", make_ctx(), NOW)
    assert result == PushResult(ErrorCode.INVALID_REQUEST, None)
    assert mgr.stats.instance_count == 0


def test_immediate_second_push_is_throttled(mgr: ClientMetricsManager) -> None:
    """Checklist 26: Get, push, immediate push → 89; throttle count 1."""
    got = subscribe(mgr, NOW)
    push(mgr, got, NOW)
    assert push(mgr, got, NOW + 1).error_code is ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert mgr.stats.throttles == 1


def test_terminating_push_bypasses_the_throttle(mgr: ClientMetricsManager) -> None:
    """Checklist 27: a push then an immediate terminating push → NONE."""
    got = subscribe(mgr, NOW)
    push(mgr, got, NOW)
    result = push(mgr, got, NOW + 1, terminating=True)
    assert result.error_code is ErrorCode.NONE
    assert result.accepted is not None
    assert result.accepted.terminating is True
    assert mgr.stats.accepted_pushes == 2


def test_nothing_after_an_accepted_terminating_push(mgr: ClientMetricsManager) -> None:
    """Checklist 28: after a terminating push, any push → 42 (one terminating push only)."""
    got = subscribe(mgr, NOW)
    push(mgr, got, NOW, terminating=True)
    assert push(mgr, got, NOW + INTERVAL).error_code is ErrorCode.INVALID_REQUEST
    assert push(mgr, got, NOW + INTERVAL, terminating=True).error_code is ErrorCode.INVALID_REQUEST


def test_failed_terminating_push_does_not_lock_out(mgr: ClientMetricsManager) -> None:
    """DESIGN (KAFKA-20898): a terminating push that fails may be retried and succeed."""
    got = subscribe(mgr, NOW)
    failed = push(mgr, got, NOW, terminating=True, subscription_id=1234)
    assert failed.error_code is ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    refetched = subscribe(mgr, NOW + 1, got.client_instance_id)
    assert push(mgr, refetched, NOW + 2, terminating=True).error_code is ErrorCode.NONE


def test_new_subscription_allows_a_new_terminating_push(mgr: ClientMetricsManager) -> None:
    """One terminating push per instance *and subscription*: a change re-creates the instance."""
    got = subscribe(mgr, NOW)
    push(mgr, got, NOW, terminating=True)
    mgr.update_subscription("s1", sub(interval_ms=INTERVAL * 2))
    again = subscribe(mgr, NOW + 1, got.client_instance_id)
    assert push(mgr, again, NOW + 2, terminating=True).error_code is ErrorCode.NONE


def test_unknown_subscription_id(mgr: ClientMetricsManager) -> None:
    """Checklist 29: subscriptionId 1234 → 117; counter 1; nothing accepted."""
    got = subscribe(mgr, NOW)
    result = push(mgr, got, NOW, b"\x0a\x00", subscription_id=1234)
    assert result == PushResult(ErrorCode.UNKNOWN_SUBSCRIPTION_ID, None)
    assert mgr.stats.unknown_subscription_requests == 1
    assert mgr.stats.accepted_pushes == 0


@pytest.mark.parametrize("code", [-1, 5, 100])
def test_unknown_compression_type(mgr: ClientMetricsManager, code: int) -> None:
    """Checklist 30: a compression id outside 0..4 → 76."""
    got = subscribe(mgr, NOW)
    assert push(mgr, got, NOW, compression_type=code).error_code is (
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    )


def test_unadvertised_but_known_codec_is_accepted(producer_payload: bytes) -> None:
    """Reference §2.8 3d: any id in 0..4 is decoded, advertised or not."""
    mgr = manager(sub(), accepted_compression_types=(4,))
    got = subscribe(mgr, NOW)
    result = push(mgr, got, NOW, compress(1, producer_payload), compression_type=1)
    assert result.accepted is not None
    assert result.accepted.payload == producer_payload


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_empty_push_is_accepted_and_landed(mgr: ClientMetricsManager, codec: int) -> None:
    """Checklist 31, deliberately different: a 0-byte push is accepted *with* an empty payload."""
    got = subscribe(mgr, NOW)
    result = push(mgr, got, NOW, b"", compression_type=codec)
    assert result.accepted is not None
    assert result.accepted.payload == b""
    assert mgr.stats.empty_pushes == 1


def test_compressed_payload_over_max_bytes() -> None:
    """Checklist 32: telemetry.max.bytes=1 and a 2-byte payload → 118."""
    mgr = manager(sub(), max_bytes=1)
    got = subscribe(mgr, NOW)
    assert push(mgr, got, NOW, b"\x0a\x00").error_code is ErrorCode.TELEMETRY_TOO_LARGE


def test_decompression_bomb_is_too_large() -> None:
    """DESIGN: 64 MiB of zeros in a tiny zstd frame → 118, never allocated."""
    compressor = zstandard.ZstdCompressor().compressobj()
    bomb = b"".join(compressor.compress(bytes(1 << 20)) for _ in range(64)) + compressor.flush()
    mgr = manager(sub())
    got = subscribe(mgr, NOW)
    assert len(bomb) < 1 << 20
    assert push(mgr, got, NOW, bomb, compression_type=4).error_code is (
        ErrorCode.TELEMETRY_TOO_LARGE
    )


@pytest.mark.parametrize(
    ("codec", "payload"),
    [(0, b"\xff\xff\xff"), (4, b"not zstd at all"), (1, b"\x1f\x8b garbage"), (2, b"\xff\x00")],
)
def test_undecodable_payload_is_invalid_record(
    mgr: ClientMetricsManager, codec: int, payload: bytes
) -> None:
    """Checklist 33 (the export step): bad OTLP or bad compression → 87."""
    got = subscribe(mgr, NOW)
    assert push(mgr, got, NOW, payload, compression_type=codec).error_code is (
        ErrorCode.INVALID_RECORD
    )


def test_export_outcomes_are_counted(mgr: ClientMetricsManager) -> None:
    """Checklist 33: the gateway reports exporter runs; failures count as errors."""
    mgr.record_export(2.5, ok=True)
    mgr.record_export(4.0, ok=True)
    mgr.record_export(9.0, ok=False)
    stats = mgr.stats
    assert (stats.exports, stats.export_errors) == (2, 1)
    assert (stats.export_time_ms_sum, stats.export_time_ms_max) == (6.5, 4.0)


def test_check_precedence(producer_payload: bytes) -> None:
    """Checklist 34: terminating → throttle → subscriptionId → compression → size."""
    mgr = manager(sub(), max_bytes=4)
    got = subscribe(mgr, NOW)
    push(mgr, got, NOW)  # uses the slot granted by the Get
    everything_wrong = {"subscription_id": 1234, "compression_type": 100}
    big = producer_payload
    assert push(mgr, got, NOW + 1, big, **everything_wrong).error_code is (  # type: ignore[arg-type]
        ErrorCode.THROTTLING_QUOTA_EXCEEDED
    )
    late = NOW + INTERVAL
    assert push(mgr, got, late, big, **everything_wrong).error_code is (  # type: ignore[arg-type]
        ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    )
    later = late + INTERVAL
    assert push(mgr, got, later, big, compression_type=100).error_code is (
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    )
    last = later + INTERVAL
    assert push(mgr, got, last, big).error_code is ErrorCode.TELEMETRY_TOO_LARGE


def test_terminated_beats_everything(mgr: ClientMetricsManager) -> None:
    """Checklist 34: once terminated, even a throttled, wrong-id push gets 42."""
    got = subscribe(mgr, NOW)
    push(mgr, got, NOW, terminating=True)
    result = push(mgr, got, NOW + 1, subscription_id=1234, compression_type=100)
    assert result.error_code is ErrorCode.INVALID_REQUEST


def test_rejected_push_still_uses_the_slot(mgr: ClientMetricsManager) -> None:
    """Checklist 35: a wrong SubscriptionId after the throttle check consumes the slot."""
    got = subscribe(mgr, NOW)
    assert push(mgr, got, NOW, subscription_id=1234).error_code is (
        ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    )
    assert push(mgr, got, NOW + 1).error_code is ErrorCode.THROTTLING_QUOTA_EXCEEDED


@pytest.mark.parametrize("error", ["subscription", "compression"])
def test_get_right_after_refetch_errors_is_not_throttled(
    mgr: ClientMetricsManager, error: str
) -> None:
    """After 117 or 76 the client may re-fetch at once (Kafka 4.4 fixed its `||` bug)."""
    got = subscribe(mgr, NOW)
    bad = {"subscription_id": 1234} if error == "subscription" else {"compression_type": 99}
    assert push(mgr, got, NOW, **bad).error_code is not ErrorCode.NONE  # type: ignore[arg-type]
    again = subscribe(mgr, NOW + 1, got.client_instance_id)
    # As in Kafka 4.4 the early re-fetch grants no push: the next one waits its interval
    # from the failed push (less our early-push tolerance).
    assert push(mgr, again, NOW + 2).error_code is ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert push(mgr, again, NOW + INTERVAL // 2).error_code is ErrorCode.NONE


def test_get_after_too_large_is_throttled() -> None:
    """Reference §4.4: 118 means wait an interval; only 117 and 76 skip the Get throttle."""
    mgr = manager(sub(), max_bytes=1)
    got = subscribe(mgr, NOW)
    assert push(mgr, got, NOW, b"\x0a\x00").error_code is ErrorCode.TELEMETRY_TOO_LARGE
    again = mgr.get_telemetry_subscriptions(got.client_instance_id, make_ctx(), NOW + 1)
    assert again.error_code is ErrorCode.THROTTLING_QUOTA_EXCEEDED


def test_subscription_change_makes_old_pushes_unknown(mgr: ClientMetricsManager) -> None:
    """Checklist 38 / §2.6: after a change the old SubscriptionId is refused, Get is free."""
    got = subscribe(mgr, NOW)
    mgr.update_subscription("s1", sub(metrics=("org.apache.kafka.consumer.",)))
    assert push(mgr, got, NOW + 1).error_code is ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    again = subscribe(mgr, NOW + 2, got.client_instance_id)
    assert again.subscription_id != got.subscription_id
    assert push(mgr, again, NOW + 1 + INTERVAL).error_code is ErrorCode.NONE


@pytest.mark.parametrize(
    ("fraction", "expected"),
    [(0.49, ErrorCode.THROTTLING_QUOTA_EXCEEDED), (0.5, ErrorCode.NONE), (0.9, ErrorCode.NONE)],
)
def test_early_push_tolerance(
    mgr: ClientMetricsManager, fraction: float, expected: ErrorCode
) -> None:
    """DESIGN: a push at least (1 - 0.5) x interval after the last one is accepted."""
    got = subscribe(mgr, NOW)
    push(mgr, got, NOW)
    assert push(mgr, got, NOW + int(INTERVAL * fraction)).error_code is expected


def test_zero_tolerance_is_kafka_exact() -> None:
    """With tolerance 0 the throttle is Kafka's: now - lastPush >= interval."""
    mgr = manager(sub(interval_ms=INTERVAL), early_push_tolerance=0.0)
    got = subscribe(mgr, NOW)
    push(mgr, got, NOW)
    assert push(mgr, got, NOW + INTERVAL - 1).error_code is ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert push(mgr, got, NOW + INTERVAL).error_code is ErrorCode.NONE


def test_instance_timing(mgr: ClientMetricsManager) -> None:
    """Checklist 40: first Get ok; Get-Get no; push-Get no; push-push no; Get-push once."""
    got = subscribe(mgr, NOW)
    iid = got.client_instance_id
    ctx = make_ctx()
    assert mgr.get_telemetry_subscriptions(iid, ctx, NOW).error_code is (
        ErrorCode.THROTTLING_QUOTA_EXCEEDED
    )
    assert push(mgr, got, NOW).error_code is ErrorCode.NONE  # Get then push: once
    assert push(mgr, got, NOW).error_code is ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert mgr.get_telemetry_subscriptions(iid, ctx, NOW + 1).error_code is (
        ErrorCode.THROTTLING_QUOTA_EXCEEDED
    )


@pytest.mark.parametrize("framing", ["raw", "xerial", "framed"])
def test_every_snappy_framing_is_detected(
    mgr: ClientMetricsManager, consumer_payload: bytes, framing: str
) -> None:
    """DESIGN: raw blocks (librdkafka) and xerial streams (Java) are both accepted."""
    data = {
        "raw": compress(2, consumer_payload),
        "xerial": compress_snappy_xerial(consumer_payload, block_size=1000),
        "framed": bytes(cramjam.snappy.compress(consumer_payload)),
    }[framing]
    got = subscribe(mgr, NOW)
    result = push(mgr, got, NOW, data, compression_type=2)
    assert result.accepted is not None
    assert result.accepted.payload == consumer_payload


def test_golden_zstd_push(consumer_payload: bytes) -> None:
    """The librdkafka 2.16 zstd push decompresses to the golden OTLP bytes."""
    mgr = manager(sub())
    got = subscribe(mgr, NOW)
    data = (FIXTURES / "consumer-push.otlp.zstd").read_bytes()
    result = push(mgr, got, NOW, data, compression_type=4)
    assert result.accepted is not None
    assert result.accepted.payload == consumer_payload
    assert result.accepted.compression_type == 4


def test_pushes_are_counted_by_error_code(mgr: ClientMetricsManager) -> None:
    """stats.pushes_by_error counts every answer by its code."""
    got = subscribe(mgr, NOW)
    push(mgr, got, NOW)
    push(mgr, got, NOW + 1)
    push(mgr, got, NOW + INTERVAL, compression_type=77)
    assert dict(mgr.stats.pushes_by_error) == {
        ErrorCode.NONE: 1,
        ErrorCode.THROTTLING_QUOTA_EXCEEDED: 1,
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE: 1,
    }
    assert dict(mgr.stats.gets_by_error) == {ErrorCode.NONE: 1}
