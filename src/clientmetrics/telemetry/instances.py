"""The client-instance registry: bounded LRU, expiry wheel, creating-connection index.

Built for a million instances. Each instance is one ``__slots__`` object keyed
by the 128-bit integer of its id (no ``uuid.UUID`` kept alive), pointing at the
shared ``ClientContext`` of its connection and a shared ``SubscriptionPlan``.

Instances are kept out of the cyclic garbage collector (``PyObject_GC_UnTrack``):
they reference only their shared context and plan, and nothing refers back to
them but the registry, so they can never be part of a cycle and reference
counting frees them. A collector that tracked them would walk every one of them
(a full collection over a million instances holds the event loop for hundreds of
milliseconds, and a flood of new ids fills the young generations).

Expiry uses a lazy timing wheel: an instance sits in one one-second bucket.
Re-arming only moves the deadline on the object; when its bucket comes due the
real deadline is checked and the instance is expired or re-filed. So
``expire(now)`` touches only due buckets, and each instance a few times per
expiry period, never the whole registry.
"""

from __future__ import annotations

import ctypes
import heapq
import uuid
from collections import OrderedDict
from collections.abc import Callable

from clientmetrics.telemetry.model import ClientContext
from clientmetrics.telemetry.subscription_id import SubscriptionPlan
from clientmetrics.wire.errors import ErrorCode

#: "Never happened" for timestamps: far enough in the past that any interval has passed.
NEVER = -(1 << 62)
_NOT_FILED = -1


def _gc_untracker() -> Callable[[object], None]:
    """CPython's ``PyObject_GC_UnTrack`` (a no-op elsewhere)."""
    try:
        untrack = ctypes.pythonapi.PyObject_GC_UnTrack
    except AttributeError:  # not CPython
        return lambda _: None
    untrack.argtypes = (ctypes.py_object,)
    untrack.restype = None
    function: Callable[[object], None] = untrack
    return function


_untrack = _gc_untracker()


class ClientInstance:
    """One client instance's broker-side state (Kafka ``ClientMetricsInstance``)."""

    # Every field is a reference to a shared object where possible (ctx, plan,
    # version, error, flags, the caller's now_ms); the SubscriptionId and the
    # expiry deadline are derived rather than stored, to keep ints per instance few.
    __slots__ = (
        "ctx",
        "key",
        "last_error",
        "last_get_ms",
        "last_push_ms",
        "last_seen_ms",
        "plan",
        "push_granted",
        "terminating",
        "version",
        "wheel_slot",
    )

    def __init__(self, key: int, ctx: ClientContext, plan: SubscriptionPlan, version: int) -> None:
        self.key = key
        self.ctx = ctx
        self.wheel_slot = _NOT_FILED
        self.last_seen_ms = NEVER
        self.reset(plan, version)
        _untrack(self)  # see the module's docstring: never in a cycle

    def reset(self, plan: SubscriptionPlan, version: int) -> None:
        """Start afresh under a new plan: Kafka re-creates the instance on a subscription change."""
        self.plan = plan
        self.version = version
        self.last_get_ms = NEVER
        self.last_push_ms = NEVER
        #: True after an accepted Get until the next push: that push is never throttled.
        self.push_granted = False
        self.last_error = ErrorCode.NONE
        self.terminating = False

    @property
    def subscription_id(self) -> int:
        """The SubscriptionId this instance was given."""
        return self.plan.subscription_id_for_key(self.key)

    @property
    def client_instance_id(self) -> uuid.UUID:
        """The instance id as a UUID (built on demand; only the int is stored)."""
        return uuid.UUID(int=self.key)


class _Bucket:
    """The keys filed under one wheel slot."""

    __slots__ = ("keys", "slot")

    def __init__(self, slot: int) -> None:
        self.slot = slot
        self.keys: list[int] = []


