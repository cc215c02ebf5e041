"""The client side of SASL PLAIN and SCRAM, without I/O: the messages a client sends.

One home for both clients the project has: the admin tool logging in to a
broker, and the gateway logging in to the cluster on each upstream link (proxy
mode, ``[proxy] sasl = "terminate"`` towards a SASL cluster). SCRAM runs on
``scramp``'s client, which also checks the server's final signature, so a
server that does not know the password cannot pass itself off as the cluster.
"""

from __future__ import annotations

from collections.abc import Generator

import scramp

from clientmetrics.security.base import AuthenticationFailed, UnsupportedMechanism

__all__ = ["CLIENT_MECHANISMS", "client_messages"]

SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")
#: The mechanisms a client here can log in with a user name and password.
CLIENT_MECHANISMS = ("PLAIN", *SCRAM)


def client_messages(
    mechanism: str, username: str, password: str, *, nonce: str | None = None
) -> Generator[bytes, bytes, None]:
    """The client's SASL messages; each ``send`` gets the server's answer to the last.

    Raises ``AuthenticationFailed`` when a SCRAM server message is malformed or its
    signature is wrong, ``UnsupportedMechanism`` for anything but PLAIN and SCRAM.
    ``nonce``: SCRAM's client nonce (random when None; tests pin it).
    """
    if mechanism == "PLAIN":
        # RFC 4616: empty authzid, NUL, authcid, NUL, password.
        yield b"\0" + username.encode() + b"\0" + password.encode()
        return
    if mechanism not in SCRAM:
        raise UnsupportedMechanism(f"no client for SASL mechanism {mechanism}")
    client = scramp.ScramClient([mechanism], username, password, c_nonce=nonce)
    server_first = yield client.get_client_first().encode()
    try:
        client.set_server_first(server_first.decode())
        server_final = yield client.get_client_final().encode()
        client.set_server_final(server_final.decode())
    except (scramp.ScramException, UnicodeDecodeError) as exc:
        raise AuthenticationFailed(f"Invalid SCRAM server message: {exc}") from exc
