"""SASL client side (SaslHandshake v1, SaslAuthenticate v1), as Kafka clients do it.

Mechanisms: PLAIN (RFC 4616), SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802; both
from ``security.sasl_client``, which the gateway's own upstream login uses too)
and OAUTHBEARER (RFC 7628, with a token read from a file at each authentication,
so a token refreshed on disk is picked up).

The wire layer serves no codec for these two APIs, and both versions used here are
non-flexible with a handful of fields, so their bodies are written and read here.
"""

from __future__ import annotations

import struct
from collections.abc import Generator
from pathlib import Path
from typing import Protocol

from clientmetrics.admin.errors import AdminError
from clientmetrics.security.base import AuthenticationFailed
from clientmetrics.security.sasl_client import client_messages
from clientmetrics.wire import ErrorCode

__all__ = [
    "AdminAuthenticationError",
    "SaslCredentials",
    "SaslOAuthBearer",
    "SaslPlain",
    "SaslScram",
    "authenticate",
    "authenticate_plain",
]

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class AdminAuthenticationError(AdminError):
    """The broker refused the SASL mechanism or the credentials."""


class SaslPlain:
    """PLAIN credentials; the password never appears in ``repr``."""

    __slots__ = ("password", "username")
    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self.username = username
        self.password = password

    def __repr__(self) -> str:
        return f"SaslPlain(username={self.username!r}, password=***)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SaslPlain) and (self.username, self.password) == (
            other.username,
            other.password,
        )

    def __hash__(self) -> int:
        return hash(self.username)

    def messages(self) -> Generator[bytes, bytes, None]:
        """The client's messages; each ``send`` gets the server's answer to the last."""
        yield from client_messages(self.mechanism, self.username, self.password)


class SaslScram:
    """SCRAM-SHA-256 / SCRAM-SHA-512 credentials; the password never appears in ``repr``."""

    __slots__ = ("mechanism", "password", "username")

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        if mechanism not in SCRAM_MECHANISMS:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self.username = username
        self.password = password

    def __repr__(self) -> str:
        return f"SaslScram({self.mechanism!r}, username={self.username!r}, password=***)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SaslScram) and (
            self.mechanism,
            self.username,
            self.password,
        ) == (other.mechanism, other.username, other.password)

    def __hash__(self) -> int:
        return hash((self.mechanism, self.username))

    def messages(self) -> Generator[bytes, bytes, None]:
        try:
            yield from client_messages(self.mechanism, self.username, self.password)
        except AuthenticationFailed as exc:
            raise AdminAuthenticationError(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc)) from exc


class SaslOAuthBearer:
    """OAUTHBEARER with a JWT read from ``token_file`` at each authentication."""

    __slots__ = ("token_file",)
    mechanism = "OAUTHBEARER"

    def __init__(self, token_file: Path) -> None:
        self.token_file = token_file

    def __repr__(self) -> str:
        return f"SaslOAuthBearer(token_file={str(self.token_file)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SaslOAuthBearer) and self.token_file == other.token_file

    def __hash__(self) -> int:
        return hash(self.token_file)

    def token(self) -> str:
        try:
            token = self.token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise AdminAuthenticationError(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                f"Cannot read the OAUTHBEARER token file {self.token_file}: {exc.strerror}",
            ) from exc
        if not token:
            raise AdminAuthenticationError(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                f"The OAUTHBEARER token file {self.token_file} is empty",
            )
        return token

    def messages(self) -> Generator[bytes, bytes, None]:
        challenge = yield f"n,,\x01auth=Bearer {self.token()}\x01\x01".encode()
        if challenge:
            # RFC 7628: an error challenge is acknowledged with ^A; the broker then fails.
            yield b"\x01"
            raise AdminAuthenticationError(
                ErrorCode.SASL_AUTHENTICATION_FAILED, challenge.decode("utf-8", "replace")
            )


SaslCredentials = SaslPlain | SaslScram | SaslOAuthBearer


class _Requester(Protocol):
    address: str

    async def raw_request(self, api_key: int, version: int, body: bytes, what: str) -> bytes: ...


def _string(value: str) -> bytes:
    raw = value.encode()
    return _INT16.pack(len(raw)) + raw


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def take(self, size: int) -> bytes:
        if size < 0 or self._pos + size > len(self._data):
            raise AdminError(ErrorCode.UNKNOWN_SERVER_ERROR, "Malformed SASL response")
        chunk = self._data[self._pos : self._pos + size]
        self._pos += size
        return chunk

    def int16(self) -> int:
        return int(_INT16.unpack(self.take(2))[0])

    def int32(self) -> int:
        return int(_INT32.unpack(self.take(4))[0])

    def string(self) -> str | None:
        size = self.int16()
        return None if size == -1 else self.take(size).decode("utf-8", "replace")

    def bytes_(self) -> bytes:
        size = self.int32()
        return b"" if size == -1 else self.take(size)


async def _handshake(conn: _Requester, mechanism: str) -> None:
    reply = _Reader(
        await conn.raw_request(SASL_HANDSHAKE, 1, _string(mechanism), "the SaslHandshake response")
    )
    code = ErrorCode.for_code(reply.int16())
    mechanisms = [reply.string() or "" for _ in range(max(reply.int32(), 0))]
    if code is not ErrorCode.NONE:
        # Kafka's SaslClientAuthenticator wording.
        raise AdminAuthenticationError(
            code,
            f"Client SASL mechanism '{mechanism}' not enabled in the server, enabled "
            f"mechanisms are [{', '.join(mechanisms)}]",
        )


async def _authenticate_step(conn: _Requester, token: bytes) -> bytes:
    reply = _Reader(
        await conn.raw_request(
            SASL_AUTHENTICATE, 1, _INT32.pack(len(token)) + token, "the SaslAuthenticate response"
        )
    )
    code = ErrorCode.for_code(reply.int16())
    message = reply.string()
    if code is not ErrorCode.NONE:
        raise AdminAuthenticationError(code, message)
    return reply.bytes_()


async def authenticate(conn: _Requester, credentials: SaslCredentials) -> None:
    """Run the mechanism's exchange on a freshly negotiated connection."""
    await _handshake(conn, credentials.mechanism)
    messages = credentials.messages()
    token = next(messages)
    while True:
        answer = await _authenticate_step(conn, token)
        try:
            token = messages.send(answer)
        except StopIteration:
            return


async def authenticate_plain(conn: _Requester, credentials: SaslPlain) -> None:
    """Run the PLAIN exchange (kept for callers of the earlier API)."""
    await authenticate(conn, credentials)
