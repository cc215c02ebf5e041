"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs and ListConfigResources.

CLIENT_METRICS (type 16) resources are answered here. Other resource types are the
upstream cluster's business: in standalone mode they get a clear per-resource error,
in proxy mode the proxy splits them off before they reach these handlers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import structlog

from clientmetrics.gateway.authz import CLUSTER_AUTHORIZATION_FAILED_MESSAGE, AuthorizationHolder
from clientmetrics.gateway.handlers import ConnectionState, audit_identity
from clientmetrics.gateway.subscriptions import Subscriptions
from clientmetrics.security.base import Operation
from clientmetrics.store.base import StoreError
from clientmetrics.telemetry.configs import (
    ConfigError,
    apply_incremental,
    describe,
    normalize,
    over_cap,
    validate,
)
from clientmetrics.telemetry.java_order import map_key_order
from clientmetrics.wire import (
    ConfigResourceType,
    ErrorCode,
    RequestHeader,
    encode_response,
    response_type,
)
from clientmetrics.wire.build import build
from clientmetrics.wire.results import Answer, Reply, Request

log = structlog.get_logger("clientmetrics.gateway")

CLIENT_METRICS = ConfigResourceType.CLIENT_METRICS
RESOURCE_TYPE_NAMES = {int(t): t.name for t in ConfigResourceType}
LISTABLE_TYPES = frozenset(RESOURCE_TYPE_NAMES)


def _not_served(resource_type: int) -> tuple[ErrorCode, str]:
    kind = RESOURCE_TYPE_NAMES.get(resource_type, f"type {resource_type}")
    return (
        ErrorCode.INVALID_REQUEST,
        f"Resource type {kind} is not served by this gateway in standalone mode; "
        "only CLIENT_METRICS (16) resources are.",
    )


_REFUSED: dict[str, Any] = {
    "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    "error_message": CLUSTER_AUTHORIZATION_FAILED_MESSAGE,
}


def _replacement(new: dict[str, str], _stored: dict[str, str]) -> Mapping[str, str]:
    return new


def _incremental(
    ops: list[tuple[str, int, str | None]], stored: dict[str, str]
) -> Mapping[str, str]:
    return apply_incremental(stored, ops)


def _audit(
    conn: ConnectionState | None,
    resource: Any,
    result: dict[str, Any],
    changed: tuple[Mapping[str, str], Mapping[str, str]] | None,
    incremental: bool,
) -> None:
    """The audit trail: who changed which subscription from where, or was refused.

    Info level, one event per resource: ``subscription_changed`` with the configs
    before and after, ``subscription_change_refused`` with the error and what was asked.
    """
    who = audit_identity(conn)
    asked = [
        {"name": c.name, "op": int(getattr(c, "config_operation", 0)), "value": c.value}
        for c in resource.configs
    ]
    name = str(resource.resource_name)
    api = "IncrementalAlterConfigs" if incremental else "AlterConfigs"
    if changed is not None:
        before, after = changed
        if before == after:
            return
        log.info("subscription_changed", **who, subscription=name, api=api,
                 before=dict(before), after=dict(after))  # fmt: skip
        return
    log.info("subscription_change_refused", **who, subscription=name, api=api,
             error_code=int(result["error_code"]), error=result["error_message"],
             asked=asked)  # fmt: skip


