"""SASL, client side (SaslHandshake v1, SaslAuthenticate v1), as Kafka clients do it.

Mechanisms: PLAIN (RFC 4616), SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, on
``scramp``'s client, which also checks the server's signature) and OAUTHBEARER
(RFC 7628, with a token read from a file at each authentication, so a token
refreshed on disk is picked up). The two requests and their responses are
``clientmetrics.wire`` messages; any connection that can send one and return the
decoded response (``SaslRequester``) can authenticate.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any, Protocol

import scramp

from clientmetrics.errors import ClientMetricsError
from clientmetrics.wire import ApiKey, ErrorCode, request_type

__all__ = [
    "SCRAM_MECHANISMS",
    "SaslAuthenticationError",
    "SaslCredentials",
    "SaslOAuthBearer",
    "SaslPlain",
    "SaslRequester",
    "SaslScram",
    "authenticate",
]

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
#: The versions sent: SaslAuthenticate v1 carries the session lifetime, both are
#: non-flexible, and every broker since Kafka 1.0 serves them.
HANDSHAKE_VERSION = 1
AUTHENTICATE_VERSION = 1


class SaslAuthenticationError(ClientMetricsError):
    """The broker refused the mechanism or the credentials (``error_code``: Kafka's)."""

    def __init__(self, error_code: ErrorCode, message: str | None) -> None:
        self.error_code = error_code
        self.message = message or "SASL Authentication failed."
        super().__init__(self.message)


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

    def token(self) -> bytes:
        """RFC 4616 message: empty authzid, NUL, authcid, NUL, password."""
        return b"\0" + self.username.encode() + b"\0" + self.password.encode()

    def messages(self) -> Generator[bytes, bytes, None]:
        """The client's messages; each ``send`` gets the server's answer to the last."""
        yield self.token()


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
        client = scramp.ScramClient([self.mechanism], self.username, self.password)
        server_first = yield client.get_client_first().encode()
        try:
            client.set_server_first(server_first.decode())
            server_final = yield client.get_client_final().encode()
            client.set_server_final(server_final.decode())
        except (scramp.ScramException, UnicodeDecodeError) as exc:
            raise SaslAuthenticationError(
                ErrorCode.SASL_AUTHENTICATION_FAILED, f"Invalid SCRAM server message: {exc}"
            ) from exc


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
            raise SaslAuthenticationError(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                f"Cannot read the OAUTHBEARER token file {self.token_file}: {exc.strerror}",
            ) from exc
        if not token:
            raise SaslAuthenticationError(
                ErrorCode.SASL_AUTHENTICATION_FAILED,
                f"The OAUTHBEARER token file {self.token_file} is empty",
            )
        return token

    def messages(self) -> Generator[bytes, bytes, None]:
        challenge = yield f"n,,\x01auth=Bearer {self.token()}\x01\x01".encode()
        if challenge:
            # RFC 7628: an error challenge is acknowledged with ^A; the broker then fails.
            yield b"\x01"
            raise SaslAuthenticationError(
                ErrorCode.SASL_AUTHENTICATION_FAILED, challenge.decode("utf-8", "replace")
            )


SaslCredentials = SaslPlain | SaslScram | SaslOAuthBearer


class SaslRequester(Protocol):
    """A connection that sends a request and returns the decoded response body."""

    async def sasl_request(self, api_key: int, version: int, body: Any, what: str) -> Any:
        """``body`` (a ``wire.request_type`` entity) sent; the response entity.

        Raises the connection's own errors for transport failures.
        """
        ...


async def _handshake(conn: SaslRequester, mechanism: str) -> None:
    body = request_type(ApiKey.SASL_HANDSHAKE, HANDSHAKE_VERSION)(mechanism=mechanism)
    reply = await conn.sasl_request(
        ApiKey.SASL_HANDSHAKE, HANDSHAKE_VERSION, body, "the SaslHandshake response"
    )
    code = ErrorCode.for_code(int(reply.error_code))
    if code is not ErrorCode.NONE:
        # Kafka's SaslClientAuthenticator wording.
        enabled = ", ".join(str(m) for m in reply.mechanisms or ())
        raise SaslAuthenticationError(
            code,
            f"Client SASL mechanism '{mechanism}' not enabled in the server, enabled "
            f"mechanisms are [{enabled}]",
        )


async def _authenticate_step(conn: SaslRequester, token: bytes) -> bytes:
    body = request_type(ApiKey.SASL_AUTHENTICATE, AUTHENTICATE_VERSION)(auth_bytes=token)
    reply = await conn.sasl_request(
        ApiKey.SASL_AUTHENTICATE, AUTHENTICATE_VERSION, body, "the SaslAuthenticate response"
    )
    code = ErrorCode.for_code(int(reply.error_code))
    if code is not ErrorCode.NONE:
        raise SaslAuthenticationError(code, reply.error_message)
    return bytes(reply.auth_bytes or b"")


async def authenticate(conn: SaslRequester, credentials: SaslCredentials) -> None:
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
