"""The topic store's records: encoding, bounded decoding and the reasons a record is refused.

Anyone who can write to the store's topic controls these bytes, so decoding is
total: a record that cannot be used becomes a ``Refused`` with a reason, never an
exception. Sizes are checked before anything is parsed, and the nesting depth
before ``json.loads`` (whose recursion a deeply nested value would exhaust).
Signing (``signing.py``) is checked before the value is parsed at all.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from clientmetrics.store.base import ConfigMap
from clientmetrics.store.signing import SIGNATURE_HEADER, RecordSigner
from clientmetrics.telemetry.configs import too_large

__all__ = [
    "MAX_DEPTH",
    "MAX_NAME_BYTES",
    "MAX_VALUE_BYTES",
    "Decoded",
    "Reason",
    "Refused",
    "decode_record",
    "encode_value",
]

#: A record value larger than this is refused unread (and an alter that would
#: write one is refused): a subscription's configs are a few hundred bytes.
MAX_VALUE_BYTES = 64 * 1024
#: A subscription name (the record key) longer than this is refused.
MAX_NAME_BYTES = 1024
#: ``{"configs": {...}}`` nests two deep; anything deeper is not ours.
MAX_DEPTH = 4

_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(rb"[^\[\]{}]+")


class Reason(enum.Enum):
    """Why a record was refused: the label of the refusal counter."""

    TOO_LARGE = "too_large"
    TOO_DEEP = "too_deep"
    NOT_JSON = "not_json"
    BAD_SHAPE = "bad_shape"
    BAD_NAME = "bad_name"
    UNSIGNED = "unsigned"
    BAD_SIGNATURE = "bad_signature"
    OVER_CAP = "over_cap"


@dataclass(frozen=True)
class Decoded:
    """A usable record: ``configs`` empty means deleted; ``base`` None: no compare-and-set."""

    name: str
    configs: dict[str, str]
    base: int | None


@dataclass(frozen=True)
class Refused:
    """A record that changes nothing; ``name`` as far as it could be read (for the log)."""

    name: str
    reason: Reason
    detail: str


def encode_value(configs: ConfigMap, base: int | None = None) -> bytes | None:
    """The record value for ``configs`` computed from the record at ``base``.

    Without a base, empty configs are a tombstone (``None``); with one, a deletion
    is an empty map so that it is compared-and-set like any other change. A value
    every reader would refuse as too large raises ``ConfigError`` instead.
    """
    if not configs and base is None:
        return None
    doc: dict[str, Any] = {"configs": dict(sorted(configs.items()))}
    if base is not None:
        doc["base"] = base
    value = json.dumps(doc).encode()
    if len(value) > MAX_VALUE_BYTES:
        raise too_large(len(value), MAX_VALUE_BYTES)
    return value


def depth_of(value: bytes) -> int:
    """The deepest nesting of ``[`` and ``{`` in a JSON text, without parsing it.

    Strings are removed first (brackets inside them do not nest); what is left is
    scanned bracket by bracket, so the cost is linear and no recursion is involved.
    """
    brackets = _BRACKETS.sub(b"", _STRINGS.sub(b"", value))
    depth = deepest = 0
    for byte in brackets:
        depth += 1 if byte in b"[{" else -1
        deepest = max(deepest, depth)
    return deepest


def decode_record(
    key: bytes | None,
    value: bytes | None,
    headers: Mapping[str, bytes] | None,
    signer: RecordSigner | None,
    topic: str,
) -> Decoded | Refused:
    """The record's change, or why it is refused. Never raises."""
    if not key or len(key) > MAX_NAME_BYTES:
        return Refused("", Reason.BAD_NAME, f"key of {len(key or b'')} bytes")
    try:
        name = key.decode("utf-8")
    except UnicodeDecodeError:
        return Refused(key.decode("utf-8", "replace"), Reason.BAD_NAME, "key is not UTF-8")
    if value is not None and len(value) > MAX_VALUE_BYTES:
        return Refused(name, Reason.TOO_LARGE, f"value of {len(value)} bytes")
    if signer is not None:
        signature = (headers or {}).get(SIGNATURE_HEADER)
        if signature is None:
            return Refused(name, Reason.UNSIGNED, "no signature")
        if not signer.verify(topic, key, value, signature):
            return Refused(name, Reason.BAD_SIGNATURE, "signature does not match")
    if value is None:
        return Decoded(name, {}, None)
    if depth_of(value) > MAX_DEPTH:
        return Refused(name, Reason.TOO_DEEP, f"nested deeper than {MAX_DEPTH}")
    try:
        doc = json.loads(value)
    except ValueError as exc:  # UnicodeDecodeError included
        return Refused(name, Reason.NOT_JSON, str(exc)[:200])
    return _shaped(name, doc)


def _shaped(name: str, doc: Any) -> Decoded | Refused:
    """``{"configs": {str: str}, "base": int?}`` or a refusal."""
    if not isinstance(doc, dict) or not isinstance(doc.get("configs"), dict):
        return Refused(name, Reason.BAD_SHAPE, "no configs object")
    configs = doc["configs"]
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in configs.items()):
        return Refused(name, Reason.BAD_SHAPE, "configs are not strings")
    base = doc.get("base")
    if base is not None and (type(base) is not int or base < -1):
        return Refused(name, Reason.BAD_SHAPE, "base is not an offset")
    return Decoded(name, dict(configs), base)
