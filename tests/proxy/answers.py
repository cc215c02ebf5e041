"""Reading the error codes out of any decoded Kafka response (the store topic's tests)."""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.index import load_response_schema

from clientmetrics.wire import parse_response_header, response_header_version
from clientmetrics.wire.codec import read_entity


def decode_any_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, body) of a response frame without its size prefix, for any api
    kio knows (not only those the gateway serves)."""
    correlation_id, offset = parse_response_header(frame, response_header_version(api_key, version))
    return correlation_id, read_entity(load_response_schema(api_key, version), frame, offset)


def error_codes(entity: Any, top: bool = True) -> tuple[int | None, list[int]]:
    """(the top-level error code, every item-level error code), walking the response."""
    items: list[int] = []
    top_code = None
    for field in dataclasses.fields(entity):
        value = getattr(entity, field.name)
        if field.name in ("error_code", "partition_error_code"):
            if top:
                top_code = int(value)
            else:
                items.append(int(value))
        for item in value if isinstance(value, tuple) else (value,):
            if dataclasses.is_dataclass(item):
                items += error_codes(item, top=False)[1]
    return top_code, items
