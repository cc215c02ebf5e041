"""The load simulator: many simulated clients, each running the real state machine.

Clients are asyncio tasks, each on its own connection (or, for large load tests,
several on one pipelined connection: ``clients_per_connection``); several
processes split the clients between them.
Each client does what a real one does: GetTelemetrySubscriptions, jittered
pushes at the subscription's interval, the KIP's error table, and a terminating
push when the run ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from clientmetrics.client.properties import ClientSecurity
from clientmetrics.reporter.driver import new_client_instance_id
from clientmetrics.reporter.payload import encode_push
from clientmetrics.reporter.protocol import (
    get_request,
    get_response_event,
    push_request,
    push_response_event,
    telemetry_version,
)
from clientmetrics.reporter.sim_net import SimConnection, open_connection
from clientmetrics.reporter.sim_payloads import SimFault, SimMetrics, fault_for
from clientmetrics.telemetry.client_state import (
    Action,
    ClientState,
    ClientTelemetry,
    Closed,
    CloseRequested,
    Event,
    PushAccepted,
    PushRequested,
    RequestFailed,
    SubscriptionReceived,
    SubscriptionRequested,
)
from clientmetrics.telemetry.model import kafka_uuid_text
from clientmetrics.wire import RequestHeader

__all__ = ["RunTag", "SimConfig", "SimReport", "run_process", "simulate"]

_LATENCY_SAMPLES = 200_000


@dataclass(frozen=True, slots=True)
class SimConfig:
    """One simulation run."""

    host: str
    port: int
    clients: int
    duration_s: float
    unhealthy: int = 0
    unhealthy_latency_ms: float = 8000.0
    #: Faults to inject (``sim_payloads.SimFault``), each from its onset after the run starts.
    faults: tuple[SimFault, ...] = ()
    #: The gateway fixes a connection's client id at its first request (KIP-1313), so
    #: clients sharing a connection share an id: more than 1 is for large load tests.
    clients_per_connection: int = 1
    request_timeout_s: float = 30.0
    close_timeout_s: float = 5.0
    seed: int | None = None
    #: Kafka client properties (``security.protocol``, ``sasl.*``, ``ssl.*``); pairs,
    #: so the config crosses to worker processes (an SSLContext would not).
    client_properties: tuple[tuple[str, str], ...] = ()
    #: The run's tag: the first bytes of every client instance id of the run
    #: (``RunTag``), so that the run's own subscription matches its clients and no
    #: others (another simulator's, real clients).
    run_tag: bytes = b""


#: Bytes of a run tag: 6 bytes are exactly 8 characters of Kafka's base64 id text.
_TAG_BYTES = 6


@dataclass(frozen=True, slots=True)
class RunTag:
    """What tells one simulator run's clients from every other client.

    Each run draws its own first 6 bytes for every client instance id it makes, so
    the run's subscription can match exactly its own clients: two simulators
    behind gateways that share a store then neither delete each other's
    subscription nor change the SubscriptionId of each other's clients.
    """

    value: bytes

    @classmethod
    def new(cls, rng: random.Random | None = None) -> RunTag:
        """A fresh random tag (never one whose id text starts with ``-``: the
        reporter's ids avoid that, as a command line would take it for an option)."""
        source = rng or random.SystemRandom()
        while True:
            tag = cls(source.getrandbits(8 * _TAG_BYTES).to_bytes(_TAG_BYTES, "big"))
            if not tag.id_text.startswith("-"):
                return tag

    @property
    def id_text(self) -> str:
        """The first 8 characters of Kafka's text of every instance id of the run."""
        example = uuid.UUID(bytes=self.value + bytes(16 - _TAG_BYTES))
        return kafka_uuid_text(example)[: _TAG_BYTES * 4 // 3]

    @property
    def subscription_name(self) -> str:
        """The run's own subscription."""
        return f"clientmetrics-simulate-{self.value.hex()}"

    @property
    def match(self) -> str:
        """The subscription's ``match``: this run's clients only. Kafka matches the
        base64 text of the id, the gateway either text; base64url's ``-`` and ``_`` are
        literal in a regular expression."""
        return f"client_instance_id={self.id_text}.*"


@dataclass
class SimReport:
    """What the simulated clients saw (summed over processes)."""

    clients: int = 0
    connections: int = 0
    handshakes: int = 0
    pushes: int = 0
    terminating_pushes: int = 0
    empty_pushes: int = 0
    errors: dict[int, int] = field(default_factory=dict)
    transport_failures: int = 0
    disabled: int = 0
    versions: dict[int, int] = field(default_factory=dict)
    latencies_us: list[int] = field(default_factory=list)
    elapsed_s: float = 0.0
    #: The ground truth of injected faults: (instance id, fault kind, onset in Unix seconds).
    faults: list[tuple[str, str, float]] = field(default_factory=list)

    def merge(self, other: SimReport) -> None:
        """Add ``other`` (another process's report) to this one."""
        for name in (
            "clients",
            "connections",
            "handshakes",
            "pushes",
            "terminating_pushes",
            "empty_pushes",
            "transport_failures",
            "disabled",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for code, count in other.errors.items():
            self.errors[code] = self.errors.get(code, 0) + count
        for version, count in other.versions.items():
            self.versions[version] = self.versions.get(version, 0) + count
        self.latencies_us.extend(other.latencies_us)
        self.faults.extend(other.faults)
        self.elapsed_s = max(self.elapsed_s, other.elapsed_s)

    def percentile_ms(self, fraction: float) -> float:
        """Request latency percentile in ms (0 when nothing was measured)."""
        if not self.latencies_us:
            return 0.0
        ordered = sorted(self.latencies_us)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] / 1000

    def _record(self, started_ns: int) -> None:
        if len(self.latencies_us) < _LATENCY_SAMPLES:
            self.latencies_us.append((time.perf_counter_ns() - started_ns) // 1000)

    def _error(self, code: int) -> None:
        self.errors[code] = self.errors.get(code, 0) + 1


class _SimClient:
    """One simulated client: a state machine, its metrics and a shared connection."""

    def __init__(
        self,
        index: int,
        conn: SimConnection,
        metrics: SimMetrics,
        rng: random.Random,
        report: SimReport,
        config: SimConfig,
    ) -> None:
        self.index = index
        self.conn = conn
        self.metrics = metrics
        self.rng = rng
        self.report = report
        self.config = config
        self.instance_id = new_client_instance_id(rng, prefix=config.run_tag)
        self.machine = ClientTelemetry(rng=rng, client_instance_id=self.instance_id)
        version = telemetry_version(conn.api_versions)
        self.version = 0 if version is None else version

    def _now(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def _handle(self, event: Event) -> None:
        self.machine.handle(event, self._now())

    async def run(self, stop_at: float) -> None:
        while time.monotonic() < stop_at and self.machine.enabled:
            action = self.machine.poll(self._now())
            if action is None:
                wait_ms = self.machine.time_to_next_ms(self._now())
                remaining = stop_at - time.monotonic()
                await asyncio.sleep(max(0.0, min(remaining, (wait_ms or 1000) / 1000)))
                continue
            await self._act(action)
        if not self.machine.enabled:
            self.report.disabled += 1
        await self.close()

    async def close(self) -> None:
        if self.machine.state in (
            ClientState.SUBSCRIPTION_IN_PROGRESS,
            ClientState.PUSH_IN_PROGRESS,
        ):
            return  # cancelled mid-request: nothing more to say to the broker
        self._handle(CloseRequested())
        if self.machine.poll(self._now()) is Action.TERMINATING_PUSH:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._act(Action.TERMINATING_PUSH), self.config.close_timeout_s
                )
        if self.machine.state is not ClientState.TERMINATED:
            self._handle(Closed())

    async def _request(self, header_body: tuple[RequestHeader, Any]) -> Any:
        header, body = header_body
        started = time.perf_counter_ns()
        try:
            response = await asyncio.wait_for(
                self.conn.call(header, body),
                self.config.request_timeout_s,
            )
        except (ConnectionError, TimeoutError):
            self.report.transport_failures += 1
            self._handle(RequestFailed(retriable=not self.conn.closed))
            return None
        self.report._record(started)
        self.report.versions[self.version] = self.report.versions.get(self.version, 0) + 1
        return response

    async def _act(self, action: Action) -> None:
        conn = self.conn
        if action is Action.GET_SUBSCRIPTIONS:
            self._handle(SubscriptionRequested())
            response = await self._request(
                get_request(
                    self.version, conn.next_correlation_id(), conn.client_id, self.instance_id
                )
            )
            if response is None:
                return
            event = get_response_event(response)
            if isinstance(event, SubscriptionReceived):
                self.report.handshakes += 1
            else:
                self.report._error(event.error_code)
            self._handle(event)
            return
        await self._push(terminating=action is Action.TERMINATING_PUSH)

    async def _push(self, *, terminating: bool) -> None:
        sub = self.machine.subscription
        assert sub is not None
        points = [
            p
            for p in self.metrics.points(self.rng, time.time_ns(), sub.delta_temporality)
            if sub.selects(p.name)
        ]
        encoded = encode_push(
            points,
            resource=self.metrics.resource(self.index),
            accepted_compression_types=sub.accepted_compression_types,
            max_bytes=sub.telemetry_max_bytes,
            scope_version="2.16.0",
        )
        self._handle(PushRequested())
        conn = self.conn
        response = await self._request(
            push_request(
                self.version,
                conn.next_correlation_id(),
                conn.client_id,
                self.instance_id,
                subscription_id=sub.subscription_id,
                terminating=terminating,
                compression_type=encoded.compression_type,
                metrics=encoded.metrics,
            )
        )
        if response is None:
            return
        event = push_response_event(response)
        if isinstance(event, PushAccepted):
            self.report.pushes += 1
            self.report.terminating_pushes += terminating
            self.report.empty_pushes += not encoded.metrics
        else:
            self.report._error(event.error_code)
        self._handle(event)


def _plan(config: SimConfig, indices: Sequence[int]) -> list[tuple[str, list[int]]]:
    """Group client indices onto connections: one kind and health per connection."""
    groups: dict[tuple[str, bool], list[int]] = {}
    for index in indices:
        kind = "producer" if index % 2 == 0 else "consumer"
        groups.setdefault((kind, index < config.unhealthy), []).append(index)
    plan: list[tuple[str, list[int]]] = []
    size = max(1, config.clients_per_connection)
    for (kind, unhealthy), members in sorted(groups.items()):
        for start in range(0, len(members), size):
            chunk = members[start : start + size]
            label = "unhealthy" if unhealthy else "sim"
            plan.append((f"{label}-{kind}-{chunk[0]}", chunk))
    return plan


async def _run_async(config: SimConfig, indices: Sequence[int]) -> SimReport:
    report = SimReport(clients=len(indices))
    rng = random.Random(config.seed if config.seed is None else config.seed + indices[0])
    started = time.monotonic()
    started_ns = time.time_ns()
    conns: list[SimConnection] = []
    clients: list[_SimClient] = []
    security = ClientSecurity.from_properties(dict(config.client_properties))
    for client_id, members in _plan(config, indices):
        # A peer that never answers must not outlast the run: the first connection's
        # handshake is bounded by the run's duration too.
        timeout = min(config.request_timeout_s, max(config.duration_s, 1.0))
        conn = await open_connection(config.host, config.port, client_id, security, timeout)
        conns.append(conn)
        for index in members:
            metrics = SimMetrics(
                "producer" if index % 2 == 0 else "consumer",
                index < config.unhealthy,
                config.unhealthy_latency_ms,
                time.time_ns(),
            )
            clients.append(
                _SimClient(index, conn, metrics, random.Random(rng.getrandbits(64)), report, config)
            )
            _inject(clients[-1], config.faults, started_ns, report)
    report.connections = len(conns)
    # The clients run for the duration once connected: opening many TLS connections
    # one after another on a busy machine must not eat the run (it once left none).
    stop_at = time.monotonic() + config.duration_s
    try:
        await asyncio.gather(*(c.run(stop_at) for c in clients))
    finally:
        for conn in conns:
            conn.close()
    report.elapsed_s = time.monotonic() - started
    return report


def _inject(
    client: _SimClient, faults: Sequence[SimFault], started_ns: int, report: SimReport
) -> None:
    """Give the client its fault (``sim_payloads.fault_for``) and record the ground truth."""
    fault = fault_for(client.index, client.metrics.kind, faults)
    if fault is None:
        return
    client.metrics.fault = fault.kind
    client.metrics.fault_onset_ns = started_ns + int(fault.onset_seconds * 1e9)
    onset = client.metrics.fault_onset_ns / 1e9
    report.faults.append((str(client.instance_id), fault.kind, onset))


def run_process(config: SimConfig, indices: Sequence[int]) -> SimReport:
    """Run the clients ``indices`` in this process (its own event loop)."""
    try:
        import uvloop

        return uvloop.run(_run_async(config, indices))
    except ImportError:
        return asyncio.run(_run_async(config, indices))


def simulate(config: SimConfig, processes: int = 1) -> SimReport:
    """Run ``config.clients`` clients split over ``processes`` processes; merged report."""
    processes = max(1, min(processes, config.clients))
    shares = [list(range(p, config.clients, processes)) for p in range(processes)]
    if processes == 1:
        return run_process(config, shares[0])
    total = SimReport()
    with ProcessPoolExecutor(processes) as pool:
        for part in pool.map(run_process, [config] * processes, shares):
            total.merge(part)
    return total
