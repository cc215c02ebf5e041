"""The config RPC handlers ask the authorizer with the connection's principal and host."""

from __future__ import annotations

import random
from typing import Any

import pytest

from clientmetrics.gateway.authz import AuthorizationHolder
from clientmetrics.gateway.config_rpcs import ConfigHandlers
from clientmetrics.gateway.handlers import ConnectionState
from clientmetrics.gateway.subscriptions import Subscriptions
from clientmetrics.security import parse_authorization
from clientmetrics.store.memory import MemorySubscriptionStore
from clientmetrics.telemetry.manager import ClientMetricsManager, TelemetryConfig
from clientmetrics.wire import (
    ErrorCode,
    RequestHeader,
    decode_response,
    encode_request,
    encode_request_header,
    request_type,
)
from clientmetrics.wire.build import build
from clientmetrics.wire.results import Answer, Request

AUTHZ = parse_authorization(
    {
        "super_users": ["User:admin"],
        "acls": [
            {"principal": "User:bob", "operation": "ALTER_CONFIGS", "permission": "allow"},
            {"principal": "User:eve", "operation": "DESCRIBE_CONFIGS", "permission": "allow"},
            {
                "principal": "User:bob",
                "operation": "ALL",
                "permission": "deny",
                "host": "10.6.6.6",
            },
        ],
    }
)


@pytest.fixture
async def handlers() -> ConfigHandlers:
    manager = ClientMetricsManager(TelemetryConfig(), rng=random.Random(1))
    subs = Subscriptions(MemorySubscriptionStore({"existing": {"metrics": "a."}}), manager)
    await subs.start()
    return ConfigHandlers(subs, AuthorizationHolder(AUTHZ), max_subscriptions=2)


def conn(principal: str, host: str = "10.0.0.1") -> ConnectionState:
    state = ConnectionState(1, host, 50000, 0)
    state.principal = principal
    return state


def request(api_key: int, version: int, values: dict[str, Any]) -> Request:
    cls = request_type(api_key, version)
    header = RequestHeader(api_key, version, 7, "test")
    frame = encode_request(header, build(cls, values))[4:]  # without the size prefix
    return Request(0, header, frame, len(encode_request_header(header)))


async def call(
    handlers: ConfigHandlers, c: ConnectionState, api_key: int, version: int, values: dict[str, Any]
) -> Any:
    method = {
        32: handlers.describe_configs,
        44: handlers.incremental_alter_configs,
        74: handlers.list_config_resources,
    }[api_key]
    reply = await method(c, request(api_key, version, values))
    assert isinstance(reply, Answer)
    return decode_response(api_key, version, reply.data[4:])[1]


def alter_values(name: str) -> dict[str, Any]:
    resource = {
        "resource_type": 16,
        "resource_name": name,
        "configs": [{"name": "metrics", "config_operation": 0, "value": "org.apache.kafka."}],
    }
    return {"resources": [resource], "validate_only": False}


DESCRIBE = {
    "resources": [{"resource_type": 16, "resource_name": "existing", "configuration_keys": None}],
    "include_synonyms": False,
    "include_documentation": False,
}


@pytest.mark.parametrize(
    ("principal", "host", "alter", "describe"),
    [
        ("User:admin", "10.0.0.1", ErrorCode.NONE, ErrorCode.NONE),
        ("User:bob", "10.0.0.1", ErrorCode.NONE, ErrorCode.NONE),
        (
            "User:bob",
            "10.6.6.6",
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ),
        ("User:eve", "10.0.0.1", ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.NONE),
        (
            "User:ANONYMOUS",
            "127.0.0.1",
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ),
    ],
)
async def test_each_rpc_checks_its_operation(
    handlers: ConfigHandlers, principal: str, host: str, alter: ErrorCode, describe: ErrorCode
) -> None:
    c = conn(principal, host)
    response = await call(handlers, c, 44, 1, alter_values("new-sub"))
    [result] = response.responses
    assert int(result.error_code) == alter
    if alter:
        assert result.error_message == "Cluster authorization failed."
    assert ("new-sub" in handlers._subs.names()) is (alter == ErrorCode.NONE)

    response = await call(handlers, c, 32, 4, DESCRIBE)
    [described] = response.results
    assert int(described.error_code) == describe
    assert bool(described.configs) is (describe == ErrorCode.NONE)

    response = await call(handlers, c, 74, 1, {"resource_types": []})
    assert int(response.error_code) == describe
    assert bool(response.config_resources) is (describe == ErrorCode.NONE)


async def test_other_resource_types_keep_their_own_errors(handlers: ConfigHandlers) -> None:
    values = {
        "resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}],
        "include_synonyms": False,
        "include_documentation": False,
    }
    response = await call(handlers, conn("User:ANONYMOUS"), 32, 4, values)
    assert int(response.results[0].error_code) == ErrorCode.INVALID_REQUEST


async def test_the_cap_counts_new_subscriptions_only(handlers: ConfigHandlers) -> None:
    admin = conn("User:admin")
    assert (
        int((await call(handlers, admin, 44, 1, alter_values("second"))).responses[0].error_code)
        == 0
    )
    [refused] = (await call(handlers, admin, 44, 1, alter_values("third"))).responses
    assert int(refused.error_code) == ErrorCode.POLICY_VIOLATION
    assert "maximum of 2 subscriptions" in refused.error_message
    [changed] = (await call(handlers, admin, 44, 1, alter_values("existing"))).responses
    assert int(changed.error_code) == 0


def test_open_listeners_are_the_unauthenticated_non_loopback_ones(tmp_path: Any) -> None:
    from clientmetrics.gateway.authz import open_listeners
    from clientmetrics.gateway.config_load import load_config
    from tests.tlsfiles import TestCA

    ca = TestCA(tmp_path / "pki")
    ca.issue("server")
    tls = (
        f'[tls]\ncertificate = "{ca.root / "server.crt"}"\n'
        f'private_key = "{ca.root / "server.key"}"\nca = "{ca.ca}"\n'
    )

    def exposed(listen: list[str], extra: str = "") -> list[str]:
        path = tmp_path / "g.toml"
        path.write_text(f"[gateway]\nlisten = {listen!r}\n{tls}{extra}".replace("'", '"'))
        return open_listeners(load_config(path, data_dir=tmp_path, environ={}))

    both = ["0.0.0.0:9092", "SSL://0.0.0.0:9093"]
    assert exposed(both) == ["PLAINTEXT://0.0.0.0:9092", "SSL://0.0.0.0:9093"]
    assert exposed(["127.0.0.1:9092", "SSL://[::1]:9093"]) == []
    assert exposed(["localhost:9092"]) == []
    assert exposed(both, 'client_auth = "required"\n') == ["PLAINTEXT://0.0.0.0:9092"]
    assert exposed(both, "[authorization]\nsuper_users = []\n") == []
