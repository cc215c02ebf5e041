"""The one HTTP/1.1 responder behind every endpoint clientmetrics serves to scrapers.

The gateway's admin port (``/metrics``, ``/healthz``, ``/readyz``) and the
Prometheus exporter's ``/metrics``: one GET (or HEAD) per connection, the head
read with a bound and a timeout, the answer written with its length, then the
connection closed. Each endpoint says only what a path answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

__all__ = ["NOT_FOUND", "TEXT", "Answer", "HttpRequest", "HttpResponse", "handle_http"]

TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """A request as an endpoint sees it: the path without its query, the headers."""

    method: str
    path: str
    headers: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class HttpResponse:
    """What to send: a status line's code and reason, the content type, the body."""

    status: str
    body: bytes
    content_type: str = TEXT


NOT_FOUND = HttpResponse("404 Not Found", b"not found\n")

Answer = Callable[[HttpRequest], Awaitable[HttpResponse]]


async def handle_http(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    answer: Answer,
    *,
    timeout_s: float = 10.0,
) -> None:
    """Serve one request on a connection ``asyncio.start_server`` handed over, then close it.

    A client that sends no complete head within ``timeout_s`` (or more than the
    stream's limit) is dropped without an answer; a method other than GET or HEAD
    gets 405.
    """
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=timeout_s)
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        parts = request_line.split(" ")
        fields = (line.partition(":") for line in header_lines if line)
        headers = {k.strip().lower(): v.strip() for k, _, v in fields}
        if len(parts) != 3:
            response = HttpResponse("400 Bad Request", b"bad request\n")
        elif parts[0] not in ("GET", "HEAD"):
            response = HttpResponse("405 Method Not Allowed", b"method not allowed\n")
        else:
            response = await answer(HttpRequest(parts[0], parts[1].split("?")[0], headers))
        body = b"" if parts[0] == "HEAD" else response.body
        writer.write(
            f"HTTP/1.1 {response.status}\r\nContent-Type: {response.content_type}\r\n"
            f"Content-Length: {len(response.body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        await writer.drain()
    except (
        TimeoutError,
        asyncio.IncompleteReadError,
        asyncio.LimitOverrunError,
        ConnectionError,
        asyncio.CancelledError,  # closing: end quietly (3.11 would log the cancel)
    ):
        pass
    finally:
        writer.close()
