"""Version negotiation, correlation and error translation, through the Transport seam."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as Kio

from clientmetrics.admin import (
    AdminConfig,
    AdminConnectionError,
    AdminError,
    AdminTimeoutError,
    AsyncAdmin,
)
from clientmetrics.wire import (
    ErrorCode,
    RequestHeader,
    blank_entity,
    encode_frame,
    encode_response,
    encode_response_header,
    response_type,
)
from tests.admin.fake_broker import FakeBroker, api_versions_v0_error


def config(bootstrap: str = "broker:9092", timeout_s: float = 5.0) -> AdminConfig:
    return AdminConfig.from_properties(bootstrap, timeout_s=timeout_s)


async def test_operations_use_the_highest_version_both_sides_support() -> None:
    broker = FakeBroker()
    async with AsyncAdmin(config(), broker) as admin:
        await admin.alter("s", {"metrics": "org.apache.kafka.", "interval.ms": "1000"})
        assert await admin.list_client_metrics_resources() == ("s",)
        described = await admin.describe("s")
    assert described.as_dict() == {"metrics": "org.apache.kafka.", "interval.ms": "1000"}
    assert broker.seen == [(18, 4), (44, 1), (74, 1), (32, 4)]


async def test_an_older_broker_gets_older_versions_and_list_v0() -> None:
    broker = FakeBroker(versions={18: (0, 3), 32: (0, 2), 44: (0, 0), 74: (0, 0)})
    broker.configs["old"] = {"metrics": "x"}
    async with AsyncAdmin(config(), broker) as admin:
        assert await admin.list_client_metrics_resources() == ("old",)
        deleted = await admin.delete("old")
    assert deleted.as_dict() == {"metrics": "x"}
    assert broker.configs == {}
    assert broker.seen == [(18, 4), (74, 0), (32, 2), (44, 0)]


async def test_describe_configs_v0_only_broker_is_unsupported() -> None:
    # Kafka 4.0 removed DescribeConfigs v0 and so do we: v1 is the floor.
    broker = FakeBroker(versions={18: (0, 3), 32: (0, 0), 44: (0, 0), 74: (0, 0)})
    async with AsyncAdmin(config(), broker) as admin:
        with pytest.raises(AdminError, match="does not support DESCRIBE_CONFIGS"):
            await admin.describe("x")


async def test_api_versions_falls_back_when_the_broker_answers_in_v0() -> None:
    broker = FakeBroker(versions={18: (0, 2), 32: (0, 2), 44: (0, 1), 74: (0, 0)})

    def answer(header: RequestHeader, body: Any) -> bytes | None:
        if header.api_key == 18 and header.api_version > 2:
            return api_versions_v0_error(header, broker.versions)
        return None

    broker.answer = answer
    async with AsyncAdmin(config(), broker) as admin:
        assert await admin.list_client_metrics_resources() == ()
    assert broker.seen == [(18, 4), (18, 2), (74, 0)]


async def test_an_api_the_broker_lacks_is_unsupported_version_naming_it() -> None:
    broker = FakeBroker(versions={18: (0, 4), 32: (1, 4), 44: (0, 1)})
    async with AsyncAdmin(config(), broker) as admin:
        with pytest.raises(AdminError) as info:
            await admin.list_client_metrics_resources()
    assert info.value.error_code is ErrorCode.UNSUPPORTED_VERSION
    assert "does not support LIST_CONFIG_RESOURCES" in str(info.value)
    assert "broker:9092" in str(info.value)


async def test_a_response_with_another_correlation_id_is_rejected() -> None:
    broker = FakeBroker()

    def answer(header: RequestHeader, body: Any) -> bytes | None:
        if header.api_key == 74:
            return encode_frame(encode_response_header(header.correlation_id + 7, 1) + b"\x00" * 8)
        return None

    broker.answer = answer
    async with AsyncAdmin(config(), broker) as admin:
        with pytest.raises(AdminError, match="Correlation id mismatch"):
            await admin.list_client_metrics_resources()


async def test_a_disconnect_is_a_network_error_not_an_os_error() -> None:
    broker = FakeBroker()
    broker.answer = lambda header, body: b"" if header.api_key == 32 else None
    async with AsyncAdmin(config(), broker) as admin:
        with pytest.raises(AdminError) as info:
            await admin.describe("x")
    assert info.value.error_code is ErrorCode.NETWORK_EXCEPTION
    assert "disconnected before a response was received" in str(info.value)


async def test_a_silent_broker_times_out_within_the_timeout() -> None:
    broker = FakeBroker(silent=True)
    started = time.monotonic()
    with pytest.raises(AdminConnectionError) as info:
        async with AsyncAdmin(config(timeout_s=0.3), broker):
            pass
    # Its own 0.3 s, not the default 30 s: the rest is slack for a busy machine.
    assert time.monotonic() - started < 15
    assert info.value.failures == (
        ("broker:9092", "timed out after 300 ms waiting for the ApiVersions response"),
    )


async def test_a_request_timeout_names_the_call_and_address() -> None:
    broker = FakeBroker()
    broker.answer = lambda header, body: None
    async with AsyncAdmin(config(timeout_s=0.3), broker) as admin:
        broker.silent = True
        with pytest.raises(AdminTimeoutError) as info:
            await admin.describe("x")
        assert info.value.error_code is ErrorCode.REQUEST_TIMED_OUT
        assert str(info.value) == (
            "Timed out after 300 ms waiting for the DESCRIBE_CONFIGS response from broker:9092"
        )
        # The late answer must not be taken for the next call's: that call reconnects.
        broker.silent = False
        assert (await admin.describe("x")).configs == ()
    assert broker.seen[-2:] == [(18, 4), (32, 4)]


async def test_concurrent_calls_on_one_admin_are_serialised() -> None:
    broker = FakeBroker()
    async with AsyncAdmin(config(), broker) as admin:
        await asyncio.gather(*(admin.alter(f"s{i}", {"metrics": "m"}) for i in range(5)))
        assert await admin.list_client_metrics_resources() == ("s0", "s1", "s2", "s3", "s4")


async def test_bootstrap_addresses_are_tried_in_turn() -> None:
    broker = FakeBroker()
    async with AsyncAdmin(config("refused:1,broker:9092"), broker) as admin:
        assert await admin.list_client_metrics_resources() == ()
    with pytest.raises(AdminConnectionError) as info:
        async with AsyncAdmin(config("refused:1,refused:2"), broker):
            pass
    assert str(info.value) == (
        "Could not connect to bootstrap servers refused:1 (Connection refused); "
        "refused:2 (Connection refused)"
    )
    assert info.value.error_code is ErrorCode.NETWORK_EXCEPTION


async def test_broker_errors_carry_code_and_message_or_kafkas_default() -> None:
    broker = FakeBroker()
    async with AsyncAdmin(config(), broker) as admin:
        await admin.alter("a", {"metrics": "m"})

    def denied(header: RequestHeader, body: Any) -> bytes | None:
        if header.api_key != 74:
            return None

        from tests.admin.fake_broker import _element

        cls = response_type(74, header.api_version)
        del _element
        return encode_response(header, blank_entity(cls, error_code=Kio(31)))

    broker.answer = denied
    async with AsyncAdmin(config(), broker) as admin:
        with pytest.raises(AdminError) as info:
            await admin.list_client_metrics_resources()
    assert info.value.error_code is ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert str(info.value) == "Cluster authorization failed."
