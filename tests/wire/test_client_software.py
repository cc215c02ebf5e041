"""ApiVersions v3 software name/version: Kafka's pattern, cases worked out by hand."""

from __future__ import annotations

import pytest

from clientmetrics.wire.client_software import software_valid


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("librdkafka", "2.16.1"),
        ("apache-kafka-java", "4.1.0"),
        ("kafka-python", "3.0.12"),
        ("a", "1"),
        ("franz-go", "v1.18.0-rc.1"),
        (None, None),  # ApiVersions v0-v2 carry neither
    ],
)
def test_accepted(name: str | None, version: str | None) -> None:
    assert software_valid(name, version)


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("<b>x</b>", "1.0"),
        ("librdkafka", ""),
        ("", "1.0"),
        ("-librdkafka", "1.0"),
        ("librdkafka-", "1.0"),
        ("librdkafka", "1.0."),
        ("lib rdkafka", "1.0"),
        ("lib_rdkafka", "1.0"),
        ("librdkafka", "1.0\n"),
        ("librdkäfka", "1.0"),
        ("librdkafka", None),
    ],
)
def test_rejected(name: str | None, version: str | None) -> None:
    assert not software_valid(name, version)
