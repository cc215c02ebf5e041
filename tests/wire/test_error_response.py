"""error_response: a valid response for every served request, carrying the error."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode as KioErrorCode

from clientmetrics.wire import (
    SERVED,
    ErrorCode,
    RequestHeader,
    UnsupportedApi,
    decode_response,
    error_response,
    parse_response_header,
    request_header_version,
    request_type,
)

from .strategies import entities

SERVED_VERSIONS = [
    (api_key, version)
    for api_key, (low, high) in SERVED.items()
    for version in range(low, high + 1)
]
CODES = st.sampled_from(
    [
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_REQUEST,
    ]
)

# Response field listing one item per request item, and the request field it mirrors.
ITEMS = {
    3: ("topics", "topics"),
    10: ("coordinators", "coordinator_keys"),
    32: ("results", "resources"),
    33: ("responses", "resources"),
    44: ("responses", "resources"),
    51: ("results", "users"),
}


def _header(api_key: int, version: int) -> RequestHeader:
    return RequestHeader(
        api_key, version, 77, "client", None, request_header_version(api_key, version)
    )


def _decode(api_key: int, version: int, framed: bytes) -> Any:
    assert int.from_bytes(framed[:4], "big") == len(framed) - 4
    correlation_id, body = decode_response(api_key, version, framed[4:])
    assert correlation_id == 77
    return body


@pytest.mark.parametrize(("api_key", "version"), SERVED_VERSIONS, ids=str)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_error_is_set_on_the_response_or_each_item(
    api_key: int, version: int, data: st.DataObject
) -> None:
    code = data.draw(CODES)
    request = data.draw(entities(request_type(api_key, version)))
    body = _decode(api_key, version, error_response(_header(api_key, version), code, request))
    expected = KioErrorCode(int(code))
    item_fields = ITEMS.get(api_key)
    response_items = getattr(body, item_fields[0], None) if item_fields else None
    if hasattr(body, "error_code"):
        assert body.error_code == expected
    if response_items is not None and item_fields is not None:
        if api_key == 51:  # one result per distinct user of the two lists
            request_items = tuple(
                dict.fromkeys(e.name for e in (*request.deletions, *request.upsertions))
            )
        else:
            request_items = getattr(request, item_fields[1]) or ()
        assert len(response_items) == len(request_items)
        assert all(item.error_code == expected for item in response_items)
    assert hasattr(body, "error_code") or response_items is not None


@pytest.mark.parametrize(("api_key", "version"), SERVED_VERSIONS, ids=str)
def test_minimal_response_without_a_body(api_key: int, version: int) -> None:
    body = _decode(
        api_key, version, error_response(_header(api_key, version), ErrorCode.INVALID_REQUEST)
    )
    if hasattr(body, "error_code"):
        assert body.error_code == KioErrorCode.invalid_request


def test_describe_configs_names_each_resource() -> None:
    request_cls = request_type(32, 4)
    resource = request_cls.__dataclass_fields__["resources"].type.__args__[0]
    request = request_cls(
        resources=(
            resource(resource_type=16, resource_name="a", configuration_keys=None),
            resource(resource_type=16, resource_name="b", configuration_keys=("metrics",)),
        )
    )
    header = _header(32, 4)
    body = _decode(32, 4, error_response(header, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, request))
    assert [(r.resource_type, r.resource_name, r.error_code) for r in body.results] == [
        (16, "a", KioErrorCode.cluster_authorization_failed),
        (16, "b", KioErrorCode.cluster_authorization_failed),
    ]


@pytest.mark.parametrize("version", [5, 127])
def test_api_versions_too_new_gets_a_v0_answer_with_its_own_range(version: int) -> None:
    header = RequestHeader(18, version, 77, "client", None, 2)
    framed = error_response(header, ErrorCode.UNSUPPORTED_VERSION)
    # Header v0 (no tags), body v0: what a client that sent any version can read.
    assert parse_response_header(framed[4:], 0) == (77, 4)
    body = _decode(18, 0, framed)
    assert body.error_code == KioErrorCode.unsupported_version
    listed = {item.api_key: (item.min_version, item.max_version) for item in body.api_keys}
    # Kafka 4.4.0 lists only ApiVersions itself here (observed: [(18, 0, 5)]).
    assert listed == {18: SERVED[18]}


def test_api_versions_error_can_advertise_another_list() -> None:
    header = RequestHeader(18, 9, 77, None, None, 2)
    framed = error_response(
        header, ErrorCode.UNSUPPORTED_VERSION, api_keys={0: (3, 11), 18: (0, 3), 72: (0, 1)}
    )
    body = _decode(18, 0, framed)
    assert [(i.api_key, i.min_version, i.max_version) for i in body.api_keys] == [(18, 0, 3)]


def test_unserved_api_has_no_error_response() -> None:
    with pytest.raises(UnsupportedApi) as caught:
        error_response(RequestHeader(0, 9, 1, None), ErrorCode.UNSUPPORTED_VERSION)
    assert caught.value.header == RequestHeader(0, 9, 1, None)
