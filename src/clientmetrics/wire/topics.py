"""Which topics a request names, and the refusal that answers it per topic.

The proxy keeps every client off the subscription store's topic. It finds a
request naming that topic by decoding it (any api kio knows, not only the ones
the gateway serves) and walking every field that holds a topic name or a topic
id, in any version; and it answers the request with the error on every item the
request named, shaped as the api's response (Produce per partition, DeleteTopics
per topic, ConsumerGroupHeartbeat at the top, ...), as Kafka answers a topic the
caller may not touch. Sans-IO: bytes and entities in, bytes out.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
import uuid
from collections.abc import Collection, Mapping
from typing import Any

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.index import api_key_map
from kio.serial._introspect import classify_field

from clientmetrics.wire.build import blank_entity, build
from clientmetrics.wire.codec import read_entity
from clientmetrics.wire.errors import ErrorCode, ProtocolError, UnsupportedApi
from clientmetrics.wire.headers import RequestHeader, read_uvarint, skip_tagged_fields
from clientmetrics.wire.messages import encode_response
from clientmetrics.wire.schemas import SERVED, request_type, response_type

__all__ = [
    "api_name",
    "decode_any_request",
    "names_topic",
    "produce_topics",
    "refused_topic_entry",
    "topic_refusal",
]

FIRST_FLEXIBLE_PRODUCE = 9
#: Produce names topics by id from v13 (KIP-516), by name before.
FIRST_PRODUCE_BY_ID = 13
_INT16, _INT32 = struct.Struct(">h"), struct.Struct(">i")

#: Fields whose string value (or string items) are topic names, in any request.
NAME_FIELDS = frozenset(
    {
        "name",
        "topic",
        "topic_name",
        "topic_names",
        "subscribed_topic_names",
        "source_topics",
        "repartition_sink_topics",
        "v3_and_below_topics",
    }
)
#: Config resource names are topic names when their type says TOPIC (2).
_RESOURCE_NAMES = {"resource_name": "resource_type"}
_TOPIC_RESOURCE_TYPES = frozenset({2})


def api_name(api_key: int) -> str:
    """Kafka's name of an api key (``DeleteRecords``), or ``api N`` if unknown."""
    name = api_key_map.get(api_key)
    if name is None:
        return f"api {api_key}"
    return "".join(part.capitalize() for part in name.split("_"))


def _request_entity(api_key: int, api_version: int) -> type:
    if api_key in SERVED:
        return request_type(api_key, api_version)
    try:
        return load_request_schema(api_key, api_version)
    except (KeyError, ValueError, KioIndexError) as exc:
        raise UnsupportedApi(api_key, api_version) from exc


def _response_entity(api_key: int, api_version: int) -> type:
    if api_key in SERVED:
        return response_type(api_key, api_version)
    try:
        return load_response_schema(api_key, api_version)
    except (KeyError, ValueError, KioIndexError) as exc:
        raise UnsupportedApi(api_key, api_version) from exc


def decode_any_request(header: RequestHeader, frame: bytes, offset: int) -> Any:
    """The body of any request kio has a schema for (``UnsupportedApi`` otherwise,
    ``ProtocolError`` for bad bytes); not bounded to the apis the gateway serves."""
    return read_entity(_request_entity(header.api_key, header.api_version), frame, offset)


def names_topic(entity: Any, names: Collection[str], ids: Collection[uuid.UUID]) -> bool:
    """Whether ``entity`` (a decoded request) names one of ``names`` or ``ids`` anywhere."""
    for field in dataclasses.fields(entity):
        value = getattr(entity, field.name)
        if _field_names(entity, field.name, value, names, ids):
            return True
        items = value if isinstance(value, tuple) else (value,)
        if any(dataclasses.is_dataclass(i) and names_topic(i, names, ids) for i in items):
            return True
    return False


def _field_names(
    entity: Any, name: str, value: Any, names: Collection[str], ids: Collection[uuid.UUID]
) -> bool:
    if name in NAME_FIELDS:
        return _holds_name(value, names)
    if name == "topic_id":
        return value in ids
    type_field = _RESOURCE_NAMES.get(name)
    return (
        type_field is not None
        and value in names
        and int(getattr(entity, type_field, 0)) in _TOPIC_RESOURCE_TYPES
    )


