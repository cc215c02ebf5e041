"""``HOST:PORT``: one reading for the gateway's listeners and the Prometheus exporter's."""

from __future__ import annotations

from pathlib import Path

import pytest

from clientmetrics.addresses import parse_host_port
from clientmetrics.errors import ConfigurationError
from clientmetrics.exporters import load_exporter
from clientmetrics.gateway.config import Address


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("10.0.0.1:9092", ("10.0.0.1", 9092)),
        ("[::1]:9465", ("::1", 9465)),
        (":9092", ("127.0.0.1", 9092)),
        ("localhost:0", ("localhost", 0)),
        ("0.0.0.0:65535", ("0.0.0.0", 65535)),
    ],
)
def test_host_and_port(text: str, parsed: tuple[str, int]) -> None:
    assert parse_host_port(text, "listen") == parsed
    assert Address.parse(text, "listen") == Address(*parsed)


@pytest.mark.parametrize("text", ["nonsense", "127.0.0.1", "127.0.0.1:65536", "h:-1", "h:9x"])
def test_anything_else_names_the_setting(text: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_host_port(text, "admin_listen")
    assert str(info.value) == f"admin_listen: expected HOST:PORT, got {text!r}"


@pytest.mark.parametrize(
    ("listen", "message"),
    [
        ("127.0.0.1:65536", "prometheus.listen: expected HOST:PORT, got '127.0.0.1:65536'"),
        (9465, "prometheus.listen: expected HOST:PORT, got 9465"),
    ],
)
def test_the_prometheus_exporter_reads_listen_the_same_way(
    tmp_path: Path, listen: object, message: str
) -> None:
    with pytest.raises(ConfigurationError) as info:
        load_exporter("prometheus", {"listen": listen}, tmp_path)
    assert str(info.value) == message
