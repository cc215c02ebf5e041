"""The known-defect software table: each row sourced, versions matched as releases."""

from __future__ import annotations

from typing import Any

import pytest

from clientmetrics.errors import ConfigurationError
from clientmetrics.pipeline.core.defects import (
    defects_for,
    inventory_defects,
    known_defects,
    parse_defects,
    version_key,
)
from clientmetrics.pipeline.core.schemas import INVENTORY_ARROW
from tests.pipeline.core.tables import by_column, table


def test_every_shipped_row_has_a_reason_and_a_source() -> None:
    rows = known_defects()
    assert len({row.id for row in rows}) == len(rows) >= 5
    assert all(row.source.startswith("https://") and row.reason for row in rows)


@pytest.mark.parametrize(
    ("software", "version", "expected"),
    [
        # 3.7.0 is the first Java client with KIP-714; KAFKA-19747 and -19506 were fixed in 4.2.
        (
            "apache-kafka-java",
            "3.7.0",
            {"KAFKA-19747", "KAFKA-19506", "KAFKA-17731", "KAFKA-21077"},
        ),
        ("apache-kafka-java", "4.1.2", {"KAFKA-19747", "KAFKA-19506", "KAFKA-21077"}),
        ("apache-kafka-java", "4.2", {"KAFKA-21077"}),
        ("apache-kafka-java", "3.6.1", set()),
        ("librdkafka", "2.5.0", {"librdkafka-4833"}),
        ("librdkafka", "2.5.3", set()),
        ("librdkafka", "2.16.0", set()),  # 16 > 5: numbers, not text
        ("librdkafka", "unknown", set()),
        (None, None, set()),
    ],
)
def test_versions_compare_as_releases(
    software: str | None, version: str | None, expected: set[str]
) -> None:
    assert {defect.id for defect in defects_for(software, version)} == expected


def test_version_key_reads_the_release() -> None:
    assert version_key("2.16.0-RC1") == (2, 16)
    assert version_key("v4.2.0") == version_key("4.2") == (4, 2)
    assert version_key("") is None


def test_the_inventory_gets_one_row_per_instance_and_defect() -> None:
    inventory = table(
        INVENTORY_ARROW,
        [
            {
                "client_instance_id": "a",
                "client_software_name": "librdkafka",
                "client_software_version": "2.5.0",
            },
            {
                "client_instance_id": "b",
                "client_software_name": "librdkafka",
                "client_software_version": "2.16.0",
            },
            {
                "client_instance_id": "c",
                "client_software_name": "apache-kafka-java",
                "client_software_version": "4.3.0",
            },
        ],
    )
    rows = inventory_defects(inventory)
    assert by_column(rows, "client_instance_id", "defect") == [
        ("a", "librdkafka-4833"),
        ("c", "KAFKA-21077"),
    ]


@pytest.mark.parametrize(
    "row",
    [
        {"id": "x", "software": "s", "min": "1.0", "reason": "r", "source": "not a url"},
        {
            "id": "x",
            "software": "s",
            "min": "2.0",
            "below": "1.0",
            "reason": "r",
            "source": "https://e",
        },
        {"id": "x", "software": "s", "min": "1.0", "reason": "r"},
        {
            "id": "x",
            "software": "s",
            "min": "1.0",
            "reason": "r",
            "source": "https://e",
            "extra": 1,
        },
    ],
)
def test_a_bad_row_is_refused(row: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        parse_defects({"defect": [row]})
