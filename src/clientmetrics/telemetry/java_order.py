"""The iteration order of Java's ``HashSet`` and ``ConcurrentHashMap`` of strings.

Kafka's broker sends RequestedMetrics in the order its ``HashSet`` iterates, and
builds the SubscriptionId from that set's ``toString()`` (reference §2.5): both are
on the wire, so the gateway reproduces the order. A hash table iterates bucket by
bucket (bucket = spread hash masked by the table size), and within a bucket in
insertion order (resizing keeps each bucket's relative order). So the order follows
from three things modelled here: ``String.hashCode``, the spread, and how the table
grew (``HashMap.putVal``: double when the size passes 3/4 of the table, or when a
bucket reaches 9 entries in a table smaller than 64).

Not modelled: buckets turned into trees (9 or more strings in one bucket of a table
of 64 or more; their order then follows tree insertion), and, for the map of
subscriptions, the insertion history a ``ConcurrentHashMap`` bucket keeps (names
sharing a bucket are taken by name). Both need many colliding hashes.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterable

__all__ = ["hash_set_order", "map_key_order", "string_hash"]

_MASK32 = 0xFFFFFFFF
_DEFAULT_CAPACITY = 16
_TREEIFY_THRESHOLD = 8
_MIN_TREEIFY_CAPACITY = 64


def string_hash(text: str) -> int:
    """Java's ``String.hashCode()`` as an unsigned 32-bit int (UTF-16 code units)."""
    h = 0
    units = text.encode("utf-16-be")
    for (unit,) in struct.iter_unpack(">H", units):
        h = (31 * h + unit) & _MASK32
    return h


def _spread(text: str) -> int:
    h = string_hash(text)
    return h ^ (h >> 16)


def _table_size_for(capacity: int) -> int:
    size = 1
    while size < capacity:
        size <<= 1
    return size


def _float32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


def _initial_capacity(count: int) -> int:
    """``new HashSet<>(collection)``: ``max((int) (size / .75f) + 1, 16)``, a power of two."""
    return _table_size_for(max(int(_float32(count / 0.75)) + 1, _DEFAULT_CAPACITY))


def hash_set_order(items: Iterable[str], *, copy_of: int | None = None) -> tuple[str, ...]:
    """The iteration order of a ``HashSet`` the items were added to, in this order.

    ``copy_of``: the set was made by ``new HashSet<>(collection)`` of that many items
    (its table is presized); otherwise by ``new HashSet<>()`` (a table of 16).
    """
    capacity = _DEFAULT_CAPACITY if copy_of is None else _initial_capacity(copy_of)
    spreads: dict[str, int] = {}
    # Items per bucket, counted again only when the table grows: linear, not a scan of
    # every item per insertion (1,000 subscriptions' metrics took 150 ms that way).
    chains: Counter[int] = Counter()
    for item in items:
        if item in spreads:
            continue
        spread = _spread(item)
        bucket = spread & (capacity - 1)
        chain = chains[bucket]
        spreads[item] = spread
        chains[bucket] += 1
        grown = capacity
        if chain >= _TREEIFY_THRESHOLD and capacity < _MIN_TREEIFY_CAPACITY:
            capacity <<= 1  # treeifyBin resizes a small table instead
        if len(spreads) > capacity * 3 // 4:
            capacity <<= 1
        if capacity != grown:
            chains = Counter(s & (capacity - 1) for s in spreads.values())
    position = {item: i for i, item in enumerate(spreads)}
    mask = capacity - 1
    return tuple(sorted(spreads, key=lambda item: (spreads[item] & mask, position[item])))


def map_key_order(keys: Iterable[str]) -> tuple[str, ...]:
    """The iteration order of a ``ConcurrentHashMap`` holding these keys.

    Its table starts at 16 and doubles once the count reaches 3/4 of it; it never
    shrinks, so a map that once held more keys may iterate differently.
    """
    names = sorted(set(keys))
    capacity = _DEFAULT_CAPACITY
    while len(names) >= capacity * 3 // 4:
        capacity <<= 1
    mask = capacity - 1
    return tuple(sorted(names, key=lambda name: ((_spread(name) & 0x7FFFFFFF) & mask, name)))
