"""ApiVersions v3+ client software name and version: what Kafka accepts.

Apache Kafka's ``ApiVersionsRequest.isValid`` requires both strings to match
``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?`` in full, and answers
INVALID_REQUEST (recording neither) when they do not. The names end up as
subscription selectors and landed columns, so arbitrary text must not get in.
"""

from __future__ import annotations

import re

__all__ = ["software_valid"]

_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def software_valid(name: object, version: object) -> bool:
    """True if an ApiVersions request's software name and version are acceptable.

    Requests before v3 carry neither (``None``) and are always valid.
    """
    if name is None and version is None:
        return True
    return (
        isinstance(name, str)
        and isinstance(version, str)
        and _PATTERN.fullmatch(name) is not None
        and _PATTERN.fullmatch(version) is not None
    )