class ConfigHandlers:
    """The config RPCs for client-metrics subscriptions.

    KIP-714: describing and listing need DESCRIBE_CONFIGS on the cluster, altering
    ALTER_CONFIGS; each refused CLIENT_METRICS resource gets CLUSTER_AUTHORIZATION_FAILED.
    """

    def __init__(
        self,
        subscriptions: Subscriptions,
        authorization: AuthorizationHolder | None = None,
        *,
        max_subscriptions: int | None = None,
    ) -> None:
        self._subs = subscriptions
        self._authz = authorization or AuthorizationHolder(None)
        self._max_subscriptions = max_subscriptions

    # -- authorization and the subscription cap --------------------------------
    def _allowed(self, conn: ConnectionState | None, operation: Operation) -> bool:
        """Whether ``conn`` may; ``None`` is a caller that has decided already.

        In proxy passthrough the cluster's own refusal (``conn.cluster_refuses``,
        learned by ``proxy.configs``) comes first; otherwise ``[authorization]``.
        """
        if conn is None:
            return True
        if conn.cluster_refuses.get(operation, False):
            return False
        return self._authz.allowed(conn, operation)

    def _over_cap(
        self, name: str, new: Mapping[str, str], stored: Mapping[str, str], count: int
    ) -> dict[str, Any] | None:
        """The error for an alter that would create one subscription too many.

        ``stored`` is the resource as the store holds it; ``count`` is this gateway's
        view of how many exist, so alters racing on other connections or gateways
        may overshoot the cap by a few.
        """
        cap = self._max_subscriptions
        if cap is None or not new or stored or count < cap:
            return None
        error = over_cap(name, cap)
        return {"error_code": error.error_code, "error_message": error.message}

    # -- DescribeConfigs ------------------------------------------------------
    async def describe_configs(self, conn: ConnectionState, request: Request) -> Reply:
        header = request.header
        body = request.body()
        cls = response_type(header.api_key, header.api_version)
        results = self.describe_results(body, conn)
        return Answer(encode_response(header, build(cls, {"throttle_time": 0, "results": results})))

    def describe_results(
        self, body: Any, conn: ConnectionState | None = None
    ) -> list[dict[str, Any]]:
        """One DescribeConfigs result per resource of a decoded request, in order."""
        synonyms = bool(getattr(body, "include_synonyms", False))
        documentation = bool(getattr(body, "include_documentation", False))
        allowed = self._allowed(conn, Operation.DESCRIBE_CONFIGS)
        return [
            self._describe_one(
                resource, synonyms=synonyms, documentation=documentation, allowed=allowed
            )
            for resource in body.resources
        ]

    def _describe_one(
        self, resource: Any, *, synonyms: bool, documentation: bool, allowed: bool = True
    ) -> dict[str, Any]:
        rtype, name = int(resource.resource_type), str(resource.resource_name)
        result: dict[str, Any] = {
            "resource_type": rtype,
            "resource_name": name,
            "error_code": ErrorCode.NONE,
            "error_message": "",  # Kafka 4.4 sends "" (not null) with NONE here
            "configs": [],
        }
        if rtype != CLIENT_METRICS:
            code, message = _not_served(rtype)
            return {**result, "error_code": code, "error_message": message}
        if not allowed:
            return {**result, **_REFUSED}
        if not name:
            return {
                **result,
                "error_code": ErrorCode.INVALID_REQUEST,
                "error_message": "Client metrics subscription name must not be empty",
            }
        wanted = set(resource.configuration_keys) if resource.configuration_keys else None
        entries = []
        for entry in describe(self._subs.get(name)):
            if wanted is not None and entry.name not in wanted:
                continue
            entries.append(
                {
                    "name": entry.name,
                    "value": entry.value,
                    "read_only": entry.read_only,
                    "is_default": entry.source == 5,
                    "config_source": entry.source,
                    "is_sensitive": entry.sensitive,
                    "synonyms": [{"name": entry.name, "value": entry.value, "source": entry.source}]
                    if synonyms and entry.source != 5
                    else [],
                    "config_type": entry.config_type,
                    "documentation": entry.documentation if documentation else None,
                }
            )
        return {**result, "configs": entries}

    # -- AlterConfigs / IncrementalAlterConfigs -----------------------------
    async def alter_configs(self, conn: ConnectionState, request: Request) -> Reply:
        header = request.header
        body = request.body()
        results = await self.alter_results(body, incremental=False, conn=conn)
        return Answer(self._alter_response(header, results))

    async def incremental_alter_configs(self, conn: ConnectionState, request: Request) -> Reply:
        header = request.header
        body = request.body()
        results = await self.alter_results(body, incremental=True, conn=conn)
        return Answer(self._alter_response(header, results))

    async def alter_results(
        self, body: Any, *, incremental: bool, conn: ConnectionState | None = None
    ) -> list[dict[str, Any]]:
        """Apply a decoded (Incremental)AlterConfigs request; one response per resource."""
        allowed = self._allowed(conn, Operation.ALTER_CONFIGS)
        responses = []
        for resource in body.resources:
            change: Callable[[dict[str, str]], Mapping[str, str]]
            if incremental:
                ops = [(c.name, int(c.config_operation), c.value) for c in resource.configs]
                change = functools.partial(_incremental, ops)
            else:
                new = {c.name: c.value for c in resource.configs if c.value is not None}
                change = functools.partial(_replacement, new)
            result = await self._alter_one(resource, change, body, allowed)
            changed = result.pop("_changed", None)
            if changed is not None or result["error_code"]:
                _audit(conn, resource, result, changed, incremental)
            responses.append(result)
        return responses

    async def _alter_one(
        self,
        resource: Any,
        change: Callable[[dict[str, str]], Mapping[str, str]],
        body: Any,
        allowed: bool = True,
    ) -> dict[str, Any]:
        rtype, name = int(resource.resource_type), str(resource.resource_name)
        result: dict[str, Any] = {
            "resource_type": rtype,
            "resource_name": name,
            "error_code": ErrorCode.NONE,
            "error_message": None,
        }
        if rtype != CLIENT_METRICS:
            code, message = _not_served(rtype)
            return {**result, "error_code": code, "error_message": message}
        if not allowed:
            return {**result, **_REFUSED}
        count = len(self._subs.names())  # read here: validated() may run on a store thread

        def validated(stored: dict[str, str]) -> Mapping[str, str]:
            new = change(stored)
            validate(name, new)
            over = self._over_cap(name, new, stored, count)
            if over is not None:
                raise ConfigError(over["error_code"], over["error_message"])
            return normalize(new)  # stored (and described) as Kafka stores it

        try:
            if body.validate_only:
                validated(self._subs.get(name))
            else:
                before = self._subs.get(name)
                await self._subs.update(name, validated)
                result["_changed"] = (before, self._subs.get(name))
        except ConfigError as exc:
            return {**result, "error_code": exc.error_code, "error_message": exc.message}
        except StoreError as exc:
            log.error("subscription_store_failed", name=name, error=str(exc))
            message = f"The subscription store failed; {name} was not changed: {exc}"
            return {
                **result,
                "error_code": ErrorCode.UNKNOWN_SERVER_ERROR,
                "error_message": message,
            }
        return result

    @staticmethod
    def _alter_response(header: RequestHeader, responses: list[dict[str, Any]]) -> bytes:
        cls = response_type(header.api_key, header.api_version)
        return encode_response(header, build(cls, {"throttle_time": 0, "responses": responses}))

    # -- ListConfigResources (KIP-1000 v0, KIP-1142 v1) ---------------------
    def client_metrics_resources(self, conn: ConnectionState | None = None) -> list[dict[str, Any]]:
        """ListConfigResources entries for every client-metrics subscription.

        Empty when ``conn`` may not describe them (proxy mode merges them with the
        upstream's list, which carries its own errors).
        """
        if not self._allowed(conn, Operation.DESCRIBE_CONFIGS):
            return []
        # In the order Kafka 4.4 lists them (its map of subscriptions), as tools print them.
        names = map_key_order(self._subs.names())
        return [{"resource_name": n, "resource_type": CLIENT_METRICS} for n in names]

    async def list_config_resources(self, conn: ConnectionState, request: Request) -> Reply:
        header = request.header
        body = request.body()
        types = {int(t) for t in getattr(body, "resource_types", ()) or ()}
        code = ErrorCode.NONE
        names: list[dict[str, Any]] = []
        if not self._allowed(conn, Operation.DESCRIBE_CONFIGS):
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        elif types - LISTABLE_TYPES:
            code = ErrorCode.UNSUPPORTED_VERSION
        elif not types or CLIENT_METRICS in types:
            names = self.client_metrics_resources()
        values = {"throttle_time": 0, "error_code": code, "config_resources": names}
        cls = response_type(header.api_key, header.api_version)
        return Answer(encode_response(header, build(cls, values)))