class InstanceRegistry:
    """Instances by id, in least-recently-used order, with expiry and disconnect removal."""

    __slots__ = ("_bucket_ms", "_by_conn", "_by_key", "_due", "_max", "_min_expiry", "_wheel")

    def __init__(self, max_instances: int, min_expiry_ms: int, bucket_ms: int = 1000) -> None:
        self._max = max_instances
        self._min_expiry = min_expiry_ms
        self._bucket_ms = bucket_ms
        self._by_key: OrderedDict[int, ClientInstance] = OrderedDict()
        # connection id -> the key it created, or a set when it created several
        # (a proxy or simulator); the common single case costs no set.
        self._by_conn: dict[int, int | set[int]] = {}
        self._wheel: dict[int, _Bucket] = {}
        self._due: list[int] = []  # heap of wheel slots present in _wheel

    def __len__(self) -> int:
        return len(self._by_key)

    def __contains__(self, key: int) -> bool:
        return key in self._by_key

    def get(self, key: int) -> ClientInstance | None:
        """The instance for ``key`` (does not count as a use)."""
        return self._by_key.get(key)

    def touch(self, instance: ClientInstance) -> None:
        """Mark ``instance`` most recently used."""
        self._by_key.move_to_end(instance.key)

    def add(self, instance: ClientInstance) -> int:
        """Register a new instance; returns how many old ones LRU eviction dropped."""
        self._by_key[instance.key] = instance
        conn = instance.ctx.connection_id
        existing = self._by_conn.get(conn)
        if existing is None:
            self._by_conn[conn] = instance.key
        elif isinstance(existing, set):
            existing.add(instance.key)
        elif existing != instance.key:
            self._by_conn[conn] = {existing, instance.key}
        evicted = 0
        while len(self._by_key) > self._max:
            _, oldest = self._by_key.popitem(last=False)
            self._forget(oldest)
            evicted += 1
        return evicted

    def remove(self, instance: ClientInstance) -> None:
        """Drop ``instance`` (expired, or its connection closed)."""
        if self._by_key.get(instance.key) is instance:
            del self._by_key[instance.key]
            self._forget(instance)

    def _forget(self, instance: ClientInstance) -> None:
        instance.wheel_slot = _NOT_FILED  # stale wheel entries now skip it
        conn = instance.ctx.connection_id
        existing = self._by_conn.get(conn)
        if isinstance(existing, set):
            existing.discard(instance.key)
            if len(existing) == 1:
                self._by_conn[conn] = next(iter(existing))
            elif not existing:
                del self._by_conn[conn]
        elif existing == instance.key:
            del self._by_conn[conn]

    def deadline(self, instance: ClientInstance) -> int:
        """When ``instance`` expires: ``max(min expiry, 3 x interval)`` after its last request."""
        interval = instance.plan.push_interval_ms
        return instance.last_seen_ms + max(self._min_expiry, 3 * interval)

    def arm(self, instance: ClientInstance, now_ms: int) -> None:
        """Re-arm the expiry from ``now_ms``; re-file only if the bucket would be too late."""
        instance.last_seen_ms = now_ms
        slot = self._slot(self.deadline(instance))
        if instance.wheel_slot == _NOT_FILED or slot < instance.wheel_slot:
            self._file(instance, slot)

    def _slot(self, at_ms: int) -> int:
        return at_ms // self._bucket_ms  # a bucket is visited once its start has passed

    def _file(self, instance: ClientInstance, slot: int) -> None:
        bucket = self._wheel.get(slot)
        if bucket is None:
            bucket = self._wheel[slot] = _Bucket(slot)
            heapq.heappush(self._due, slot)
        # The bucket's own int object: a million instances share a few slot ints.
        instance.wheel_slot = bucket.slot
        bucket.keys.append(instance.key)

    def expire(self, now_ms: int, limit: int | None = None) -> int:
        """Remove every instance whose deadline is at or before ``now_ms``; return how many.

        With ``limit``, look at no more than that many filed entries and leave the
        rest of the due buckets for the next call (``expiry_due`` says whether any
        is left): instances created together are filed together, and re-filing them
        in one call held the event loop 14 ms for 20,000 and 237 ms for 200,000.
        """
        removed = 0
        left = limit  # entries this call may still look at (None: all)
        not_yet: list[ClientInstance] = []
        while self.expiry_due(now_ms) and left != 0:
            slot = heapq.heappop(self._due)
            bucket = self._wheel.pop(slot)
            keys = bucket.keys
            if left is not None:
                if left < len(keys):  # the rest of the bucket waits for the next call
                    bucket.keys = keys[left:]
                    keys = keys[:left]
                    self._wheel[slot] = bucket
                    heapq.heappush(self._due, slot)
                left -= len(keys)
            for key in keys:
                instance = self._by_key.get(key)
                if instance is None or instance.wheel_slot != slot:
                    continue  # removed, or re-filed into an earlier bucket
                if self.deadline(instance) <= now_ms:
                    self.remove(instance)
                    removed += 1
                else:
                    not_yet.append(instance)
        # Re-filed after the loop: the bucket holding `now` is only partly due.
        for instance in not_yet:
            self._file(instance, self._slot(self.deadline(instance)))
        return removed

    def expiry_due(self, now_ms: int) -> bool:
        """Whether a bucket due at ``now_ms`` is still to be looked at."""
        return bool(self._due) and self._due[0] * self._bucket_ms <= now_ms

    def key_of(self, connection_id: int) -> int | None:
        """The key of an instance created on ``connection_id`` (the lowest of several)."""
        existing = self._by_conn.get(connection_id)
        if existing is None or isinstance(existing, int):
            return existing
        return min(existing)

    def connection_closed(self, connection_id: int) -> int:
        """Remove the instances ``connection_id`` created; return how many."""
        existing = self._by_conn.pop(connection_id, None)
        keys = existing if isinstance(existing, set) else () if existing is None else (existing,)
        removed = 0
        for key in list(keys):
            instance = self._by_key.pop(key, None)
            if instance is not None:
                instance.wheel_slot = _NOT_FILED
                removed += 1
        return removed
