"""An OTLP/HTTP metrics receiver for tests, decoding with opentelemetry-proto; a black hole."""

from __future__ import annotations

import gzip
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)


@dataclass
class OtlpReceiver:
    """Answers ``POST /v1/metrics``; ``script`` holds (status, headers) for the first
    attempts, then every answer is 200. Decoded requests land in ``requests``."""

    script: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    #: Serve HTTPS with this context (it may require a client certificate).
    tls: ssl.SSLContext | None = None
    requests: list[Any] = field(default_factory=list)
    attempts: list[tuple[float, int, dict[str, str]]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    def start(self) -> OtlpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, extra = receiver.script.pop(0) if receiver.script else (200, {})
                receiver.attempts.append((time.monotonic(), status, headers))
                if status == 200 and self.path == "/v1/metrics":
                    if headers.get("content-encoding") == "gzip":
                        body = gzip.decompress(body)
                    receiver.requests.append(ExportMetricsServiceRequest.FromString(body))
                reply = ExportMetricsServiceResponse().SerializeToString()
                self.send_response(status)
                for key, value in extra.items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if self.tls is not None:
            self._server.socket = self.tls.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self._server is not None
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self._server.server_address[1]}/v1/metrics"

    def metrics(self) -> list[tuple[dict[str, Any], str]]:
        """(resource attributes, metric name) of everything received."""
        out = []
        for request in self.requests:
            for rm in request.resource_metrics:
                attrs = {
                    kv.key: getattr(kv.value, kv.value.WhichOneof("value"))
                    for kv in rm.resource.attributes
                }
                out += [(attrs, m.name) for sm in rm.scope_metrics for m in sm.metrics]
        return out

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


class BlackHole:
    """Accepts TCP connections (the kernel completes them) and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1/metrics"

    def close(self) -> None:
        self.sock.close()