def produce_topics(frame: bytes | bytearray, offset: int, version: int) -> list[bytes]:
    """The topics a Produce request (v3-13, body at ``offset``) names: their names'
    bytes, or (v13) their 16-byte ids. Walked, not decoded: records, the request's
    bulk, are skipped by their length. ``ProtocolError`` for a malformed body."""
    try:
        return _produce_topics(frame, offset, version)
    except (IndexError, struct.error) as exc:
        raise ProtocolError(f"Produce v{version}: truncated body") from exc


def _produce_topics(frame: bytes | bytearray, offset: int, version: int) -> list[bytes]:
    flexible = version >= FIRST_FLEXIBLE_PRODUCE
    _, offset = _span(frame, offset, flexible)  # transactional id
    topics, offset = _array(frame, offset + 6, flexible)  # after acks and timeout
    out: list[bytes] = []
    for _ in range(topics):
        if version >= FIRST_PRODUCE_BY_ID:
            start, offset = offset, offset + 16
        else:
            start, offset = _span(frame, offset, flexible)
        out.append(bytes(frame[start:offset]))
        partitions, offset = _array(frame, offset, flexible)
        for _ in range(partitions):
            _, offset = _span(frame, offset + 4, flexible, wide=True)  # index, records
            if flexible:
                offset = skip_tagged_fields(frame, offset)
        if flexible:
            offset = skip_tagged_fields(frame, offset)
        if offset > len(frame):
            raise ProtocolError(f"Produce v{version}: a length runs past the frame")
    return out


def _span(
    frame: bytes | bytearray, offset: int, flexible: bool, *, wide: bool = False
) -> tuple[int, int]:
    """Where a (nullable) string or bytes field's content starts, and where it ends:
    compact (uvarint length + 1), else an int16 length (int32 for ``wide`` bytes)."""
    if flexible:
        length, offset = read_uvarint(frame, offset)
        return offset, offset + max(length - 1, 0)
    size = _INT32 if wide else _INT16
    (length,) = size.unpack_from(frame, offset)
    offset += size.size
    return offset, offset + max(length, 0)


def _array(frame: bytes | bytearray, offset: int, flexible: bool) -> tuple[int, int]:
    """An array's item count (null: none), bounded by the bytes left (each item
    takes at least one), and the offset of its first item."""
    if flexible:
        count, offset = read_uvarint(frame, offset)
        count -= 1
    else:
        (count,) = _INT32.unpack_from(frame, offset)
        offset += 4
    if count > len(frame) - offset:
        raise ProtocolError(f"array of {count} items in {len(frame) - offset} bytes")
    return max(count, 0), offset


def _holds_name(value: Any, names: Collection[str]) -> bool:
    if isinstance(value, str):
        return value in names
    if isinstance(value, tuple):
        return any(isinstance(item, str) and item in names for item in value)
    return False


# -- the refusal -------------------------------------------------------------------
#: Response list -> the request lists it answers, item for item (first present wins).
_ANSWERS: Mapping[str, tuple[str, ...]] = {
    "responses": ("topic_data", "topics", "topic_names", "resources"),
    "partition_responses": ("partition_data",),
    "topics": ("topics",),
    "partitions": ("partitions", "partition_indexes"),
    "results": ("topics", "resources", "creations"),
    "filter_results": ("filters",),
    "replica_election_results": ("topic_partitions",),
    "partition_result": ("partitions",),
    "results_by_transaction": ("transactions",),
    "results_by_topic_v3_and_below": ("v3_and_below_topics",),
    "topic_results": ("topics",),
    "results_by_partition": ("partitions",),
    "groups": ("groups",),
    "markers": ("markers",),
}
_TOPIC_NAMES = ("name", "topic", "topic_name")
_PARTITION_INDEXES = ("index", "partition_index", "partition", "partition_id")
#: Identifying fields a response item takes over from the request item it answers.
_COPIED = frozenset(
    {"topic_id", "group_id", "transactional_id", "resource_type", "resource_name", "producer_id"}
)
#: Offsets, epochs and times a refused partition has none of (Kafka's -1).
_NONE_YET = frozenset(
    {
        "base_offset",
        "log_append_time",  # a datetime in some versions: left at its default there
        "log_start_offset",
        "high_watermark",
        "last_stable_offset",
        "offset",
        "timestamp",
        "leader_epoch",
        "low_watermark",
        "committed_offset",
        "committed_leader_epoch",
        "preferred_read_replica",
        "end_offset",
    }
)
_ERROR_CODES = frozenset({"error_code", "partition_error_code"})


