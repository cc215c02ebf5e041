"""``HOST:PORT``, as every address clientmetrics listens on is written."""

from __future__ import annotations

import ipaddress

from clientmetrics.errors import ConfigurationError

__all__ = ["is_loopback", "parse_host_port"]


def parse_host_port(text: object, what: str) -> tuple[str, int]:
    """``HOST:PORT`` as (host, port): port 0 means any free port, an IPv6 host may be
    in brackets, no host means 127.0.0.1. Anything else is a ``ConfigurationError``
    naming ``what``."""
    host, sep, port = str(text).rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ConfigurationError(f"{what}: expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) only this machine can reach: ``localhost``
    or a loopback address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
