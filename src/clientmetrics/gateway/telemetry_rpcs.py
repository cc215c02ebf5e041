"""GetTelemetrySubscriptions (71) and PushTelemetry (72): the manager plus the exporters."""

from __future__ import annotations

import asyncio
import functools
import struct
import time
import uuid
from dataclasses import fields, replace

import structlog

from clientmetrics.exporters.base import ExportError
from clientmetrics.exporters.path import ExportPath
from clientmetrics.gateway.fairshare import FairShare
from clientmetrics.gateway.handlers import ConnectionState
from clientmetrics.gateway.limits import now_ms
from clientmetrics.gateway.turns import OffLoop
from clientmetrics.telemetry.manager import (
    ClientMetricsManager,
    PendingPush,
    PushResult,
    SubscriptionsResult,
    decode_push,
)
from clientmetrics.telemetry.model import AcceptedPush
from clientmetrics.wire import (
    ZERO_UUID,
    ErrorCode,
    RequestHeader,
    blank_entity,
    encode_response,
    response_type,
)
from clientmetrics.wire.build import build
from clientmetrics.wire.codec import write_entity
from clientmetrics.wire.messages import frame_response
from clientmetrics.wire.results import Answer, AnswerLater, Reply, Request

log = structlog.get_logger("clientmetrics.gateway")

#: Pushes whose OTLP is at most this large are decoded on the event loop: the hop
#: to the decode pool (a submit that contends with the pool's threads for the
#: interpreter lock, two futures, a wake-up) cost more than the work, about a
#: fifth of the loop's time per push at saturation. A compressed push is first
#: decompressed here with this as its bound: only a larger one (or one refused
#: under this bound) goes to the pool, to be decoded under ``telemetry.max.bytes``.
INLINE_DECODE_BYTES = 32 * 1024


class SubscriptionTemplates:
    """Encoded GetTelemetrySubscriptions responses, patched per client.

    Every client matched by the same subscriptions gets the same response but for
    its correlation id, instance id and SubscriptionId, all fixed-width fields at
    fixed offsets. So each distinct plan is encoded once (by the codec layer) and
    copied and patched after that: the common Get costs a copy, not an encode.
    """

    #: Frame offsets: size(4) correlation(4) header tags(1) throttle(4) error(2), then
    #: v0: instance id(16) SubscriptionId(4); v1 (KIP-1313): SubscriptionId(4).
    _CORRELATION = struct.Struct(">i")
    _ID_AT = 15
    _MAX = 1024

    def __init__(self) -> None:
        self._cache: dict[tuple[object, ...], bytes] = {}

    def render(self, header: RequestHeader, result: SubscriptionsResult) -> bytes:
        key = (
            header.api_version,
            result.throttle_time_ms,
            result.accepted_compression_types,
            result.push_interval_ms,
            result.telemetry_max_bytes,
            result.delta_temporality,
            result.requested_metrics,
        )
        template = self._cache.get(key)
        if template is None:
            if len(self._cache) >= self._MAX:
                self._cache.clear()
            template = self._cache[key] = self._encode(header, result)
        frame = bytearray(template)
        self._CORRELATION.pack_into(frame, 4, header.correlation_id)
        at = self._ID_AT
        if header.api_version == 0:
            frame[at : at + 16] = result.client_instance_id.bytes
            at += 16
        self._CORRELATION.pack_into(frame, at, result.subscription_id)
        return bytes(frame)

    @staticmethod
    def _encode(header: RequestHeader, result: SubscriptionsResult) -> bytes:
        values = {
            "throttle_time": result.throttle_time_ms,
            "error_code": ErrorCode.NONE,
            "client_instance_id": ZERO_UUID,
            "subscription_id": 0,
            "accepted_compression_types": result.accepted_compression_types,
            "push_interval": result.push_interval_ms,
            "telemetry_max_bytes": result.telemetry_max_bytes,
            "delta_temporality": result.delta_temporality,
            "requested_metrics": result.requested_metrics,
        }
        cls = response_type(header.api_key, header.api_version)
        template = encode_response(replace(header, correlation_id=0), build(cls, values))
        if header.api_version > 1 or template[8] != 0:
            raise ValueError("response layout changed: template offsets no longer hold")
        return template


