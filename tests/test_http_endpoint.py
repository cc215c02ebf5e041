"""``http_endpoint``: the one responder behind the admin port and the Prometheus exporter."""

from __future__ import annotations

import asyncio

from clientmetrics.http_endpoint import NOT_FOUND, HttpRequest, HttpResponse, handle_http
from tests.procs import MIN_DEADLINE_S


async def ask(raw: bytes, timeout_s: float = 5.0) -> bytes:
    seen: list[HttpRequest] = []

    async def answer(request: HttpRequest) -> HttpResponse:
        seen.append(request)
        if request.path == "/metrics":
            return HttpResponse("200 OK", b"x 1\n", "text/plain; version=0.0.4")
        return NOT_FOUND

    server = await asyncio.start_server(
        lambda r, w: handle_http(r, w, answer, timeout_s=timeout_s), "127.0.0.1", 0
    )
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    data = await asyncio.wait_for(reader.read(), MIN_DEADLINE_S)
    writer.close()
    server.close()
    await server.wait_closed()
    return data


async def test_get_head_and_the_rest() -> None:
    got = await ask(b"GET /metrics?x=1 HTTP/1.1\r\nAccept: text/plain\r\n\r\n")
    assert got == (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: 4\r\n"
        b"Connection: close\r\n\r\nx 1\n"
    )
    head = await ask(b"HEAD /metrics HTTP/1.1\r\n\r\n")
    assert head.endswith(b"Content-Length: 4\r\nConnection: close\r\n\r\n")
    assert (await ask(b"GET /other HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404 Not Found")
    posted = await ask(b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
    assert posted.startswith(b"HTTP/1.1 405 Method Not Allowed")


async def test_a_client_that_never_finishes_its_head_is_dropped() -> None:
    assert await ask(b"GET /metrics HTTP/1.1\r\n", timeout_s=0.2) == b""
