"""Build a kio message of any version from plain values.

Kafka messages differ from version to version by the fields they carry. Handlers
describe a response once, as a mapping with every field any version may need, and
``build`` keeps what the target version's dataclass declares, recursing into nested
arrays. Durations in milliseconds become the ``timedelta`` kio expects.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


@functools.cache
def _plan(cls: type) -> tuple[tuple[str, type | None, bool, bool], ...]:
    """Per field: name, nested dataclass (for arrays/structs), is-timedelta, required."""
    hints = typing.get_type_hints(cls)
    plan = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        nested = _nested_dataclass(hint)
        is_delta = _is_timedelta(hint)
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        plan.append((f.name, nested, is_delta, required))
    return tuple(plan)


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
    return any(
        isinstance(arg, type) and issubclass(arg, datetime.timedelta) for arg in _flatten(hint)
    )


def build(cls: type[T], values: Mapping[str, Any]) -> T:
    """Instantiate ``cls`` from ``values``, ignoring keys the version does not have."""
    kwargs: dict[str, Any] = {}
    for name, nested, is_delta, required in _plan(cls):  # type: ignore[arg-type]
        if name not in values:
            if required:
                raise KeyError(f"{cls.__qualname__}.{name} is required but was not given")
            continue
        value = values[name]
        if nested is not None and value is not None:
            if isinstance(value, Mapping):
                value = build(nested, value)
            elif isinstance(value, (list, tuple)):
                value = tuple(
                    build(nested, item) if isinstance(item, Mapping) else item for item in value
                )
        elif is_delta and isinstance(value, int):
            value = datetime.timedelta(milliseconds=value)
        kwargs[name] = value
    return cls(**kwargs)


__all__ = ["build"]
