"""The broker side of KIP-714: Kafka's ``ClientMetricsManager``, sans I/O.

The gateway hands in decoded GetTelemetrySubscriptions and PushTelemetry
requests with the current time and gets plain results back. Behaviour follows
Apache Kafka 4.4 except where docs/kafka-differences.md says otherwise:

* a failed terminating push does not lock the instance out (KAFKA-20898);
* after UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE the next Get
  is not throttled (as Kafka 4.4 does; earlier brokers' ``||`` throttled it);
* PushIntervalMs is the minimum matched ``interval.ms``, even above 300000;
* the decompressed payload is bounded by ``telemetry.max.bytes``;
* empty pushes are accepted *and* handed on (Kafka skips them);
* a push at least ``(1 - early_push_tolerance) x interval`` after the previous
  one is accepted, because clients time pushes from the previous response.
"""

from __future__ import annotations

import operator
import random
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from clientmetrics.errors import ConfigurationError
from clientmetrics.telemetry.compression import (
    KNOWN_COMPRESSION_TYPES,
    CompressionError,
    TelemetryTooLarge,
    decompress,
)
from clientmetrics.telemetry.instances import ClientInstance, InstanceRegistry
from clientmetrics.telemetry.matching import CompiledSubscription, PatternCache
from clientmetrics.telemetry.model import (
    CONTEXT_LABELS,
    RESERVED_UUIDS,
    AcceptedPush,
    ClientContext,
    Subscription,
)
from clientmetrics.telemetry.otlp import InvalidPayload, parse_metrics_data
from clientmetrics.telemetry.stats import StatsRecorder, TelemetryStats
from clientmetrics.telemetry.subscription_id import (
    SubscriptionPlan,
    resolve_plan,
    subscription_order,
)
from clientmetrics.wire.errors import ErrorCode

_INT32_MAX = (1 << 31) - 1
_BASE64_DASH = 62  # index of "-" in the base64url alphabet
#: After these push errors the client must re-fetch at once, so that Get is not throttled.
_REFETCH_ERRORS = frozenset(
    {ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE}
)

#: The connection's labels an accepted push copies, in one C call (per push).
_context_labels = operator.attrgetter(*CONTEXT_LABELS)


@dataclass(frozen=True, slots=True)
class TelemetryConfig:
    """Receiver settings; validated when built."""

    #: ``telemetry.max.bytes``: bound on the compressed and the decompressed payload.
    max_bytes: int = 1048576
    #: AcceptedCompressionTypes, in order of preference (zstd, lz4, gzip, snappy).
    accepted_compression_types: tuple[int, ...] = (4, 3, 1, 2)
    #: Instances tracked at most; the least recently used is dropped beyond.
    max_instances: int = 1_000_000
    #: An instance lives at least this long after its last request.
    min_expiry_ms: int = 60000
    #: PushIntervalMs when no subscription matches.
    default_interval_ms: int = 300000
    #: Fraction of the interval a push may come early and still be accepted.
    early_push_tolerance: float = 0.5

    def __post_init__(self) -> None:
        if not 1 <= self.max_bytes <= _INT32_MAX:
            raise ConfigurationError(f"max_bytes must be in [1, {_INT32_MAX}]")
        types = self.accepted_compression_types
        if any(t not in KNOWN_COMPRESSION_TYPES for t in types) or len(set(types)) != len(types):
            raise ConfigurationError(
                "accepted_compression_types must be distinct ids among 0 (none), 1 (gzip), "
                "2 (snappy), 3 (lz4), 4 (zstd)"
            )
        if self.max_instances < 1:
            raise ConfigurationError("max_instances must be at least 1")
        if self.min_expiry_ms < 0:
            raise ConfigurationError("min_expiry_ms must not be negative")
        if not 1 <= self.default_interval_ms <= _INT32_MAX:
            raise ConfigurationError("default_interval_ms must be a positive int32")
        if not 0.0 <= self.early_push_tolerance < 1.0:
            raise ConfigurationError("early_push_tolerance must be in [0, 1)")


