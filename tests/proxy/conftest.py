"""Fixtures: a real Tansu broker and gateway processes in proxy mode in front of it; the
scripted in-process upstream."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from peers.free_ports import free_port_block

from tests.procs import GatewayProcess, TansuProcess
from tests.proxy.fake_upstream import FakeUpstream

TANSU_NODE = 111  # Tansu's fixed node id
#: Tansu holds an empty fetch for its whole wait (up to ~15 s) and does not answer it
#: early when a record arrives, so the topic store's long poll is kept short here.
TANSU_FETCH_WAIT_MS = 500
FAST_LANDING = f"""
[gateway]
subscriptions_fetch_wait_ms = {TANSU_FETCH_WAIT_MS}

[exporters.landing]
roll_seconds = 0.3
"""


@pytest.fixture
def tansu(tmp_path: Path) -> Iterator[TansuProcess]:
    broker = TansuProcess(log_path=tmp_path / "tansu.log").start()
    yield broker
    broker.stop()


class ProxyGateway(GatewayProcess):
    """A gateway process fronting an upstream, with its broker port known."""

    broker_port_base: int = 0

    @property
    def broker_port(self) -> int:
        return self.broker_port_base + TANSU_NODE


def start_proxy(data_dir: Path, upstream: str, *extra: str) -> ProxyGateway:
    base = free_port_block(TANSU_NODE + 1)
    gw = ProxyGateway(
        data_dir,
        FAST_LANDING,
        extra_args=("--upstream", upstream, "--broker-port-base", str(base), *extra),
    )
    gw.broker_port_base = base
    return gw.start()  # type: ignore[return-value]


@pytest.fixture
def proxy_factory(tmp_path: Path) -> Iterator[Callable[..., ProxyGateway]]:
    started: list[ProxyGateway] = []

    def make(upstream: str, name: str = "gw", *extra: str) -> ProxyGateway:
        gw = start_proxy(tmp_path / name, upstream, *extra)
        started.append(gw)
        return gw

    yield make
    codes = [gw.stop() for gw in started]
    assert codes == [0] * len(codes), [gw.log_lines[-10:] for gw in started]


@pytest.fixture
def proxy(tansu: TansuProcess, proxy_factory: Callable[..., ProxyGateway]) -> ProxyGateway:
    return proxy_factory(tansu.bootstrap)


@pytest.fixture
async def upstream() -> AsyncIterator[FakeUpstream]:
    fake = await FakeUpstream().start()
    yield fake
    assert fake.server is not None
    fake.server.close()
