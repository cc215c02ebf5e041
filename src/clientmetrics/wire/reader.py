"""A bounded, tolerant pure-Python entity reader built from kio's dataclass metadata.

Why it exists — two defects of kio 0.6.5's native reader:

* it pre-allocates an array's declared length before reading any item, so a
  20-byte frame claiming 2**32 items makes Rust abort the whole process
  ("memory allocation ... failed"); a peer could kill the gateway at will;
* it raises ``KeyError`` on an unknown tagged field, which the protocol says
  must be skipped, and ``ValueError`` on an error code its enum lacks.

This reader checks every array length against the bytes left before reading
items, skips unknown tags and maps unknown error codes to
``unknown_server_error``. It still uses kio's native readers for scalars,
strings and bytes, which bound their lengths by the buffer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.serial._parse import get_field_reader, get_reader
from kio.serial.readers import read_int8, read_int16, read_int32, read_unsigned_varint

from clientmetrics.wire.errors import ProtocolError

__all__ = ["Reader", "has_arrays", "safe_reader"]

Reader = Callable[[Any, int], tuple[Any, int]]
"""kio's reader convention: ``reader(buffer, offset) -> (value, bytes consumed)``."""

#: Non-nullable fields real clients send as null, read as empty instead. librdkafka
#: before its PR #4912 pushes a null Metrics when no metric matched; Kafka rejects
#: that and the client reconnects in a loop (confluent-kafka-python issue #2185).
NULL_AS_EMPTY = frozenset({("PushTelemetryRequest", "metrics")})


@functools.cache
def has_arrays(entity_type: type) -> bool:
    """Whether an entity (or any entity nested in it) has an array field."""
    for field in fields(entity_type):
        kind = classify_field(field)
        if kind.is_array:
            return True
        if isinstance(kind, EntityField) and has_arrays(kind.type_):
            return True
    return False


@functools.cache
def safe_reader(entity_type: type) -> Reader:
    """The reader for ``entity_type``: bounded arrays, unknown tags skipped."""
    plain: list[tuple[str, Reader]] = []
    tagged: dict[int, tuple[str, Reader]] = {}
    defaults: dict[str, Any] = {}
    for field in fields(entity_type):
        tag = get_field_tag(field)
        reader = _field_reader(entity_type, field, tag is not None)
        if tag is None:
            plain.append((field.name, reader))
        else:
            tagged[int(tag)] = (field.name, reader)
            defaults[field.name] = get_tagged_field_default(field)
    flexible = bool(entity_type.__flexible__)  # type: ignore[attr-defined]

    def read(buffer: Any, offset: int) -> tuple[Any, int]:
        start = offset
        values: dict[str, Any] = dict(defaults)
        for name, reader in plain:
            values[name], size = reader(buffer, offset)
            offset += size
        if flexible:
            offset = _read_tags(buffer, offset, tagged, values)
        return entity_type(**values), offset - start

    return read


def _field_reader(entity_type: type, field: Any, is_tag: bool) -> Reader:
    kind = classify_field(field)
    flexible = bool(entity_type.__flexible__)  # type: ignore[attr-defined]
    # Tagged fields are optional by their absence, never by a null marker.
    nullable = is_optional(field) and not is_tag
    if isinstance(kind, EntityField | EntityTupleField):
        item = safe_reader(kind.type_)
        if kind.is_array:
            return _array_reader(item, flexible, nullable)
        return _nullable(item) if nullable else item
    if isinstance(kind, PrimitiveTupleField):
        item = get_reader(get_schema_field_type(field), flexible, False)
        return _array_reader(item, flexible, nullable)
    if get_schema_field_type(field) == "error_code":
        return _read_error_code
    is_header = entity_type.__name__ == "RequestHeader"
    reader = get_field_reader(entity_type, field, is_header, is_tag)
    if (entity_type.__name__, field.name) in NULL_AS_EMPTY:
        return _empty_if_null(reader, flexible)
    return reader


def _empty_if_null(reader: Reader, flexible: bool) -> Reader:
    def read(buffer: Any, offset: int) -> tuple[Any, int]:
        if flexible:
            compact, size = read_unsigned_varint(buffer, offset)
            null = compact == 0  # compact length + 1
        else:
            length, size = read_int32(buffer, offset)
            null = length < 0
        if null:
            return b"", size
        return reader(buffer, offset)

    return read


def _array_reader(item: Reader, flexible: bool, nullable: bool) -> Reader:
    def read(buffer: Any, offset: int) -> tuple[tuple[Any, ...] | None, int]:
        if flexible:
            raw, size = read_unsigned_varint(buffer, offset)
            length = raw - 1
        else:
            length, size = read_int32(buffer, offset)
        if length < 0:
            if not nullable:
                raise ProtocolError("null in a non-nullable array")
            return None, size
        position = offset + size
        # Every item takes at least one byte: a longer claim is a lie, not a reason
        # to allocate.
        if length > len(buffer) - position:
            raise ProtocolError(f"array of {length} items in {len(buffer) - position} bytes")
        items = []
        for _ in range(length):
            value, used = item(buffer, position)
            position += used
            items.append(value)
        return tuple(items), position - offset

    return read


def _read_error_code(buffer: Any, offset: int) -> tuple[KioErrorCode, int]:
    raw, size = read_int16(buffer, offset)
    try:
        return KioErrorCode(raw), size
    except ValueError:
        return KioErrorCode.unknown_server_error, size


def _nullable(reader: Reader) -> Reader:
    def read(buffer: Any, offset: int) -> tuple[Any, int]:
        marker, size = read_int8(buffer, offset)
        if marker < 0:
            return None, size
        value, inner = reader(buffer, offset + size)
        return value, size + inner

    return read


def _read_tags(
    buffer: Any, offset: int, tagged: dict[int, tuple[str, Reader]], values: dict[str, Any]
) -> int:
    count, size = read_unsigned_varint(buffer, offset)
    offset += size
    for _ in range(count):
        tag, size = read_unsigned_varint(buffer, offset)
        offset += size
        length, size = read_unsigned_varint(buffer, offset)
        offset += size
        if offset + length > len(buffer):
            raise ProtocolError("truncated tagged field")
        known = tagged.get(tag)
        if known is not None:
            values[known[0]], _ = known[1](buffer, offset)
        offset += length
    return offset
