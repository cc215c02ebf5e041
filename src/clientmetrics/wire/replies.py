"""Error responses for requests the gateway cannot serve, shaped as Kafka shapes them.

Kafka's ``AbstractRequest.getErrorResponse`` puts the error in the top-level
ErrorCode where the response has one, and otherwise on every item the request
named (DescribeConfigs per resource, Metadata per topic, ...). ApiVersions with
an unsupported version gets a v0 response carrying UNSUPPORTED_VERSION and the
supported api list, so the client can retry with a version we know.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial._introspect import classify_field
from kio.static.primitive import i16

from clientmetrics.wire.api import ApiKey
from clientmetrics.wire.build import blank_entity
from clientmetrics.wire.errors import ErrorCode, UnsupportedApi
from clientmetrics.wire.headers import RequestHeader
from clientmetrics.wire.messages import encode_response
from clientmetrics.wire.schemas import SERVED, response_type

__all__ = ["blank_entity", "error_response"]

NO_NODE_ID = -1
"""``Node.noNode()``: the node id and port Kafka puts in coordinator errors."""


@functools.cache
def _field_names(entity_type: type) -> frozenset[str]:
    return frozenset(field.name for field in fields(entity_type))


def _item_type(entity_type: type, field_name: str) -> type:
    for field in fields(entity_type):
        if field.name == field_name:
            return classify_field(field).type_
    raise KeyError(field_name)  # pragma: no cover - schema tables below are checked by tests


def _metadata_items(response: type, request: Any, code: KioErrorCode) -> dict[str, Any]:
    if request is None or request.topics is None:
        return {}
    topic = _item_type(response, "topics")
    return {
        "topics": tuple(
            blank_entity(
                topic,
                error_code=code,
                name=getattr(item, "name", None),
                topic_id=getattr(item, "topic_id", None),
            )
            for item in request.topics
        )
    }


def _resource_items(field_name: str) -> Callable[[type, Any, KioErrorCode], dict[str, Any]]:
    def items(response: type, request: Any, code: KioErrorCode) -> dict[str, Any]:
        if request is None:
            return {}
        item = _item_type(response, field_name)
        return {
            field_name: tuple(
                blank_entity(
                    item,
                    error_code=code,
                    resource_type=resource.resource_type,
                    resource_name=resource.resource_name,
                )
                for resource in request.resources
            )
        }

    return items


def _coordinator_items(response: type, request: Any, code: KioErrorCode) -> dict[str, Any]:
    no_node = {"node_id": NO_NODE_ID, "port": NO_NODE_ID}
    if "coordinators" not in _field_names(response):
        return no_node
    if request is None:
        return {}
    item = _item_type(response, "coordinators")
    return {
        "coordinators": tuple(
            blank_entity(item, key=key, error_code=code, **no_node)
            for key in request.coordinator_keys
        )
    }


def _scram_user_items(response: type, request: Any, code: KioErrorCode) -> dict[str, Any]:
    """AlterUserScramCredentials: one result per distinct user of either list."""
    if request is None:
        return {}
    item = _item_type(response, "results")
    users = dict.fromkeys(entry.name for entry in (*request.deletions, *request.upsertions))
    return {"results": tuple(blank_entity(item, user=user, error_code=code) for user in users)}


# Per api key: the items of the response that mirror the request's items.
_ITEMS: Mapping[int, Callable[[type, Any, KioErrorCode], dict[str, Any]]] = {
    ApiKey.METADATA: _metadata_items,
    ApiKey.FIND_COORDINATOR: _coordinator_items,
    ApiKey.DESCRIBE_CONFIGS: _resource_items("results"),
    ApiKey.ALTER_CONFIGS: _resource_items("responses"),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _resource_items("responses"),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _scram_user_items,
}


def _api_versions_error(
    header: RequestHeader, code: ErrorCode, api_keys: Mapping[int, tuple[int, int]]
) -> bytes:
    low, high = SERVED[ApiKey.API_VERSIONS]
    version = header.api_version if low <= header.api_version <= high else 0
    response = response_type(ApiKey.API_VERSIONS, version)
    listed: tuple[Any, ...] = ()
    own = api_keys.get(ApiKey.API_VERSIONS)
    if code is ErrorCode.UNSUPPORTED_VERSION and own is not None:
        # Like Kafka (ApiVersionsRequest.getErrorResponse), only ApiVersions' own range:
        # all a client needs to ask again with a version both sides know.
        item = _item_type(response, "api_keys")
        low, high = own
        listed = (
            item(api_key=i16(ApiKey.API_VERSIONS), min_version=i16(low), max_version=i16(high)),
        )
    body = blank_entity(response, error_code=KioErrorCode(int(code)), api_keys=listed)
    # The response header of ApiVersions is always v0, whatever version was asked for.
    return encode_response(header, body)


def error_response(
    header: RequestHeader,
    code: ErrorCode,
    request: Any = None,
    *,
    api_keys: Mapping[int, tuple[int, int]] | None = None,
) -> bytes:
    """A framed, valid response to the request ``header`` names, carrying ``code``.

    ``request`` is the decoded body when there is one: its items (resources,
    topics, coordinator keys) are echoed, each with the error. Without it the
    response is minimal: just the top-level error where the schema has one.
    ``api_keys`` is the api list an ApiVersions error advertises (default
    ``SERVED``). Raises ``UnsupportedApi`` for other unserved keys or versions:
    Kafka closes the connection for those.
    """
    if header.api_key == ApiKey.API_VERSIONS:
        return _api_versions_error(header, code, SERVED if api_keys is None else api_keys)
    try:
        response = response_type(header.api_key, header.api_version)
    except UnsupportedApi as exc:
        raise UnsupportedApi(header.api_key, header.api_version, header=header) from exc
    kio_code = KioErrorCode(int(code))
    items = _ITEMS.get(header.api_key)
    extra = items(response, request, kio_code) if items is not None else {}
    return encode_response(header, blank_entity(response, error_code=kio_code, **extra))