@functools.cache
def _lists(entity_type: type) -> dict[str, type | None]:
    """Array fields of an entity: name -> item entity (None: an array of scalars)."""
    out: dict[str, type | None] = {}
    for field in dataclasses.fields(entity_type):
        kind = classify_field(field)
        if kind.is_array:
            item = kind.type_
            out[field.name] = item if dataclasses.is_dataclass(item) else None
    return out


@functools.cache
def _int_field(entity_type: type, name: str) -> bool:
    field = next(f for f in dataclasses.fields(entity_type) if f.name == name)
    kind = classify_field(field).type_
    return isinstance(kind, type) and issubclass(kind, int)


def _first(source: Any, candidates: tuple[str, ...], scalar: type) -> Any:
    if isinstance(source, scalar) and not isinstance(source, bool):
        return source
    for name in candidates:
        value = getattr(source, name, None)
        if value is not None:
            return value
    return None


def _mirror(
    entity_type: type, source: Any, code: KioErrorCode, message: str
) -> tuple[dict[str, Any], bool]:
    """Values for an ``entity_type`` answering request item ``source`` with ``code``;
    and whether some item below carries the error."""
    values: dict[str, Any] = {}
    carried = False  # by an item below, not by this entity itself
    lists = _lists(entity_type)
    for field in dataclasses.fields(entity_type):
        name = field.name
        if name in lists:
            item_type = lists[name]
            items = _first(source, _ANSWERS.get(name, ()), tuple)
            if item_type is None or not items:
                continue
            mirrored = [_mirror(item_type, item, code, message) for item in items]
            values[name] = [m for m, _ in mirrored]
            carried = carried or any(c or _carries(m) for m, c in mirrored)
        elif name == "records":
            values[name] = b""  # none (ShareFetch's may not be null)
        elif name in _ERROR_CODES:
            values[name] = code
        elif name == "error_message":
            values[name] = message
        elif name in _TOPIC_NAMES:
            values[name] = _first(source, _TOPIC_NAMES, str)
        elif name in _PARTITION_INDEXES:
            values[name] = _first(source, _PARTITION_INDEXES, int)
        elif name in _COPIED:
            values[name] = getattr(source, name, None)
        elif name in _NONE_YET and _int_field(entity_type, name):
            values[name] = -1
    return values, carried


def _carries(values: Mapping[str, Any]) -> bool:
    return any(name in values for name in _ERROR_CODES)


def topic_refusal(header: RequestHeader, body: Any, code: ErrorCode, message: str) -> bytes:
    """The framed response refusing every item of request ``body`` with ``code``.

    Each topic, partition, resource or transaction the request named gets ``code``
    (and ``message`` where the item has a message); the top-level error code is
    ``code`` only when no item carries it, as Kafka answers a refused topic (a
    Fetch's top-level code stays NONE, a ConsumerGroupHeartbeat's is the error).
    ``UnsupportedApi`` when no response schema is known for the version.
    """
    response = _response_entity(header.api_key, header.api_version)
    kio_code = KioErrorCode(int(code))
    values, carried = _mirror(response, body, kio_code, message)
    if "error_code" in values:
        values["error_code"] = KioErrorCode.none if carried else kio_code
    if "error_message" in values and carried:
        values["error_message"] = None
    return encode_response(header, build(response, values, blank=True))


def refused_topic_entry(entity_type: type, name: str | None, code: ErrorCode) -> Any:
    """A Metadata-style topic entry that says only ``code`` (no id, no partitions)."""
    return blank_entity(entity_type, error_code=KioErrorCode(int(code)), name=name)