class TelemetryHandlers:
    """Answers the two KIP-714 RPCs (v0, and v1 with the KIP-1313 header id)."""

    def __init__(
        self,
        manager: ClientMetricsManager,
        exporters: ExportPath,
        decoder: OffLoop | None = None,
        share: FairShare | None = None,
    ) -> None:
        self._manager = manager
        self._exporters = exporters
        self._templates = SubscriptionTemplates()
        #: Where heavy payloads are decompressed and parsed, so one client's push
        #: cannot stall the event loop for everyone else (None: inline).
        self._decoder = decoder
        #: Each request's work waits its turn: a bounded share per loop turn, round
        #: robin by source address (one flooding client cannot hold up the others).
        self._share = share or FairShare()

    @staticmethod
    def _instance_id(header: RequestHeader, body: object) -> uuid.UUID | None:
        if header.api_version >= 1:
            return header.client_instance_id
        value = getattr(body, "client_instance_id", None)
        return value if isinstance(value, uuid.UUID) else None

    @staticmethod
    def _missing_header_id(header: RequestHeader) -> bool:
        """KIP-1313: v1 carries the client's id only in the header; it must be set.

        A v1 response has no field for a broker-made id, so a zero id cannot be
        answered the v0 way (assign one): it is INVALID_REQUEST.
        """
        return header.api_version >= 1 and header.client_instance_id in (None, ZERO_UUID)

    async def get_subscriptions(self, conn: ConnectionState, request: Request) -> Reply:
        await self._share.turn(conn.peer_host)
        header = request.header
        body = request.body()
        if self._missing_header_id(header):
            return Answer(self._reply(header, {"error_code": ErrorCode.INVALID_REQUEST}))
        result = self._manager.get_telemetry_subscriptions(
            self._instance_id(header, body), conn.context(), now_ms()
        )
        if result.error_code is ErrorCode.NONE:
            return Answer(self._templates.render(header, result))
        values = {
            "throttle_time": result.throttle_time_ms,
            "error_code": result.error_code,
            "client_instance_id": ZERO_UUID,
        }
        return Answer(self._reply(header, values))

    async def push(self, conn: ConnectionState, request: Request) -> Reply:
        """The manager's checks run now, in arrival order; decoding a heavy payload and
        landing an accepted push are answered later, so a pipelining client's next
        push does not wait for this one's group commit."""
        await self._share.turn(conn.peer_host)
        header = request.header
        body = request.body()
        if self._missing_header_id(header):
            return Answer(self._reply(header, {"error_code": ErrorCode.INVALID_REQUEST}))
        compression_type = int(body.compression_type)
        metrics = bytes(body.metrics or b"")
        started = self._manager.begin_push(
            self._instance_id(header, body),
            int(body.subscription_id),
            bool(body.terminating),
            compression_type,
            metrics,
            conn.context(),
            now_ms(),
        )
        if isinstance(started, PushResult):
            return Answer(self._pushed(header, started.error_code))
        limit = started.max_bytes
        if self._decoder is None:
            return self._finished(header, started, *decode_push(compression_type, metrics, limit))
        inline = min(limit, INLINE_DECODE_BYTES)
        if len(metrics) <= inline:  # the work is bounded by `inline` bytes out
            code, payload = decode_push(compression_type, metrics, inline)
            if code is ErrorCode.NONE or inline >= limit:
                return self._finished(header, started, code, payload)
        return AnswerLater(
            self._decoded(header, started, compression_type, metrics, conn.peer_host)
        )

    def _finished(
        self, header: RequestHeader, started: PendingPush, code: ErrorCode, payload: bytes
    ) -> Reply:
        result = self._manager.finish_push(started, code, payload)
        if result.accepted is None:
            return Answer(self._pushed(header, result.error_code))
        return AnswerLater(self._land(header, result.accepted))

    async def _decoded(
        self,
        header: RequestHeader,
        started: PendingPush,
        compression_type: int,
        metrics: bytes,
        source: str,
    ) -> bytes:
        assert self._decoder is not None
        decode = functools.partial(decode_push, compression_type, metrics, started.max_bytes)
        code, payload = await self._decoder.run(decode, source)
        result = self._manager.finish_push(started, code, payload)
        if result.accepted is None:
            return self._pushed(header, result.error_code)
        return await self._land(header, result.accepted)

    def _land(self, header: RequestHeader, push: AcceptedPush) -> asyncio.Future[bytes]:
        """Land the push in the gating exporters; its answer once all have it durably.

        The fail-open exporters (Prometheus, OTLP, topic) are offered it afterwards
        and never delay or fail the answer (``ExportPath``).

        An exporter failure is answered with THROTTLING_QUOTA_EXCEEDED, not Kafka's
        INVALID_RECORD: the data was not landed, and 89 makes a client retry after
        its interval instead of disabling telemetry for good over a full disk.
        """
        answer: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        started = time.perf_counter()

        def landed(error: BaseException | None) -> None:
            if answer.done():
                return
            elapsed_ms = (time.perf_counter() - started) * 1000
            if error is None:
                self._manager.record_export(elapsed_ms, ok=True)
                answer.set_result(self._pushed(header, ErrorCode.NONE))
            elif isinstance(error, ExportError):
                self._manager.record_export(elapsed_ms, ok=False)
                log.error(
                    "export_failed",
                    error=str(error),
                    client_instance_id=str(push.client_instance_id),
                )
                answer.set_result(self._pushed(header, ErrorCode.THROTTLING_QUOTA_EXCEEDED))
            elif isinstance(error, asyncio.CancelledError):
                answer.cancel()
            else:  # a bug: the driver's one error policy answers it
                answer.set_exception(error)

        self._exporters.submit(push, landed)
        return answer

    @staticmethod
    def _pushed(header: RequestHeader, code: ErrorCode) -> bytes:
        # Only the correlation id differs between two answers of one version and code:
        # the body is encoded once (building and encoding it was ~7 % of a push).
        return frame_response(header, _push_body(header.api_key, header.api_version, code))

    @staticmethod
    def _reply(header: RequestHeader, values: dict[str, object]) -> bytes:
        """Encode a response; fields the version lacks are dropped, missing ones defaulted.

        ``build`` turns millisecond ints into the ``timedelta`` durations kio writes.
        """
        cls = response_type(header.api_key, header.api_version)
        blank = blank_entity(cls)
        defaults = {f.name: getattr(blank, f.name) for f in fields(blank)}
        return encode_response(header, build(cls, {**defaults, **values}))


@functools.cache
def _push_body(api_key: int, api_version: int, code: ErrorCode) -> bytes:
    """A PushTelemetry response body with no throttle (bounded: served versions x codes)."""
    cls = response_type(api_key, api_version)
    return write_entity(build(cls, {"throttle_time": 0, "error_code": code}))