@dataclass(frozen=True, slots=True)
class SubscriptionsResult:
    """A GetTelemetrySubscriptions v0 response body."""

    error_code: ErrorCode
    client_instance_id: uuid.UUID
    subscription_id: int
    accepted_compression_types: tuple[int, ...]
    push_interval_ms: int
    telemetry_max_bytes: int
    delta_temporality: bool
    requested_metrics: tuple[str, ...]
    throttle_time_ms: int = 0


@dataclass(frozen=True, slots=True)
class PendingPush:
    """A push past every check but the payload's: decode it, then ``finish_push``.

    Decoding (``decode_push``) touches no manager state, so the caller may run it
    on another thread while the manager goes on serving other clients.
    """

    instance: ClientInstance
    client_instance_id: uuid.UUID
    subscription_id: int
    terminating: bool
    compression_type: int
    metrics: bytes
    ctx: ClientContext
    now_ms: int
    max_bytes: int


def decode_push(compression_type: int, metrics: bytes, max_bytes: int) -> tuple[ErrorCode, bytes]:
    """Decompress and check a push's payload: the error code, and the OTLP bytes if NONE.

    Pure and thread-safe; cost is linear in ``len(metrics)`` and bounded by ``max_bytes``.
    """
    if not metrics:
        return ErrorCode.NONE, b""
    try:
        payload = decompress(compression_type, metrics, max_bytes)
        parse_metrics_data(payload)
    except TelemetryTooLarge:
        return ErrorCode.TELEMETRY_TOO_LARGE, b""
    except (CompressionError, InvalidPayload):
        return ErrorCode.INVALID_RECORD, b""
    return ErrorCode.NONE, payload


@dataclass(frozen=True, slots=True)
class PushResult:
    """The outcome of one PushTelemetry request."""

    error_code: ErrorCode
    #: Set iff ``error_code`` is NONE: the push to hand to the exporters.
    accepted: AcceptedPush | None


