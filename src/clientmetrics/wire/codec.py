"""Body codecs on top of kio, with kio's quirks normalised at this boundary.

kio 0.6.5 quirks and what we do about them:

* **Zero UUIDs read as ``None``.** Kafka's ``uuid`` type is not nullable; we turn
  every decoded ``None`` uuid (top level and nested) back into ``UUID(int=0)``
  so callers compare against ``ZERO_UUID`` instead of ``None``. kio writes both
  ``None`` and ``UUID(int=0)`` as sixteen zero bytes.
* **Unknown tagged fields raise ``KeyError``** in kio's native reader, although
  the protocol says they must be skipped. We then decode again with a tolerant
  reader built here from the same dataclass metadata, which skips them.
* **Unknown error codes raise ``ValueError``** (kio's ``ErrorCode`` enum is
  closed). The tolerant reader maps them to ``unknown_server_error``; the
  original number is lost, which only matters to a proxy that re-encodes.
* Decode errors are kio's ``SerialError`` family; we raise ``ProtocolError``.

The fast path is kio's native reader; both readers and writers are cached per
entity class.
"""

from __future__ import annotations

import functools
import io
import uuid
from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.serial._parse import get_field_reader
from kio.serial.errors import SerialError
from kio.serial.readers import (
    compact_array_reader,
    legacy_array_reader,
    read_int8,
    read_int16,
    read_unsigned_varint,
)

from clientmetrics.wire.errors import ProtocolError

__all__ = ["ZERO_UUID", "read_entity", "write_entity"]

ZERO_UUID = uuid.UUID(int=0)

Reader = Callable[[Any, int], tuple[Any, int]]
"""kio's reader convention: ``reader(buffer, offset) -> (value, bytes consumed)``."""

# Errors kio's readers raise on malformed input besides its own SerialError family.
_DECODE_FAILURES = (SerialError, ValueError, KeyError, IndexError, OverflowError, TypeError)


def read_entity(entity_type: type, frame: bytes, offset: int) -> Any:
    """Decode one entity of ``entity_type`` from ``frame[offset:]``."""
    try:
        value, _size = _native_reader(entity_type)(frame, offset)
    except (KeyError, ValueError):
        # Unknown tagged field or error code: kio's native reader is strict about both.
        try:
            value, _size = _tolerant_reader(entity_type)(frame, offset)
        except _DECODE_FAILURES as exc:
            raise ProtocolError(f"cannot decode {entity_type.__name__}: {exc}") from exc
    except _DECODE_FAILURES as exc:
        raise ProtocolError(f"cannot decode {entity_type.__name__}: {exc}") from exc
    return _normaliser(entity_type)(value)


def write_entity(entity: Any) -> bytes:
    """Encode one entity with kio's writer."""
    buffer = io.BytesIO()
    entity_type: type = type(entity)
    _writer(entity_type)(buffer, entity)
    return buffer.getvalue()


@functools.cache
def _native_reader(entity_type: type) -> Reader:
    return entity_reader(entity_type)


@functools.cache
def _writer(entity_type: type) -> Callable[[io.BytesIO, Any], None]:
    return entity_writer(entity_type)


def _identity(value: Any) -> Any:
    return value


@functools.cache
def _normaliser(entity_type: type) -> Callable[[Any], Any]:
    """A function replacing kio's ``None`` uuids by ``ZERO_UUID``, identity if none can occur."""
    steps: list[tuple[str, Callable[[Any], Any]]] = []
    for field in fields(entity_type):
        kind = classify_field(field)
        if isinstance(kind, EntityField | EntityTupleField):
            inner = _normaliser(kind.type_)
            if inner is _identity:
                continue
            if kind.is_array:
                steps.append((field.name, functools.partial(_map_tuple, inner)))
            else:
                steps.append((field.name, functools.partial(_map_optional, inner)))
        elif get_schema_field_type(field) == "uuid" and not kind.is_array:
            steps.append((field.name, _zero_if_none))
    if not steps:
        return _identity

    def normalise(value: Any) -> Any:
        changes = {}
        for name, step in steps:
            old = getattr(value, name)
            new = step(old)
            if new is not old:
                changes[name] = new
        return replace(value, **changes) if changes else value

    return normalise


def _zero_if_none(value: uuid.UUID | None) -> uuid.UUID:
    return ZERO_UUID if value is None else value


def _map_optional(inner: Callable[[Any], Any], value: Any) -> Any:
    return None if value is None else inner(value)


def _map_tuple(inner: Callable[[Any], Any], values: tuple[Any, ...] | None) -> Any:
    if values is None:
        return None
    mapped = tuple(inner(item) for item in values)
    return values if all(a is b for a, b in zip(mapped, values, strict=True)) else mapped


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


def _field_reader(entity_type: type, field: Any, is_tag: bool) -> Reader:
    kind = classify_field(field)
    flexible = bool(entity_type.__flexible__)  # type: ignore[attr-defined]
    if isinstance(kind, EntityField | EntityTupleField):
        item = _tolerant_reader(kind.type_)
        if kind.is_array:
            array = compact_array_reader if flexible else legacy_array_reader
            return array(item)
        return _nullable(item) if is_optional(field) and not is_tag else item
    if get_schema_field_type(field) == "error_code" and not kind.is_array:
        return _read_error_code
    is_header = entity_type.__name__ == "RequestHeader"
    return get_field_reader(entity_type, field, is_header, is_tag)


@functools.cache
def _tolerant_reader(entity_type: type) -> Reader:
    """A pure-Python reader that skips unknown tagged fields (slow path only)."""
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
