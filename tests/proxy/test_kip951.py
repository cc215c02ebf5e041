"""KIP-951 node endpoints in Produce v10+ / Fetch v16+ responses: walked, not decoded.

Responses are built and encoded with kio (an independent codec), rewritten by the
proxy's walker, and decoded again with kio: everything but the endpoints' host and
port must come back identical, and a response without endpoints must be the very
same bytes object.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_response_schema

from clientmetrics.gateway.proxy.kip951 import FETCH_MAX, PRODUCE_MAX, rewrite_node_endpoints
from clientmetrics.wire import ErrorCode, ProtocolError
from clientmetrics.wire.build import build
from clientmetrics.wire.codec import read_entity, write_entity

HEADER = b"\x00\x00\x00\x2a\x00"  # correlation id 42, no tagged fields (response header v1)

names = st.text(min_size=1, max_size=12)
optional_text = st.none() | st.text(max_size=20)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(0, 2**40)
endpoints = st.lists(
    st.fixed_dictionaries(
        {
            "node_id": st.integers(0, 5000),
            "host": st.text(min_size=1, max_size=30),
            "port": st.integers(1, 65535),
            "rack": optional_text,
        }
    ),
    max_size=4,
)


def produce_values() -> st.SearchStrategy[dict[str, Any]]:
    partition = st.fixed_dictionaries(
        {
            "index": st.integers(0, 1000),
            "error_code": st.sampled_from([ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER]),
            "base_offset": int64,
            "log_append_time": st.none(),
            "log_start_offset": int64,
            "record_errors": st.lists(
                st.fixed_dictionaries(
                    {"batch_index": st.integers(0, 99), "batch_index_error_message": optional_text}
                ),
                max_size=2,
            ),
            "error_message": optional_text,
            "current_leader": st.fixed_dictionaries(
                {"leader_id": st.integers(-1, 9), "leader_epoch": st.integers(-1, 99)}
            ),
        }
    )
    topic = st.fixed_dictionaries(
        {"name": names, "partition_responses": st.lists(partition, max_size=3)}
    )
    return st.fixed_dictionaries(
        {
            "responses": st.lists(topic, max_size=3),
            "throttle_time": st.integers(0, 1000),
            "node_endpoints": endpoints,
        }
    )


def fetch_values() -> st.SearchStrategy[dict[str, Any]]:
    partition = st.fixed_dictionaries(
        {
            "partition_index": st.integers(0, 1000),
            "error_code": st.sampled_from([ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER]),
            "high_watermark": int64,
            "last_stable_offset": int64,
            "log_start_offset": int64,
            "aborted_transactions": st.none()
            | st.lists(
                st.fixed_dictionaries({"producer_id": int64, "first_offset": int64}), max_size=2
            ),
            "preferred_read_replica": st.integers(-1, 9),
            "records": st.none() | st.binary(max_size=300),
            "current_leader": st.fixed_dictionaries(
                {"leader_id": st.integers(-1, 9), "leader_epoch": st.integers(-1, 99)}
            ),
        }
    )
    topic = st.fixed_dictionaries(
        {"topic_id": st.uuids(), "partitions": st.lists(partition, max_size=3)}
    )
    return st.fixed_dictionaries(
        {
            "throttle_time": st.integers(0, 1000),
            "error_code": st.just(ErrorCode.NONE),
            "session_id": int32,
            "responses": st.lists(topic, max_size=3),
            "node_endpoints": endpoints,
        }
    )


def gateway_endpoint(node_id: int) -> tuple[str, int]:
    return "gw.example", 40000 + node_id


def check(api_key: int, version: int, values: dict[str, Any]) -> None:
    cls = load_response_schema(api_key, version)
    original = build(cls, values)
    frame = HEADER + write_entity(original)
    out, learned = rewrite_node_endpoints(api_key, frame, len(HEADER), gateway_endpoint)
    if not values["node_endpoints"]:
        assert out is frame
        assert learned == []
        return
    assert out[: len(HEADER)] == HEADER
    rewritten = read_entity(cls, out, len(HEADER))
    expected_endpoints = tuple(
        dataclasses.replace(e, host="gw.example", port=40000 + e.node_id)
        for e in original.node_endpoints
    )
    assert rewritten == dataclasses.replace(original, node_endpoints=expected_endpoints)
    assert learned == [(e["node_id"], e["host"], e["port"]) for e in values["node_endpoints"]]


@pytest.mark.parametrize("version", range(10, PRODUCE_MAX + 1))
@given(values=produce_values())
@settings(max_examples=60, deadline=None)
def test_produce_endpoints_rewritten_rest_untouched(version: int, values: dict[str, Any]) -> None:
    check(0, version, values)


@pytest.mark.parametrize("version", range(16, FETCH_MAX + 1))
@given(values=fetch_values())
@settings(max_examples=60, deadline=None)
def test_fetch_endpoints_rewritten_rest_untouched(version: int, values: dict[str, Any]) -> None:
    check(1, version, values)


def test_large_records_pass_through_as_the_same_object() -> None:
    cls = load_response_schema(1, 16)
    body = build(
        cls,
        {
            "throttle_time": 0,
            "error_code": ErrorCode.NONE,
            "session_id": 1,
            "responses": [
                {
                    "topic_id": uuid.uuid4(),
                    "partitions": [
                        {
                            "partition_index": 0,
                            "error_code": ErrorCode.NONE,
                            "high_watermark": 10,
                            "aborted_transactions": None,
                            "records": b"\x01" * 1_000_000,
                        }
                    ],
                }
            ],
        },
    )
    frame = HEADER + write_entity(body)
    assert rewrite_node_endpoints(1, frame, len(HEADER), gateway_endpoint)[0] is frame


def test_truncated_or_padded_bodies_are_protocol_errors() -> None:
    cls = load_response_schema(0, 10)
    values = {
        "responses": [],
        "throttle_time": datetime.timedelta(0),
        "node_endpoints": [{"node_id": 1, "host": "h", "port": 1, "rack": None}],
    }
    frame = HEADER + write_entity(build(cls, values))
    for bad in (frame[:-3], frame + b"\x00"):
        with pytest.raises(ProtocolError):
            rewrite_node_endpoints(0, bad, len(HEADER), gateway_endpoint)
