"""Body codecs on top of kio, with kio's quirks normalised at this boundary.

kio 0.6.5 quirks and what we do about them:

* **Hostile array lengths abort the process.** kio's native reader allocates an
  array's declared length up front; a tiny frame claiming 2**32 items kills the
  interpreter (Rust OOM abort, not an exception). Entities with arrays are read
  by ``wire.reader.safe_reader`` instead, which bounds lengths by the bytes left.
  Flat entities (the telemetry hot path) keep kio's fast native reader.
* **Zero UUIDs read as ``None``.** Kafka's ``uuid`` type is not nullable; every
  decoded ``None`` uuid (top level and nested) becomes ``UUID(int=0)``, so callers
  compare with ``ZERO_UUID``. kio writes ``None`` and ``UUID(int=0)`` alike.
* **Unknown tagged fields raise ``KeyError``** although the protocol says to skip
  them; **unknown error codes raise ``ValueError``** (kio's enum is closed). The
  safe reader skips such tags and maps such codes to ``unknown_server_error``
  (the number is lost, which only matters to a proxy that re-encodes).
* **Durations are ``datetime.timedelta``** (ThrottleTimeMs, PushIntervalMs): kio
  types them ``i32Timedelta`` and its writer calls ``total_seconds()``.
* **Error codes are kio's ``ErrorCode``** enum (lower-case names); convert with
  ``kio ErrorCode(int(our_code))``. ``wire.error_response`` does it for you.
* Decode errors (kio's ``SerialError`` family and friends) become ``ProtocolError``.
"""

from __future__ import annotations

import functools
import io
import uuid
from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any

from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_schema_field_type,
)
from kio.serial.errors import SerialError, UnexpectedNull

from clientmetrics.wire.errors import ProtocolError
from clientmetrics.wire.fixed import fixed_writer
from clientmetrics.wire.reader import Reader, has_arrays, safe_reader

__all__ = ["ZERO_UUID", "read_entity", "write_entity"]

ZERO_UUID = uuid.UUID(int=0)

# Errors kio's readers raise on malformed input besides its own SerialError family.
_DECODE_FAILURES = (SerialError, ValueError, KeyError, IndexError, OverflowError, TypeError)


def read_entity(entity_type: type, frame: bytes, offset: int) -> Any:
    """Decode one entity of ``entity_type`` from ``frame[offset:]``."""
    try:
        if has_arrays(entity_type):
            # kio's native reader would trust a hostile array length (see wire.reader).
            value, _size = safe_reader(entity_type)(frame, offset)
        else:
            value = _read_flat(entity_type, frame, offset)
    except _DECODE_FAILURES as exc:
        raise ProtocolError(f"cannot decode {entity_type.__name__}: {exc}") from exc
    return _normaliser(entity_type)(value)


def _read_flat(entity_type: type, frame: bytes, offset: int) -> Any:
    try:
        value, _size = _native_reader(entity_type)(frame, offset)
    except (KeyError, ValueError, UnexpectedNull):
        # Unknown tagged field or error code, or a null some client sends where the
        # schema has none (reader.NULL_AS_EMPTY): kio's native reader is strict.
        value, _size = safe_reader(entity_type)(frame, offset)
    return value


def write_entity(entity: Any) -> bytes:
    """Encode one entity: one ``struct.pack`` if it is fixed-width, else kio's writer."""
    entity_type: type = type(entity)
    fast = fixed_writer(entity_type)
    if fast is not None:
        return fast(entity)
    buffer = io.BytesIO()
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
