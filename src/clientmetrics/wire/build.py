"""Build a message entity of any version from plain values: the one message builder.

Kafka messages differ from version to version by the fields they carry. Handlers
describe a message once, as a mapping with every field any version may need, and
``build`` keeps what the target version's dataclass declares, recursing into nested
arrays; durations in milliseconds become the ``timedelta`` kio expects.
``blank_entity`` is the same with every field left out at its schema default (the
error responses of ``wire.replies``).
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping
from dataclasses import MISSING
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial._implicit_defaults import get_implicit_default
from kio.serial._introspect import EntityField, classify_field, get_schema_field_type, is_optional

from clientmetrics.wire.durations import from_millis, timedelta

__all__ = ["blank_entity", "build"]

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    name: str
    field: dataclasses.Field[Any]
    #: The nested dataclass of an array or struct field.
    nested: type | None
    is_duration: bool
    required: bool


@functools.cache
def _plan(cls: type) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls)
    return tuple(
        _Field(
            f.name,
            f,
            _nested_dataclass(hints[f.name]),
            _is_timedelta(hints[f.name]),
            f.default is MISSING and f.default_factory is MISSING,
        )
        for f in dataclasses.fields(cls)
    )


def _nested_dataclass(hint: Any) -> type | None:
    for arg in _flatten(hint):
        if isinstance(arg, type) and dataclasses.is_dataclass(arg):
            return arg
    return None


def _flatten(hint: Any) -> list[Any]:
    args = typing.get_args(hint)
    if not args:
        return [hint]
    out: list[Any] = []
    for arg in args:
        out.extend(_flatten(arg))
    return out


def _is_timedelta(hint: Any) -> bool:
    return any(isinstance(arg, type) and issubclass(arg, timedelta) for arg in _flatten(hint))


def build(cls: type[T], values: Mapping[str, Any], *, blank: bool = False) -> T:
    """Instantiate ``cls`` from ``values``, ignoring keys the version does not have.

    A required field missing from ``values`` is a ``KeyError``, or with ``blank`` its
    schema default (as is a ``None`` given for a field that cannot be null).
    """
    kwargs: dict[str, Any] = {}
    for spec in _plan(cls):  # type: ignore[arg-type]
        value = values.get(spec.name)
        given = spec.name in values and not (
            blank and value is None and not is_optional(spec.field)
        )
        if not given:
            if not spec.required:
                continue
            if not blank:
                raise KeyError(f"{cls.__qualname__}.{spec.name} is required but was not given")
            kwargs[spec.name] = _default(spec.field)
            continue
        if spec.nested is not None and value is not None:
            if isinstance(value, Mapping):
                value = build(spec.nested, value, blank=blank)
            elif isinstance(value, (list, tuple)):
                value = tuple(
                    build(spec.nested, item, blank=blank) if isinstance(item, Mapping) else item
                    for item in value
                )
        elif spec.is_duration and isinstance(value, int):
            value = from_millis(value)
        kwargs[spec.name] = value
    return cls(**kwargs)


def blank_entity(entity_type: type, **values: Any) -> Any:
    """An entity with every field at its schema default, except ``values``.

    Unset error codes are NONE, nullable fields ``None``, arrays empty, numbers 0.
    Names in ``values`` the schema lacks are ignored, so one call fits every version.
    """
    return build(entity_type, values, blank=True)


def _default(field: Any) -> Any:
    kind = classify_field(field)
    if kind.is_array:
        return ()
    if is_optional(field):
        return None
    if isinstance(kind, EntityField):
        return blank_entity(kind.type_)
    if get_schema_field_type(field) == "error_code":
        return KioErrorCode.none
    if kind.type_ is bool:
        return False
    return get_implicit_default(kind.type_)