class ClientMetricsManager:
    """Client instances, subscriptions, rate limits and push validation."""

    def __init__(self, config: TelemetryConfig, *, rng: random.Random) -> None:
        self._config = config
        self._rng = rng
        self._subscriptions: dict[str, Subscription] = {}
        self._compiled: tuple[CompiledSubscription, ...] = ()
        self._patterns = PatternCache()
        # Instances matching the same subscriptions share one plan object.
        self._plans: dict[tuple[str, ...], SubscriptionPlan] = {}
        self._version = 0
        self._registry = InstanceRegistry(config.max_instances, config.min_expiry_ms)
        self._stats = StatsRecorder()
        self._push_gap = 1.0 - config.early_push_tolerance

    # -- subscriptions -------------------------------------------------------

    @property
    def subscriptions(self) -> Mapping[str, Subscription]:
        """The current subscriptions by name (read-only view)."""
        return MappingProxyType(self._subscriptions)

    @property
    def subscription_version(self) -> int:
        """Bumped on every effective subscription change (Kafka's subscriptionUpdateVersion)."""
        return self._version

    def set_subscriptions(self, subs: Iterable[Subscription]) -> None:
        """Replace every subscription; a no-op (no version bump) if nothing changed."""
        new = {sub.name: sub for sub in subs}
        if new != self._subscriptions:
            self._install(new)

    def update_subscription(self, name: str, sub: Subscription | None) -> None:
        """Add, replace (``sub``) or remove (``None``) one subscription."""
        if sub is not None and sub.name != name:
            raise ConfigurationError(f"subscription {sub.name!r} stored under name {name!r}")
        if self._subscriptions.get(name) == sub:
            return  # removing an unknown name, or storing an identical one, changes nothing
        new = dict(self._subscriptions)
        if sub is None:
            del new[name]
        else:
            new[name] = sub
        self._install(new)

    def _install(self, subs: dict[str, Subscription]) -> None:
        self._subscriptions = subs
        self._patterns.retain(subs.values())
        # Matched in the order Kafka iterates its map: RequestedMetrics' order follows it.
        ordered = subscription_order(subs.values())
        self._compiled = tuple(self._patterns.compile_subscription(s) for s in ordered)
        self._plans = {}
        # Existing instances see the new version on their next request and are re-created.
        self._version += 1

    def _plan_for(self, client_instance_id: uuid.UUID, ctx: ClientContext) -> SubscriptionPlan:
        matched = [c.subscription for c in self._compiled if c.matches(client_instance_id, ctx)]
        names = tuple(s.name for s in matched)
        plan = self._plans.get(names)
        if plan is None:
            plan = resolve_plan(matched, self._config.default_interval_ms)
            self._plans[names] = plan
        return plan

    # -- instances -----------------------------------------------------------

    def _new_instance_id(self) -> uuid.UUID:
        while True:
            candidate = uuid.UUID(int=self._rng.getrandbits(128))
            # Uuid.randomUuid() also re-draws ids whose base64 text starts with "-"
            # (CLI-unfriendly): that is when the top six bits are 62.
            if (
                candidate not in RESERVED_UUIDS
                and candidate.int not in self._registry
                and candidate.int >> 122 != _BASE64_DASH
            ):
                return candidate

    def _instance(
        self, client_instance_id: uuid.UUID, ctx: ClientContext, now_ms: int
    ) -> ClientInstance:
        """Find or create the instance and re-arm its expiry (Kafka ``clientInstance``)."""
        key = client_instance_id.int
        instance = self._registry.get(key)
        if instance is not None and self._registry.deadline(instance) <= now_ms:
            # Past its deadline but not yet reaped: behave as if the timer had fired.
            self._registry.remove(instance)
            self._stats.instances_expired += 1
            instance = None
        if instance is None:
            plan = self._plan_for(client_instance_id, ctx)
            instance = ClientInstance(key, ctx, plan, self._version)
            self._stats.instances_evicted += self._registry.add(instance)
            self._stats.instances_created += 1
        else:
            if instance.version != self._version:
                # Matched again with the metadata captured when the instance was created.
                instance.reset(self._plan_for(client_instance_id, instance.ctx), self._version)
            self._registry.touch(instance)
        self._registry.arm(instance, now_ms)
        return instance

    def instance_of(self, connection_id: int) -> uuid.UUID | None:
        """The client instance that asked for its subscription on ``connection_id``."""
        key = self._registry.key_of(connection_id)
        return None if key is None else uuid.UUID(int=key)

    def connection_closed(self, connection_id: int) -> None:
        """Forget the instances created on a connection that has closed."""
        self._stats.instances_disconnected += self._registry.connection_closed(connection_id)

    def expire(self, now_ms: int, limit: int | None = None) -> int:
        """Drop instances idle past their expiry; return how many (cheap when none are
        due). ``limit``: look at that many at most (``expiry_due``: more to look at)."""
        removed = self._registry.expire(now_ms, limit)
        self._stats.instances_expired += removed
        return removed

    def expiry_due(self, now_ms: int) -> bool:
        """Whether ``expire`` has more to look at for ``now_ms``."""
        return self._registry.expiry_due(now_ms)

    # -- GetTelemetrySubscriptions -------------------------------------------

    def get_telemetry_subscriptions(
        self, client_instance_id: uuid.UUID | None, ctx: ClientContext, now_ms: int
    ) -> SubscriptionsResult:
        """Answer a GetTelemetrySubscriptions request.

        A missing or reserved id gets a fresh random one; any other id is
        adopted (after a gateway restart, on another gateway, or generated by
        the client under KIP-1313). The id is echoed even on error.
        """
        if client_instance_id is None or client_instance_id in RESERVED_UUIDS:
            client_instance_id = self._new_instance_id()
        instance = self._instance(client_instance_id, ctx, now_ms)
        plan = instance.plan
        since = now_ms - max(instance.last_get_ms, instance.last_push_ms)
        if since >= plan.push_interval_ms:
            instance.last_get_ms = now_ms
            instance.push_granted = True
        elif instance.last_error not in _REFETCH_ERRORS:
            self._stats.get_answered(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
            return SubscriptionsResult(
                ErrorCode.THROTTLING_QUOTA_EXCEEDED, client_instance_id, 0, (), 0, 0, False, ()
            )
        # else: an early re-fetch after 117/76 is answered, but (as in Kafka 4.4) it is not
        # a Get that grants the next push: that one still waits for its interval.
        instance.last_error = ErrorCode.NONE
        self._stats.get_answered(ErrorCode.NONE)
        return SubscriptionsResult(
            error_code=ErrorCode.NONE,
            client_instance_id=client_instance_id,
            subscription_id=instance.subscription_id,
            accepted_compression_types=self._config.accepted_compression_types,
            push_interval_ms=plan.push_interval_ms,
            telemetry_max_bytes=self._config.max_bytes,
            delta_temporality=True,
            requested_metrics=plan.wire_metrics,
        )

    # -- PushTelemetry -------------------------------------------------------

    def begin_push(
        self,
        client_instance_id: uuid.UUID | None,
        subscription_id: int,
        terminating: bool,
        compression_type: int,
        metrics: bytes,
        ctx: ClientContext,
        now_ms: int,
    ) -> PushResult | PendingPush:
        """Run a push's checks up to its payload: the final result, or what to decode.

        Checks, first failure wins: reserved id, already terminated, throttle
        (terminating pushes bypass it), SubscriptionId, compression id,
        compressed size; then (``decode_push``) decompressed size, OTLP decode.
        """
        if client_instance_id is None or client_instance_id in RESERVED_UUIDS:
            self._stats.push_answered(ErrorCode.INVALID_REQUEST, False)
            return PushResult(ErrorCode.INVALID_REQUEST, None)
        instance = self._instance(client_instance_id, ctx, now_ms)
        code = self._admit_push(
            instance,
            subscription_id=subscription_id,
            terminating=terminating,
            compression_type=compression_type,
            size=len(metrics),
            now_ms=now_ms,
        )
        pending = PendingPush(
            instance,
            client_instance_id,
            subscription_id,
            terminating,
            compression_type,
            metrics,
            ctx,
            now_ms,
            self._config.max_bytes,
        )
        if code is not ErrorCode.NONE:
            return self.finish_push(pending, code, b"")
        return pending

    def finish_push(self, pending: PendingPush, code: ErrorCode, payload: bytes) -> PushResult:
        """Record a push's outcome once its payload is decoded (``decode_push``)."""
        instance = pending.instance
        instance.last_error = code
        self._stats.push_answered(code, not pending.metrics)
        if code is not ErrorCode.NONE:
            return PushResult(code, None)
        # Only an accepted terminating push ends the instance (KAFKA-20898).
        instance.terminating = pending.terminating
        ctx = pending.ctx
        accepted = AcceptedPush(
            received_at_ms=pending.now_ms,
            client_instance_id=pending.client_instance_id,
            subscription_id=pending.subscription_id,
            terminating=pending.terminating,
            compression_type=pending.compression_type,
            push_interval_ms=instance.plan.push_interval_ms,
            payload=payload,
            **dict(zip(CONTEXT_LABELS, _context_labels(ctx), strict=True)),
        )
        return PushResult(ErrorCode.NONE, accepted)

    def _admit_push(
        self,
        instance: ClientInstance,
        *,
        subscription_id: int,
        terminating: bool,
        compression_type: int,
        size: int,
        now_ms: int,
    ) -> ErrorCode:
        if instance.terminating:
            return ErrorCode.INVALID_REQUEST
        if not (terminating or instance.push_granted):
            # Clients time the next push from the previous *response*, and some
            # (librdkafka) jitter it, so a push may come early by the tolerance.
            earliest = instance.last_push_ms + instance.plan.push_interval_ms * self._push_gap
            if now_ms < earliest:
                return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        # The slot is used even if a later check fails (Kafka updates lastPush here).
        instance.last_push_ms = now_ms
        instance.push_granted = False
        if subscription_id != instance.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if compression_type not in KNOWN_COMPRESSION_TYPES:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if size > self._config.max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE
        return ErrorCode.NONE

    # -- broker metrics ------------------------------------------------------

    def record_export(self, elapsed_ms: float, ok: bool) -> None:
        """Called by the gateway after the exporters ran for one accepted push."""
        self._stats.export_finished(elapsed_ms, ok)

    @property
    def stats(self) -> TelemetryStats:
        """A snapshot of the broker-side counters."""
        return self._stats.snapshot(len(self._registry))
