"""kafka-python 3.0.12 producer, consumer group and admin client through the proxy, on Tansu."""

from __future__ import annotations

import socket
import struct
import uuid
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

from clientmetrics.wire import (
    RequestHeader,
    decode_response,
    encode_request,
    request_header_version,
    request_type,
)
from tests.kadmin import admin, set_subscription
from tests.procs import MIN_DEADLINE_S
from tests.proxy.conftest import ProxyGateway

pytestmark = pytest.mark.integration


def test_producer_and_consumer_group(proxy: ProxyGateway) -> None:
    topic = f"kp-{uuid.uuid4().hex[:8]}"
    # The topic is created by the first produce: its partition may not have a leader yet
    # (a retriable error), so the producer retries as any real one would; every send's
    # result is checked, so a record the proxy lost fails here, not as a missing key.
    producer = KafkaProducer(
        bootstrap_servers=proxy.bootstrap, client_id="kp-prod", acks="all", retries=10
    )
    sent = {}
    futures = []
    for i in range(200):
        key, value = f"k{i}".encode(), f"v{i}".encode()
        futures.append(producer.send(topic, key=key, value=value, headers=[("n", str(i).encode())]))
        sent[key] = (value, [("n", str(i).encode())])
    producer.flush(60)
    for future in futures:
        future.get(timeout=60)
    producer.close()
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=proxy.bootstrap,
        client_id="kp-cons",
        group_id="kp-group",
        auto_offset_reset="earliest",
        consumer_timeout_ms=20000,
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
    )
    received = {}
    try:
        for message in consumer:
            received[message.key] = (message.value, list(message.headers))
            if len(received) == len(sent):
                break
    finally:
        consumer.close()
    assert received == sent


def test_admin_create_topic_and_describe_its_configs(proxy: ProxyGateway) -> None:
    topic = f"adm-{uuid.uuid4().hex[:8]}"
    with admin(proxy.bootstrap) as client:
        client.create_topics(
            [
                NewTopic(
                    topic,
                    num_partitions=3,
                    replication_factor=1,
                    topic_configs={"retention.ms": "123456"},
                )
            ]
        )
        assert topic in client.list_topics()
        described = client.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all"
        )
    assert described["topic"][topic]["retention.ms"]["value"] == "123456"


def test_mixed_describe_configs_answers_both_sides(proxy: ProxyGateway) -> None:
    """One DescribeConfigs naming a topic between two client-metrics resources."""
    topic = f"mix-{uuid.uuid4().hex[:8]}"
    set_subscription(
        proxy.bootstrap,
        "mixed-sub",
        {"metrics": "org.apache.kafka.producer.", "interval.ms": "2000"},
    )
    with admin(proxy.bootstrap) as client:
        client.create_topics([NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact"})])
        described = client.describe_configs(
            [
                ConfigResource(ConfigResourceType.CLIENT_METRICS, "mixed-sub"),
                ConfigResource(ConfigResourceType.TOPIC, topic),
            ],
            config_filter="all",
        )
    assert described["client_metrics"]["mixed-sub"]["interval.ms"]["value"] == "2000"
    assert described["topic"][topic]["cleanup.policy"]["value"] == "compact"
    assert "interval.ms" not in described["topic"][topic]

    # The same on the wire: one request, results in request order, both sides answered.
    request = request_type(32, 4)(
        resources=tuple(
            _resource(rtype, name)
            for rtype, name in [(16, "mixed-sub"), (2, topic), (16, "absent-sub")]
        ),
        include_synonyms=False,
        include_documentation=False,
    )
    results = _roundtrip(proxy.port, 32, 4, request).results
    assert [(int(r.resource_type), r.resource_name, int(r.error_code)) for r in results] == [
        (16, "mixed-sub", 0),
        (2, topic, 0),
        (16, "absent-sub", 0),
    ]
    assert {c.name: c.value for c in results[0].configs}["interval.ms"] == "2000"
    assert {c.name: c.value for c in results[1].configs}["cleanup.policy"] == "compact"
    assert {c.name: c.value for c in results[2].configs}["interval.ms"] == "300000"


def _resource(rtype: int, name: str) -> object:
    from kio.schema.describe_configs.v4.request import DescribeConfigsResource

    return DescribeConfigsResource(resource_type=rtype, resource_name=name, configuration_keys=None)


def _roundtrip(port: int, api_key: int, version: int, body: object) -> Any:
    header = RequestHeader(
        api_key, version, 7, "raw-test", None, request_header_version(api_key, version)
    )
    with socket.create_connection(("127.0.0.1", port), timeout=MIN_DEADLINE_S) as sock:
        sock.sendall(encode_request(header, body))
        size = struct.unpack(">i", _recv(sock, 4))[0]
        correlation_id, response = decode_response(api_key, version, _recv(sock, size))
    assert correlation_id == 7
    return response


def _recv(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


def test_mixed_incremental_alter_and_list_config_resources(proxy: ProxyGateway) -> None:
    topic = f"alt-{uuid.uuid4().hex[:8]}"
    with admin(proxy.bootstrap) as client:
        client.create_topics([NewTopic(topic, 1, 1)])
        result = client.alter_configs(
            [
                ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": "777"}),
                ConfigResource(
                    ConfigResourceType.CLIENT_METRICS,
                    "alt-sub",
                    configs={"metrics": "org.apache.kafka.consumer.", "interval.ms": "3000"},
                ),
            ],
            incremental=True,
            raise_on_unknown=False,
        )
        described = client.describe_configs(
            [
                ConfigResource(ConfigResourceType.TOPIC, topic),
                ConfigResource(ConfigResourceType.CLIENT_METRICS, "alt-sub"),
            ],
            config_filter="all",
        )
        listed = client.list_config_resources()
    assert described["topic"][topic]["retention.ms"]["value"] == "777", result
    assert described["client_metrics"]["alt-sub"]["interval.ms"]["value"] == "3000"
    assert listed.get("client_metrics") == ["alt-sub"]
