"""Plain (blocking) admin calls: the ``AsyncAdmin`` coroutines run on a private loop."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from types import TracebackType
from typing import Any, TypeVar

from clientmetrics.admin.api import AsyncAdmin, ClientMetricsResource
from clientmetrics.admin.connection import Transport
from clientmetrics.admin.properties import AdminConfig

__all__ = [
    "Admin",
    "alter",
    "delete",
    "describe",
    "describe_all",
    "list_client_metrics_resources",
]

T = TypeVar("T")


def _config(target: AdminConfig | str) -> AdminConfig:
    return target if isinstance(target, AdminConfig) else AdminConfig.from_properties(target)


class Admin:
    """Blocking admin operations; one connection, kept until ``close``.

    Use as a context manager. Must not be used from inside a running event loop
    (use ``AsyncAdmin`` there).
    """

    def __init__(self, target: AdminConfig | str, transport: Transport | None = None) -> None:
        self._runner = asyncio.Runner()
        self._admin = AsyncAdmin(_config(target), transport)

    def __enter__(self) -> Admin:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._runner.run(coro)

    def close(self) -> None:
        """Close the connection and the private event loop."""
        try:
            self._run(self._admin.close())
        finally:
            self._runner.close()

    def list_client_metrics_resources(self) -> tuple[str, ...]:
        """See ``AsyncAdmin.list_client_metrics_resources``."""
        return self._run(self._admin.list_client_metrics_resources())

    def describe(self, name: str) -> ClientMetricsResource:
        """See ``AsyncAdmin.describe``."""
        return self._run(self._admin.describe(name))

    def describe_all(self) -> tuple[ClientMetricsResource, ...]:
        """See ``AsyncAdmin.describe_all``."""
        return self._run(self._admin.describe_all())

    def alter(self, name: str, configs: Mapping[str, str]) -> None:
        """See ``AsyncAdmin.alter``."""
        self._run(self._admin.alter(name, configs))

    def delete(self, name: str) -> ClientMetricsResource:
        """See ``AsyncAdmin.delete``."""
        return self._run(self._admin.delete(name))


def list_client_metrics_resources(target: AdminConfig | str) -> tuple[str, ...]:
    """Names of all client-metrics subscriptions. ``target``: settings or a bootstrap list."""
    with Admin(target) as admin:
        return admin.list_client_metrics_resources()


def describe(target: AdminConfig | str, name: str) -> ClientMetricsResource:
    """The configs of one subscription."""
    with Admin(target) as admin:
        return admin.describe(name)


def describe_all(target: AdminConfig | str) -> tuple[ClientMetricsResource, ...]:
    """Every subscription with its configs."""
    with Admin(target) as admin:
        return admin.describe_all()


def alter(target: AdminConfig | str, name: str, configs: Mapping[str, str]) -> None:
    """SET each config (DELETE where the value is empty) on subscription ``name``."""
    with Admin(target) as admin:
        admin.alter(name, configs)


def delete(target: AdminConfig | str, name: str) -> ClientMetricsResource:
    """Delete every config of subscription ``name``; returns what was there."""
    with Admin(target) as admin:
        return admin.delete(name)
