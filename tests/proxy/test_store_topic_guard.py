"""The proxy keeps clients off the subscription store's topic (gateway/proxy/guard.py).

Unit level, no broker: every api that can name a topic, in name and topic-id
forms, is refused with TOPIC_AUTHORIZATION_FAILED on each item it named, and
the same request naming another topic is forwarded. Then through a gateway in
front of the scripted upstream: a refused request never reaches it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from peers.free_ports import free_port_block
from structlog.testing import capture_logs

from clientmetrics.exporters.memory import InMemoryExporter
from clientmetrics.gateway.config import Address, GatewayConfig, Listener
from clientmetrics.gateway.handlers import ConnectionState
from clientmetrics.gateway.proxy import StoreTopicGuard
from clientmetrics.gateway.proxy import guard as guard_module
from clientmetrics.gateway.server import Gateway
from clientmetrics.store.memory import MemorySubscriptionStore
from clientmetrics.wire import (
    RequestHeader,
    encode_request,
    parse_request_header,
)
from clientmetrics.wire.build import build
from clientmetrics.wire.headers import request_header_version
from clientmetrics.wire.results import NO_RESPONSE, Answer, Close, CloseReason, Request
from tests.frames import answer_frame
from tests.proxy.answers import decode_any_response, error_codes
from tests.proxy.fake_upstream import NODE, FakeUpstream

STORE = "__client_metrics_subscriptions"
STORE_ID = uuid.UUID("6d1f4c8e-2b7a-4f53-9a61-0c3e5d7f9b21")
OTHER, OTHER_ID = "orders", uuid.UUID("0b9c2a51-7e43-4d8f-8a16-3f5e6d7c8b90")
CONN = ConnectionState(4, "10.1.2.3", 50123, NODE)


# (api key, version, request fields naming the store topic, item errors expected).
CASES: list[tuple[int, int, dict[str, Any], int]] = [
    (0, 3, {"acks": 1, "topic_data": [{"name": STORE, "partition_data": [{"index": 0}]}]}, 1),
    (
        0,
        12,
        {
            "acks": -1,
            "topic_data": [{"name": STORE, "partition_data": [{"index": 0}, {"index": 1}]}],
        },
        2,
    ),
    (
        0,
        13,
        {"acks": 1, "topic_data": [{"topic_id": STORE_ID, "partition_data": [{"index": 0}]}]},
        1,
    ),
    (1, 4, {"topics": [{"topic": STORE, "partitions": [{"partition": 0}]}]}, 1),
    (1, 12, {"topics": [{"topic": STORE, "partitions": [{"partition": 0}]}]}, 1),
    (1, 13, {"topics": [{"topic_id": STORE_ID, "partitions": [{"partition": 0}]}]}, 1),
    (1, 18, {"topics": [{"topic_id": STORE_ID, "partitions": [{"partition": 3}]}]}, 1),
    (
        1,
        17,
        {"topics": [], "forgotten_topics_data": [{"topic_id": STORE_ID, "partitions": [0]}]},
        0,  # only forgotten: no item to answer, the top level says it
    ),
    (2, 1, {"topics": [{"name": STORE, "partitions": [{"partition_index": 0}]}]}, 1),
    (2, 9, {"topics": [{"name": STORE, "partitions": [{"partition_index": 0}]}]}, 1),
    (
        8,
        8,
        {"group_id": "g", "topics": [{"name": STORE, "partitions": [{"partition_index": 0}]}]},
        1,
    ),
    (
        8,
        10,
        {
            "group_id": "g",
            "topics": [{"topic_id": STORE_ID, "partitions": [{"partition_index": 0}]}],
        },
        1,
    ),
    (9, 7, {"group_id": "g", "topics": [{"name": STORE, "partition_indexes": [0]}]}, 1),
    (
        9,
        10,
        {
            "groups": [
                {"group_id": "g", "topics": [{"topic_id": STORE_ID, "partition_indexes": [0]}]}
            ]
        },
        2,
    ),
    (19, 7, {"topics": [{"name": STORE, "num_partitions": 3, "replication_factor": 1}]}, 1),
    (20, 5, {"topic_names": [STORE]}, 1),
    (20, 6, {"topics": [{"name": None, "topic_id": STORE_ID}]}, 1),
    (20, 6, {"topics": [{"name": STORE, "topic_id": uuid.UUID(int=0)}]}, 1),
    (21, 2, {"topics": [{"name": STORE, "partitions": [{"partition_index": 0, "offset": 9}]}]}, 1),
    (23, 4, {"topics": [{"topic": STORE, "partitions": [{"partition": 0}]}]}, 1),
    (
        24,
        3,
        {
            "v3_and_below_transactional_id": "t",
            "v3_and_below_topics": [{"name": STORE, "partitions": [0]}],
        },
        1,
    ),
    (
        24,
        5,
        {
            "transactions": [
                {"transactional_id": "t", "topics": [{"name": STORE, "partitions": [0]}]}
            ]
        },
        1,
    ),
    (27, 1, {"markers": [{"topics": [{"name": STORE, "partition_indexes": [0]}]}]}, 1),
    (
        28,
        5,
        {"group_id": "g", "topics": [{"name": STORE, "partitions": [{"partition_index": 0}]}]},
        1,
    ),
    (32, 4, {"resources": [{"resource_type": 2, "resource_name": STORE}]}, 1),
    (
        33,
        2,
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": STORE,
                    "configs": [{"name": "retention.ms", "value": "1"}],
                }
            ]
        },
        1,
    ),
    (
        44,
        1,
        {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": STORE,
                    "configs": [
                        {"name": "cleanup.policy", "config_operation": 0, "value": "delete"}
                    ],
                }
            ]
        },
        1,
    ),
    (37, 3, {"topics": [{"name": STORE, "count": 4}]}, 1),
    (43, 2, {"topic_partitions": [{"topic": STORE, "partitions": [0]}]}, 1),
    (
        45,
        0,
        {"topics": [{"name": STORE, "partitions": [{"partition_index": 0, "replicas": [1]}]}]},
        1,
    ),
    (46, 0, {"topics": [{"name": STORE, "partition_indexes": [0]}]}, 0),  # no item error: top level
    (
        47,
        0,
        {"group_id": "g", "topics": [{"name": STORE, "partitions": [{"partition_index": 0}]}]},
        1,
    ),
    (61, 0, {"topics": [{"name": STORE, "partition_indexes": [0, 1]}]}, 2),
    (68, 0, {"group_id": "g", "subscribed_topic_names": [STORE]}, 0),
    (68, 1, {"group_id": "g", "topic_partitions": [{"topic_id": STORE_ID, "partitions": [0]}]}, 0),
    (75, 0, {"topics": [{"name": STORE}]}, 1),
    (76, 1, {"group_id": "g", "subscribed_topic_names": [STORE]}, 0),
    (
        78,
        1,
        {
            "group_id": "g",
            "topics": [{"topic_id": STORE_ID, "partitions": [{"partition_index": 0}]}],
        },
        1,
    ),
    (
        79,
        1,
        {
            "group_id": "g",
            "topics": [{"topic_id": STORE_ID, "partitions": [{"partition_index": 0}]}],
        },
        1,
    ),
    (
        88,
        0,
        {
            "group_id": "g",
            "topology": {"subtopologies": [{"subtopology_id": "0", "source_topics": [STORE]}]},
        },
        0,
    ),
    (
        91,
        0,
        {
            "group_id": "g",
            "topics": [{"topic_name": STORE, "partitions": [{"partition_index": 0}]}],
        },
        1,
    ),
    (92, 0, {"group_id": "g", "topics": [{"topic_name": STORE}]}, 1),
]


def values_of(api_key: int, version: int) -> dict[str, Any]:
    return next(v for k, ver, v, _ in CASES if (k, ver) == (api_key, version))


def request_of(api_key: int, version: int, values: dict[str, Any], *, rid: int = 1) -> Request:
    body = build(load_request_schema(api_key, version), values, blank=True)
    header = RequestHeader(
        api_key, version, 77, "client-a", None, request_header_version(api_key, version)
    )
    frame = encode_request(header, body)[4:]
    parsed, offset = parse_request_header(frame)
    return Request(rid, parsed, frame, offset)


def swapped(value: Any) -> Any:
    """The same request values naming another topic."""
    if value == STORE:
        return OTHER
    if value == STORE_ID:
        return OTHER_ID
    if isinstance(value, dict):
        return {k: swapped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [swapped(v) for v in value]
    return value


def guard() -> StoreTopicGuard:
    g = StoreTopicGuard(STORE)
    g.learn(STORE_ID)
    return g


def decoded_answer(request: Request, data: bytes) -> Any:
    header = request.header
    correlation_id, body = decode_any_response(header.api_key, header.api_version, data[4:])
    assert correlation_id == header.correlation_id
    return body


@pytest.mark.parametrize(("api_key", "version", "values", "errors"), CASES)
def test_every_api_naming_the_topic_is_refused_per_item(
    api_key: int, version: int, values: dict[str, Any], errors: int
) -> None:
    request = request_of(api_key, version, values)
    with capture_logs() as logs:
        refusal = guard().refuse(CONN, request)
    assert isinstance(refusal, Answer), refusal
    top, items = error_codes(decoded_answer(request, refusal.data))
    if errors:
        assert items == [29] * errors
        assert top in (None, 0)  # the items say it, as Kafka's Fetch does
    else:
        assert top == 29
    [audit] = [e for e in logs if e["event"] == "store_topic_refused"]
    assert audit["principal"] == "User:ANONYMOUS"
    assert audit["source"] == "10.1.2.3:50123"
    assert audit["topic"] == STORE
    assert audit["api_version"] == version

    # The same request about another topic goes upstream untouched.
    assert guard().refuse(CONN, request_of(api_key, version, swapped(values))) is None


def test_the_audit_line_names_the_api() -> None:
    request = request_of(21, 2, values_of(21, 2))
    with capture_logs() as logs:
        guard().refuse(CONN, request)
    refused = [e for e in logs if e["event"] != "store_topic_id"]
    assert [(e["event"], e["api"], e["error_code"]) for e in refused] == [
        ("store_topic_refused", "DeleteRecords", 29)
    ]


def test_a_repeated_refusal_is_audited_a_few_times_a_minute_then_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [1_000_000]
    monkeypatch.setattr(guard_module, "now_ms", lambda: clock[0])
    g = guard()
    request = request_of(21, 2, values_of(21, 2))
    other_port = ConnectionState(5, "10.1.2.3", 50124, NODE)
    elsewhere = ConnectionState(6, "10.9.9.9", 40000, NODE)
    with capture_logs() as logs:
        for i in range(100):
            g.refuse(CONN if i % 2 else other_port, request)
        g.refuse(elsewhere, request)  # another address has its own lines
        clock[0] += 60_000
        g.refuse(CONN, request)  # the next minute's first line says what was left out
    refused = [e for e in logs if e["event"] == "store_topic_refused"]
    assert [e["source"].split(":")[0] for e in refused] == ["10.1.2.3"] * 5 + [
        "10.9.9.9",
        "10.1.2.3",
    ]
    assert "suppressed" not in refused[0]
    assert refused[-1]["suppressed"] == 95
    assert g.refused == 102  # every refusal answered and counted, logged or not


def test_produce_to_the_topic_and_another_is_refused_whole() -> None:
    values = {
        "acks": 1,
        "topic_data": [
            {"name": OTHER, "partition_data": [{"index": 0}]},
            {"name": STORE, "partition_data": [{"index": 0}]},
        ],
    }
    request = request_of(0, 9, values)
    refusal = guard().refuse(CONN, request)
    assert isinstance(refusal, Answer)
    answer = decoded_answer(request, refusal.data)
    assert [
        (t.name, [int(p.error_code) for p in t.partition_responses]) for t in answer.responses
    ] == [
        (OTHER, [29]),
        (STORE, [29]),
    ]


def test_a_record_mentioning_the_name_is_decoded_and_forwarded() -> None:
    # The name inside records (opaque bytes) costs a decode, never a refusal.
    values = {
        "acks": 1,
        "topic_data": [
            {
                "name": OTHER,
                "partition_data": [{"index": 0, "records": STORE.encode() + STORE_ID.bytes}],
            }
        ],
    }
    assert guard().refuse(CONN, request_of(0, 9, values)) is None


def not_decoded(*_args: Any) -> Any:
    raise AssertionError("decoded")


BIG = b"r" * 20_000  # a Produce this large is walked, not searched


@pytest.mark.parametrize("version", [3, 8, 9, 12, 13])
def test_a_large_produce_is_walked_past_its_records(
    version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = {"topic_id": STORE_ID} if version >= 13 else {"name": STORE}
    other = {"topic_id": OTHER_ID} if version >= 13 else {"name": OTHER}
    records = [{"index": 0, "records": BIG}, {"index": 1, "records": BIG}]
    named = {"acks": 1, "transactional_id": "t", "topic_data": [
        {**other, "partition_data": records}, {**topic, "partition_data": records}]}  # fmt: skip
    request = request_of(0, version, named)
    assert len(request.frame) > 40_000
    refusal = guard().refuse(CONN, request)
    assert isinstance(refusal, Answer)
    assert error_codes(decoded_answer(request, refusal.data))[1] == [29] * 4
    # Records full of the name and the id are skipped, not read: nothing is decoded.
    monkeypatch.setattr(guard_module, "decode_any_request", not_decoded)
    mentions = (STORE.encode() + STORE_ID.bytes) * 500
    clean = {
        "acks": 1,
        "topic_data": [{**other, "partition_data": [{"index": 0, "records": mentions}]}],
    }
    assert guard().refuse(CONN, request_of(0, version, clean)) is None


def test_a_large_produce_that_does_not_walk_is_still_checked() -> None:
    request = request_of(
        0,
        9,
        {
            "acks": 1,
            "topic_data": [{"name": STORE, "partition_data": [{"index": 0, "records": BIG}]}],
        },
    )
    # Cut short: the walk fails, the search finds the name, the decode fails: closed.
    cut = Request(request.id, request.header, request.frame[:-5000], request.offset)
    refusal = guard().refuse(CONN, cut)
    assert isinstance(refusal, Close)


def test_a_topic_id_is_refused_once_learned() -> None:
    request = request_of(1, 13, values_of(1, 13))
    fresh = StoreTopicGuard(STORE)
    assert fresh.refuse(CONN, request) is None  # why the probe asks for the id at start
    fresh.learn(STORE_ID)
    assert isinstance(fresh.refuse(CONN, request), Answer)
    assert fresh.ids == (STORE_ID,)


def test_acks_zero_produce_closes_the_connection_as_kafka_does() -> None:
    request = request_of(0, 9, {"acks": 0, "topic_data": [{"name": STORE}]}, rid=NO_RESPONSE)
    refusal = guard().refuse(CONN, request)
    assert isinstance(refusal, Close)
    assert refusal.reason is CloseReason.REFUSED


def test_an_unreadable_request_containing_the_name_closes_the_connection() -> None:
    header = RequestHeader(240, 0, 5, "c", None, 1)  # an api key no schema knows
    frame = encode_request_raw(header, b"\x00\x1e" + STORE.encode())
    refusal = guard().refuse(CONN, Request(1, header, frame, len(frame) - 32))
    assert isinstance(refusal, Close)
    # Without the name or an id it is never even looked at.
    harmless = encode_request_raw(header, b"\x00\x06orders")
    assert guard().refuse(CONN, Request(1, header, harmless, len(harmless) - 8)) is None


def encode_request_raw(header: RequestHeader, body: bytes) -> bytes:
    client = (header.client_id or "").encode()
    prefix = header.api_key.to_bytes(2, "big") + header.api_version.to_bytes(2, "big")
    prefix += header.correlation_id.to_bytes(4, "big", signed=True)
    return prefix + len(client).to_bytes(2, "big") + client + body


def test_acl_administration_is_the_clusters_to_authorize() -> None:
    # Granting the store's own user its rights goes through the gateway; the cluster
    # checks ALTER on CLUSTER as whoever sends it.
    creations = [{"resource_type": 2, "resource_name": STORE, "resource_pattern_type": 3}]
    assert guard().refuse(CONN, request_of(30, 3, {"creations": creations})) is None
    filters = [{"resource_type_filter": 2, "resource_name_filter": STORE}]
    assert guard().refuse(CONN, request_of(31, 3, {"filters": filters})) is None


def test_sasl_is_never_decoded() -> None:
    # A user named like the topic logs in; SaslAuthenticate carries credentials only.
    request = request_of(36, 2, {"auth_bytes": b"\x00" + STORE.encode() + b"\x00secret"})
    assert guard().refuse(CONN, request) is None


def metadata_answer(topics: list[dict[str, Any]]) -> Any:
    values = {"brokers": [], "topics": topics}
    return build(load_response_schema(3, 12), values, blank=True)


def test_metadata_hides_the_topic_and_refuses_it_by_name() -> None:
    g = StoreTopicGuard(STORE)
    listed = [
        {"name": OTHER, "topic_id": OTHER_ID, "partitions": [{"partition_index": 0}]},
        {"name": STORE, "topic_id": STORE_ID, "partitions": [{"partition_index": 0}]},
    ]
    every = request_of(3, 12, {"topics": None})
    hidden = g.screen_metadata(every, metadata_answer(listed))
    assert [t.name for t in hidden.topics] == [OTHER]
    assert g.ids == (STORE_ID,)  # learned on the way
    named = request_of(3, 12, {"topics": [{"name": OTHER}, {"name": STORE}]})
    refused = g.screen_metadata(named, metadata_answer(listed))
    assert [(t.name, int(t.error_code), t.partitions) for t in refused.topics] == [
        (OTHER, 0, listed_partitions(refused.topics[0])),
        (STORE, 29, ()),
    ]
    assert refused.topics[1].topic_id in (None, uuid.UUID(int=0))


def listed_partitions(topic: Any) -> Any:
    assert len(topic.partitions) == 1
    return topic.partitions


# -- through a gateway, in front of the scripted upstream ------------------------------
@pytest.fixture
async def gateway(upstream: FakeUpstream, tmp_path: Path) -> AsyncIterator[Gateway]:
    config = GatewayConfig(
        data_dir=tmp_path,
        listeners=(Listener.parse("127.0.0.1:0"),),
        upstream=(Address("127.0.0.1", upstream.port),),
        broker_port_base=free_port_block(NODE + 1),
    )
    # The topic store is the proxy's default; a memory store stands in for its records.
    assert config.store_kind == "topic"
    gw = Gateway(config, store=MemorySubscriptionStore(), exporters=[InMemoryExporter()])
    await gw.start()
    yield gw
    await gw.close()


async def test_a_refused_request_never_reaches_the_upstream(
    upstream: FakeUpstream, gateway: Gateway
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    refused = request_of(21, 2, values_of(21, 2))
    fine = request_of(21, 2, swapped(values_of(21, 2)))
    configs = request_of(32, 4, values_of(32, 4))
    for request in (refused, fine, configs):
        writer.write(len(request.frame).to_bytes(4, "big") + request.frame)
    answers = [await answer_frame(reader) for _ in range(3)]
    assert upstream.frames == [fine.frame]  # forwarded byte for byte; nothing else
    assert answers[1][4:] == fine.frame  # the fake answers with the request itself
    for request, answer in ((refused, answers[0]), (configs, answers[2])):
        _, items = error_codes(decoded_answer(request, len(answer).to_bytes(4, "big") + answer))
        assert items == [29]
    writer.close()
