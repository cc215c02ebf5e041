"""A broker front for security tests: TLS and/or SASL, other requests go to a gateway.

It answers SaslHandshake (17) and SaslAuthenticate (36) itself, as a Kafka broker
would (its own PLAIN check with ``users``, or the gateway's mechanisms with
``sasl_server``, then also advertising both in ApiVersions), and relays every
other frame to the upstream gateway unchanged. It runs its
own event loop in a thread so a console-command subprocess can connect to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ssl
import struct
import subprocess
import threading
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.static.primitive import i16

from clientmetrics.security import AuthenticationFailed, UnsupportedMechanism
from clientmetrics.wire import (
    FrameDecoder,
    decode_response,
    encode_frame,
    encode_response,
    parse_request_header,
    peek_request,
)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 / localhost: (cert.pem, key.pem)."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


def _string(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    raw = value.encode()
    return _I16.pack(len(raw)) + raw


@dataclass
class Front:
    upstream: tuple[str, int]
    ssl_context: ssl.SSLContext | None = None
    users: Mapping[str, str] | None = None
    #: A ``security.SaslServer``: SASL answered by the gateway's own mechanisms.
    sasl_server: Any = None
    #: The principal each connection authenticated as, in order.
    principals: list[str] = field(default_factory=list)
    port: int = 0
    sasl_requests: list[int] = field(default_factory=list)
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    def start(self) -> Front:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        async def serve() -> None:
            server = await asyncio.start_server(self._client, "127.0.0.1", 0, ssl=self.ssl_context)
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            async with server:
                await server.serve_forever()

        def run() -> None:
            assert self._loop is not None
            self._loop.run_until_complete(self._main(serve()))

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        assert ready.wait(10)
        return self

    async def _main(self, serve: Coroutine[Any, Any, None]) -> None:
        self._task = asyncio.ensure_future(serve)
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
            self._thread.join(10)

    def _sasl_reply(self, frame: bytes) -> bytes:
        key, _version, correlation_id = peek_request(frame)
        _header, offset = parse_request_header(frame)
        self.sasl_requests.append(key)
        if key == 17:
            (size,) = _I16.unpack_from(frame, offset)
            mechanism = frame[offset + 2 : offset + 2 + size].decode()
            code = 0 if mechanism == "PLAIN" else 33
            body = _I16.pack(code) + _I32.pack(1) + _string("PLAIN")
        else:
            (size,) = _I32.unpack_from(frame, offset)
            _authz, user, password = frame[offset + 4 : offset + 4 + size].decode().split("\0")
            ok = self.users is not None and self.users.get(user) == password
            message = None if ok else "Authentication failed: Invalid username or password"
            body = (
                _I16.pack(0 if ok else 58) + _string(message) + _I32.pack(0) + struct.pack(">q", 0)
            )
        return encode_frame(_I32.pack(correlation_id) + body)

    @staticmethod
    def _with_sasl_apis(request: bytes, reply: bytes) -> bytes:
        """The upstream's ApiVersions response, advertising SaslHandshake and -Authenticate."""
        header, _ = parse_request_header(request)
        _, body = decode_response(18, header.api_version, reply)
        item = type(body.api_keys[0])
        extra = (
            item(api_key=i16(17), min_version=i16(0), max_version=i16(1)),
            item(api_key=i16(36), min_version=i16(0), max_version=i16(1)),
        )
        body = dataclasses.replace(body, api_keys=(*body.api_keys, *extra))
        return encode_response(header, body)

    def _mechanism_reply(self, frame: bytes, state: dict[str, Any]) -> bytes:
        """SaslHandshake / SaslAuthenticate v1 answered by ``sasl_server``'s mechanisms."""
        key, _version, correlation_id = peek_request(frame)
        _header, offset = parse_request_header(frame)
        self.sasl_requests.append(key)
        if key == 17:
            (size,) = _I16.unpack_from(frame, offset)
            mechanism = frame[offset + 2 : offset + 2 + size].decode()
            enabled = self.sasl_server.mechanisms
            try:
                state["exchange"] = self.sasl_server.start(mechanism)
                code = 0
            except UnsupportedMechanism:
                code = 33
            body = _I16.pack(code) + _I32.pack(len(enabled))
            body += b"".join(_string(m) for m in enabled)
            return encode_frame(_I32.pack(correlation_id) + body)
        (size,) = _I32.unpack_from(frame, offset)
        exchange = state["exchange"]
        try:
            answer = exchange.respond(frame[offset + 4 : offset + 4 + size], now_ms=state["now_ms"])
        except AuthenticationFailed as exc:
            state["failed"] = True
            body = _I16.pack(58) + _string(str(exc)) + _I32.pack(0) + struct.pack(">q", 0)
            return encode_frame(_I32.pack(correlation_id) + body)
        if exchange.outcome is not None:
            self.principals.append(exchange.outcome.principal)
        body = _I16.pack(0) + _string(None) + _I32.pack(len(answer)) + answer
        return encode_frame(_I32.pack(correlation_id) + body + struct.pack(">q", 0))

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        decoder, up_decoder = FrameDecoder(), FrameDecoder()
        state: dict[str, Any] = {"now_ms": int(time.time() * 1000)}
        try:
            while data := await reader.read(65536):
                for frame in decoder.feed(data):
                    if self.sasl_server is not None and peek_request(frame)[0] in (17, 36):
                        writer.write(self._mechanism_reply(frame, state))
                        if state.get("failed"):
                            await writer.drain()
                            return
                        continue
                    if self.users is not None and peek_request(frame)[0] in (17, 36):
                        writer.write(self._sasl_reply(frame))
                        continue
                    up_writer.write(encode_frame(frame))
                    replies: list[bytes] = []
                    while not replies:
                        replies = up_decoder.feed(await up_reader.read(65536))
                    if self.sasl_server is not None and peek_request(frame)[0] == 18:
                        writer.write(self._with_sasl_apis(frame, replies[0]))
                        continue
                    writer.write(encode_frame(replies[0]))
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            up_writer.close()
            writer.close()
