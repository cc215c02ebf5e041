"""The Python admin API (plain calls and coroutines) against a real gateway."""

from __future__ import annotations

import pytest

from clientmetrics.admin import (
    Admin,
    AdminConfig,
    AdminError,
    AsyncAdmin,
    alter,
    delete,
    describe,
    describe_all,
    list_client_metrics_resources,
    subscription_configs,
)
from clientmetrics.wire import ErrorCode
from tests.procs import GatewayProcess

pytestmark = pytest.mark.integration


def test_plain_calls_round_trip(gateway: GatewayProcess) -> None:
    configs = subscription_configs(
        metrics=["org.apache.kafka.producer."], interval_ms=5000, match=["client_id=x.*"]
    )
    alter(gateway.bootstrap, "api-plain", configs)
    assert "api-plain" in list_client_metrics_resources(gateway.bootstrap)
    resource = describe(gateway.bootstrap, "api-plain")
    assert resource.as_dict() == {
        "metrics": "org.apache.kafka.producer.",
        "interval.ms": "5000",
        "match": "client_id=x.*",
    }
    assert {e.source_name for e in resource.configs} == {"CLIENT_METRICS_CONFIG"}
    assert "api-plain" in {r.name for r in describe_all(gateway.bootstrap)}
    assert delete(gateway.bootstrap, "api-plain") == resource
    assert "api-plain" not in list_client_metrics_resources(gateway.bootstrap)


def test_an_admin_keeps_one_connection_for_many_calls(gateway: GatewayProcess) -> None:
    with Admin(gateway.bootstrap) as admin:
        admin.alter("api-many", {"interval.ms": "1000"})
        admin.alter("api-many", {"interval.ms": ""})  # empty value: DELETE the key
        assert admin.describe("api-many").as_dict()["interval.ms"] == "300000"
        assert all(e.is_default for e in admin.describe("api-many").configs)


async def test_coroutines_round_trip(gateway: GatewayProcess) -> None:
    async with AsyncAdmin(AdminConfig.from_properties(gateway.bootstrap)) as admin:
        await admin.alter("api-async", {"metrics": "org.apache.kafka."})
        assert "api-async" in await admin.list_client_metrics_resources()
        deleted = await admin.delete("api-async")
        assert deleted.as_dict()["metrics"] == "org.apache.kafka."
        assert "api-async" not in await admin.list_client_metrics_resources()


@pytest.mark.parametrize(
    ("name", "configs", "code", "message"),
    [
        (
            "k",
            {"random": "1"},
            ErrorCode.INVALID_REQUEST,
            "Unknown client metrics configuration: random",
        ),
        ("", {"metrics": "m"}, ErrorCode.INVALID_REQUEST, "Subscription name can't be empty"),
        ("k", {"interval.ms": "bbb"}, ErrorCode.INVALID_CONFIG, None),
        (
            "k",
            {"interval.ms": "99"},
            ErrorCode.INVALID_REQUEST,
            "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)",
        ),
        (
            "k",
            {"match": "client_id"},
            ErrorCode.INVALID_CONFIG,
            "Illegal client matching pattern: client_id",
        ),
    ],
)
def test_gateway_validation_errors_carry_code_and_message(
    gateway: GatewayProcess,
    name: str,
    configs: dict[str, str],
    code: ErrorCode,
    message: str | None,
) -> None:
    with pytest.raises(AdminError) as info:
        alter(gateway.bootstrap, name, configs)
    assert info.value.error_code is code
    if message is not None:
        assert str(info.value) == message
    else:
        assert "interval.ms" in str(info.value)
    assert "k" not in list_client_metrics_resources(gateway.bootstrap)


def test_describe_with_an_empty_name_is_invalid_request(gateway: GatewayProcess) -> None:
    with pytest.raises(AdminError) as info:
        describe(gateway.bootstrap, "")
    assert info.value.error_code is ErrorCode.INVALID_REQUEST
    assert str(info.value) == "Client metrics subscription name must not be empty"
