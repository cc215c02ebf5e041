"""Signed subscription records: only a gateway holding the shared key can change the fleet.

Each record the topic store writes carries an HMAC-SHA256 in the header
``clientmetrics.signature``, computed over the topic, the key (the subscription
name) and the value, each length-prefixed. A record written by anyone else,
or a signed one moved to another name or another store's topic, does not verify
and changes nothing. A signed record replayed later under its own name carries
the ``base`` of a state that has since been replaced, so the compare-and-set
every reader applies refuses it (``topic.py``).

The key file holds one key per line (at least 32 bytes each, e.g. ``openssl rand
-hex 32``); the first signs, every one verifies, so keys can be rotated: add the
new key as the second line everywhere, then move it first everywhere, then
remove the old one once every subscription has been altered since. Like other
secrets, the file must not be readable by group or others.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
import struct
from pathlib import Path

from clientmetrics.errors import ConfigurationError

__all__ = ["MIN_KEY_BYTES", "SIGNATURE_HEADER", "RecordSigner", "load_signer"]

SIGNATURE_HEADER = "clientmetrics.signature"
MIN_KEY_BYTES = 32
_DOMAIN = b"clientmetrics subscription record v1"


def _message(topic: str, key: bytes, value: bytes | None) -> bytes:
    parts = [_DOMAIN, topic.encode(), key]
    out = bytearray()
    for part in parts:
        out += struct.pack(">I", len(part)) + part
    # A tombstone (no value) is not the empty value.
    out += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    return bytes(out)


class RecordSigner:
    """Signs with the first key, verifies with any."""

    def __init__(self, keys: list[bytes]) -> None:
        if not keys:
            raise ConfigurationError("a subscription key file needs at least one key")
        for key in keys:
            if len(key) < MIN_KEY_BYTES:
                raise ConfigurationError(
                    f"subscription keys must be at least {MIN_KEY_BYTES} bytes, one is {len(key)}"
                )
        self._keys = list(keys)

    def sign(self, topic: str, key: bytes, value: bytes | None) -> bytes:
        """The signature header's value (hex text) for this record."""
        mac = hmac.new(self._keys[0], _message(topic, key, value), hashlib.sha256)
        return mac.hexdigest().encode()

    def verify(self, topic: str, key: bytes, value: bytes | None, signature: bytes) -> bool:
        """Whether ``signature`` was made by one of the keys for exactly this record."""
        message = _message(topic, key, value)
        return any(
            hmac.compare_digest(
                hmac.new(k, message, hashlib.sha256).hexdigest().encode(), signature
            )
            for k in self._keys
        )


def load_signer(path: Path) -> RecordSigner:
    """The keys of ``subscriptions_key_file``; refused when group or others may read it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise ConfigurationError(f"subscriptions_key_file {path}: {exc.strerror or exc}") from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigurationError(f"subscriptions_key_file {path} is not a regular file")
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConfigurationError(
                f"subscriptions_key_file {path} is readable by others "
                f"(mode {stat.S_IMODE(mode):o}); chmod 600 it"
            )
        with os.fdopen(fd, "rb", closefd=False) as file:
            text = file.read(64 * 1024)
    finally:
        os.close(fd)
    keys = [line.strip() for line in text.splitlines() if line.strip()]
    return RecordSigner(keys)
