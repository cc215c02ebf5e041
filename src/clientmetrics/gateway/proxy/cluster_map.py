"""What the proxy knows of the upstream cluster: broker addresses and API versions."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

import structlog

from clientmetrics.gateway.config import Address

log = structlog.get_logger("clientmetrics.gateway.proxy")

#: Called when a node id is first seen, before clients are told its address.
NodeListener = Callable[[int], Awaitable[None]]


class ClusterMap:
    """Upstream brokers by node id, and the gateway address that stands for each.

    Learned from the responses the proxy rewrites (Metadata, FindCoordinator,
    DescribeCluster, KIP-951 endpoints). A node's gateway port is a pure function
    of its id, so replicas in front of one cluster agree without coordination.
    """

    def __init__(
        self,
        bootstrap: tuple[Address, ...],
        advertised_host: str,
        broker_port: Callable[[int], int],
    ) -> None:
        self.bootstrap = bootstrap
        self.advertised_host = advertised_host
        self._broker_port = broker_port
        self._nodes: dict[int, Address] = {}
        self._listener: NodeListener | None = None
        #: The upstream's ApiVersions answer (api key -> (min, max)), once seen.
        self.upstream_versions: dict[int, tuple[int, int]] = {}

    def set_listener(self, listener: NodeListener) -> None:
        """Register the callback that opens a listener for a new node."""
        self._listener = listener

    def address(self, node_id: int) -> Address | None:
        """Where upstream node ``node_id`` is, if known."""
        return self._nodes.get(node_id)

    def gateway_endpoint(self, node_id: int) -> tuple[str, int]:
        """The (host, port) clients are told for upstream node ``node_id``."""
        return self.advertised_host, self._broker_port(node_id)

    async def learn(self, node_id: int, host: str, port: int) -> None:
        """Record an upstream broker; opens its gateway listener the first time."""
        if node_id < 0:
            return
        address = Address(host, port)
        old = self._nodes.get(node_id)
        self._nodes[node_id] = address
        if old != address:
            log.info("upstream_broker", node_id=node_id, address=str(address))
        if old is None and self._listener is not None:
            await self._listener(node_id)

    def record_versions(self, versions: Mapping[int, tuple[int, int]]) -> None:
        """Remember the upstream's supported API versions."""
        self.upstream_versions = dict(versions)

    def upstream_supports(self, api_key: int, api_version: int) -> bool:
        """Whether the upstream serves this API version (assumed yes until known)."""
        if not self.upstream_versions:
            return True
        span = self.upstream_versions.get(api_key)
        return span is not None and span[0] <= api_version <= span[1]
