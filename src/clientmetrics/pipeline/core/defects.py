"""Client software with known telemetry or correctness defects, from a table in the repository.

``data/known_defects.toml`` holds one row per defect: the software name a
client sends in ApiVersions, the affected version range, the reason and a
source. ``inventory_defects`` joins it onto the client inventory (its
``client_software_name`` and ``_version``), for the inventory's readers (the
dashboard, a report) to show which clients run affected software.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import pyarrow as pa

from clientmetrics.errors import ConfigurationError

__all__ = ["DEFECTS_ARROW", "Defect", "defects_for", "inventory_defects", "known_defects"]

_VERSION = re.compile(r"^\s*v?(\d+(?:\.\d+)*)")
_KEYS = {"id", "software", "min", "below", "reason", "source"}

#: One row per (client instance, defect of its software version).
DEFECTS_ARROW = pa.schema(
    [
        ("client_instance_id", pa.string()),
        ("client_software_name", pa.string()),
        ("client_software_version", pa.string()),
        ("defect", pa.string()),
        ("reason", pa.string()),
        ("source", pa.string()),
    ]
)


def version_key(text: str | None) -> tuple[int, ...] | None:
    """The numeric release of a version string (``"2.16.0-RC1"`` → (2, 16, 0)); None if none."""
    match = _VERSION.match(text or "")
    if match is None:
        return None
    parts = [int(part) for part in match[1].split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()  # 4.2 == 4.2.0
    return tuple(parts)


@dataclass(frozen=True, slots=True)
class Defect:
    """One row of the table: ``software`` versions in [``min``, ``below``) are affected."""

    id: str
    software: str
    min: tuple[int, ...]
    below: tuple[int, ...] | None
    reason: str
    source: str

    def affects(self, software: str | None, version: str | None) -> bool:
        key = version_key(version)
        if software != self.software or key is None:
            return False
        return self.min <= key and (self.below is None or key < self.below)


def parse_defects(document: dict[str, Any]) -> tuple[Defect, ...]:
    """Validate a defects document: every row needs a reason and an http(s) source."""
    rows = document.get("defect")
    if set(document) != {"defect"} or not isinstance(rows, list):
        raise ConfigurationError("a defects table has one top-level array, [[defect]]")
    found = []
    for index, row in enumerate(rows):
        if (
            not isinstance(row, dict)
            or not {"id", "software", "min", "reason", "source"} <= set(row)
            or set(row) - _KEYS
        ):
            raise ConfigurationError(f"defect #{index} needs id, software, min, reason, source")
        low, high = version_key(str(row["min"])), version_key(str(row.get("below", "")))
        if low is None or ("below" in row and (high is None or high <= low)):
            raise ConfigurationError(f"defect {row['id']!r}: bad version range")
        if not str(row["source"]).startswith(("https://", "http://")) or not row["reason"]:
            raise ConfigurationError(f"defect {row['id']!r} needs a reason and a source URL")
        found.append(
            Defect(
                str(row["id"]),
                str(row["software"]),
                low,
                high,
                str(row["reason"]),
                str(row["source"]),
            )
        )
    return tuple(found)


@cache
def known_defects() -> tuple[Defect, ...]:
    """The table that ships with the product."""
    text = resources.files(__package__).joinpath("data/known_defects.toml").read_text("utf-8")
    return parse_defects(tomllib.loads(text))


def defects_for(software: str | None, version: str | None) -> tuple[Defect, ...]:
    """The shipped table's defects that affect this software version."""
    return tuple(defect for defect in known_defects() if defect.affects(software, version))


def inventory_defects(inventory: pa.Table) -> pa.Table:
    """Per client instance of an inventory (or clients) table, its software's known defects."""
    rows = []
    columns = ["client_instance_id", "client_software_name", "client_software_version"]
    # One lookup per distinct software version, not per instance.
    seen: dict[tuple[str | None, str | None], tuple[Defect, ...]] = {}
    for row in inventory.select(columns).to_pylist():
        key = (row["client_software_name"], row["client_software_version"])
        if key not in seen:
            seen[key] = defects_for(*key)
        for defect in seen[key]:
            rows.append(
                {**row, "defect": defect.id, "reason": defect.reason, "source": defect.source}
            )
    return pa.Table.from_pylist(rows, schema=DEFECTS_ARROW)
