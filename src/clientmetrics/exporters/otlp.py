"""The OTLP/HTTP exporter: pushes as ``ExportMetricsServiceRequest`` protobuf.

``[exporters.otlp] endpoint = "http://HOST:PORT/v1/metrics"``. Each batch of
pushes (up to ``max_batch``, or what arrived within ``max_delay_ms``) becomes one
request whose ``ResourceMetrics`` carry the broker's labels as resource
attributes. As the OTLP specification says: 429, 502, 503 and 504 (and a
connection that fails) are retried with exponential backoff, honouring
``Retry-After``, until ``retry_max_s`` has passed; any other error status drops
the batch. It is a queued, fail-open exporter: while it retries, its own queue
fills and then drops, the pushes' answers never wait for it.
"""

from __future__ import annotations

import asyncio
import email.utils
import gzip
import random
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import structlog

from clientmetrics.errors import ConfigurationError
from clientmetrics.exporters.base import Exporter, ExportError
from clientmetrics.exporters.queued import ExporterStats, QueuedExporter, QueueOptions
from clientmetrics.telemetry.model import AcceptedPush
from clientmetrics.telemetry.otlp import export_request

log = structlog.get_logger(__name__)

RETRYABLE = frozenset({429, 502, 503, 504})
CONTENT_TYPE = "application/x-protobuf"


@dataclass(frozen=True, slots=True)
class OtlpOptions:
    """Where and how the OTLP exporter sends, validated where built."""

    endpoint: str
    headers: Mapping[str, str] = field(default_factory=dict)
    compression: str = "gzip"
    timeout_s: float = 10.0
    ca: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None
    max_batch: int = 512
    max_delay_ms: float = 200.0
    retry_initial_s: float = 1.0
    retry_max_backoff_s: float = 30.0
    retry_max_s: float = 60.0

    def __post_init__(self) -> None:
        if not self.endpoint.startswith(("http://", "https://")):
            raise ConfigurationError(f"otlp.endpoint must be an http(s) URL, not {self.endpoint!r}")
        if self.compression not in ("gzip", "none"):
            raise ConfigurationError("otlp.compression must be gzip or none")
        if self.client_key is not None and self.client_cert is None:
            raise ConfigurationError("otlp.client_key needs otlp.client_cert")
        if self.max_batch < 1 or self.timeout_s <= 0 or self.max_delay_ms < 0:
            raise ConfigurationError("otlp: max_batch, timeout_s must be positive")
        for path in (self.ca, self.client_cert, self.client_key):
            if path is not None and not path.is_file():
                raise ConfigurationError(f"otlp: no such file {path}")

    @classmethod
    def from_mapping(cls, options: Mapping[str, object]) -> OtlpOptions:
        known = set(cls.__dataclass_fields__)
        unknown = set(options) - known
        if unknown:
            raise ConfigurationError(f"unknown otlp exporter options: {', '.join(sorted(unknown))}")
        if "endpoint" not in options:
            raise ConfigurationError("the otlp exporter needs an endpoint")
        values: dict[str, object] = {}
        for key, raw in options.items():
            if key == "headers":
                if not isinstance(raw, Mapping):
                    raise ConfigurationError("otlp.headers must be a table of strings")
                values[key] = {str(k): str(v) for k, v in raw.items()}
            elif key in ("ca", "client_cert", "client_key"):
                values[key] = Path(str(raw))
            elif key in ("endpoint", "compression"):
                values[key] = str(raw)
            elif key == "max_batch":
                values[key] = _number(key, raw, int)
            else:
                values[key] = _number(key, raw, float)
        return cls(**values)  # type: ignore[arg-type]


def _number(key: str, raw: object, kind: type[int] | type[float]) -> int | float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ConfigurationError(f"otlp.{key} must be a number, not {raw!r}")
    if kind is int and not float(raw).is_integer():
        raise ConfigurationError(f"otlp.{key} must be a whole number")
    return kind(raw)


def retry_after_s(value: str | None, now: float) -> float | None:
    """``Retry-After`` as seconds from now: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


class OtlpSink:
    """Sends batches to one OTLP/HTTP endpoint with httpx."""

    def __init__(self, options: OtlpOptions, labels: Sequence[str]) -> None:
        self.options = options
        self.labels = tuple(labels)
        self.max_batch = options.max_batch
        self.max_delay_s = options.max_delay_ms / 1000
        self._client: httpx.AsyncClient | None = None
        self._stats: ExporterStats | None = None
        self._rng = random.Random()

    async def start(self, stats: ExporterStats) -> None:
        self._stats = stats
        o = self.options
        verify: ssl.SSLContext | bool = True
        if o.endpoint.startswith("https://"):
            verify = ssl.create_default_context(cafile=str(o.ca) if o.ca else None)
            if o.client_cert is not None:
                key = str(o.client_key) if o.client_key else None
                verify.load_cert_chain(str(o.client_cert), key)
        headers = {"Content-Type": CONTENT_TYPE, **o.headers}
        if o.compression == "gzip":
            headers["Content-Encoding"] = "gzip"
        self._client = httpx.AsyncClient(
            headers=headers, timeout=o.timeout_s, verify=verify, trust_env=False
        )

    async def send(self, pushes: Sequence[AcceptedPush]) -> int:
        body = export_request((p.payload, p.label_values(self.labels)) for p in pushes)
        if self.options.compression == "gzip":
            body = gzip.compress(body, compresslevel=1)
        await self._post(body, len(pushes))
        return len(pushes)

    async def _post(self, body: bytes, count: int) -> None:
        assert self._client is not None
        o = self.options
        deadline = time.monotonic() + o.retry_max_s
        backoff = o.retry_initial_s
        attempt = 0
        while True:
            attempt += 1
            status: int | None = None
            wait: float | None = None
            try:
                response = await self._client.post(o.endpoint, content=body)
                status = response.status_code
                if 200 <= status < 300:
                    return
                if status not in RETRYABLE:
                    raise ExportError(f"otlp endpoint answered {status}: {response.text[:200]}")
                wait = retry_after_s(response.headers.get("retry-after"), time.time())
                reason = f"status {status}"
            except httpx.TransportError as exc:  # refused, reset, timed out: retryable
                reason = f"{type(exc).__name__}: {exc}"
            # Exponential backoff with jitter, unless the server said when.
            delay = wait if wait is not None else backoff * (0.5 + self._rng.random() / 2)
            backoff = min(backoff * 2, o.retry_max_backoff_s)
            if time.monotonic() + delay > deadline:
                raise ExportError(f"otlp: gave up after {attempt} attempts ({reason})")
            if self._stats is not None:
                self._stats.extra["retries"] = self._stats.extra.get("retries", 0) + 1
            log.info(
                "otlp_retry", attempt=attempt, reason=reason, delay_s=round(delay, 3), pushes=count
            )
            await asyncio.sleep(delay)

    async def flush(self, timeout_s: float) -> None:
        pass

    async def close(self, timeout_s: float) -> None:
        if self._client is not None:
            await self._client.aclose()


def create(options: Mapping[str, object], data_dir: Path) -> Exporter:
    """Entry-point factory: ``endpoint``, ``headers``, TLS, batching, retries + queue options."""
    queue, rest = QueueOptions.take("otlp", options)
    return QueuedExporter("otlp", OtlpSink(OtlpOptions.from_mapping(rest), queue.labels), queue)
