"""Hypothesis strategies for kio-style entities, built from their dataclass fields."""

from __future__ import annotations

import datetime
import functools
import uuid
from dataclasses import fields
from typing import Any

from hypothesis import strategies as st
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_schema_field_type,
    is_optional,
)
from kio.static.primitive import Records

from clientmetrics.wire import RequestHeader, request_header_version

MAX_ITEMS = 3


def _field_strategy(field: Any) -> st.SearchStrategy[Any]:
    kind = classify_field(field)
    if isinstance(kind, EntityField | EntityTupleField):
        inner = entities(kind.type_)
        strategy: st.SearchStrategy[Any] = (
            st.lists(inner, max_size=MAX_ITEMS).map(tuple) if kind.is_array else inner
        )
    elif get_schema_field_type(field) == "timedelta_i64":
        # kio reads back exactly up to about 2**48 ms (it goes through a float past
        # that); Kafka's i64 durations (session lifetimes, retention) are far below.
        # Whole days plus the rest: timedelta(milliseconds=big) rounds through a float.
        strategy = st.integers(0, 2**48).map(
            lambda ms: datetime.timedelta(days=ms // 86_400_000, milliseconds=ms % 86_400_000)
        )
    elif get_schema_field_type(field) == "records":
        # Record batches are opaque bytes to the codec (ShareFetch's are not nullable).
        strategy = st.binary(max_size=200).map(Records)
        if is_optional(field):
            strategy = st.none() | strategy
    elif get_schema_field_type(field) == "uuid":
        # Kafka uuids are not nullable: on the wire a "null" is the zero uuid.
        strategy = st.uuids() | st.just(uuid.UUID(int=0))
    else:
        strategy = st.from_type(field.type)
    if is_optional(field) and isinstance(kind, EntityField | EntityTupleField):
        # from_type already yields None for optional primitives; entities need it added.
        return st.none() | strategy
    return strategy


@functools.cache
def entities(entity_type: type) -> st.SearchStrategy[Any]:
    """Any valid instance of a kio-style entity class."""
    return st.builds(
        entity_type,
        **{field.name: _field_strategy(field) for field in fields(entity_type)},
    )


def client_ids() -> st.SearchStrategy[str | None]:
    return st.none() | st.text(max_size=40)


def request_headers(api_key: int, api_version: int) -> st.SearchStrategy[RequestHeader]:
    """Headers of the version Kafka's rule gives this api key and version."""
    header_version = request_header_version(api_key, api_version)
    instance_ids = st.uuids() if header_version >= 3 else st.none()
    return st.builds(
        RequestHeader,
        api_key=st.just(api_key),
        api_version=st.just(api_version),
        correlation_id=st.integers(-(2**31), 2**31 - 1),
        client_id=client_ids() if header_version >= 1 else st.none(),
        client_instance_id=instance_ids,
        header_version=st.just(header_version),
    )
