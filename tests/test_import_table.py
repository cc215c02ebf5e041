"""The package table in docs/architecture.md is the law: every import follows it.

The table is read from the page itself (one table; DESIGN.md's is a direction,
not a second copy): a package may import only what its "may import" column names,
the shared top-level helpers, and itself. Imports are read from the source (ast),
relative ones and those inside functions included.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "clientmetrics"
DOC = ROOT / "docs" / "architecture.md"
#: Top-level modules every package may use (they import no package themselves).
HELPERS = {"errors", "logs", "addresses", "cli_options", "extras", "lifeline", "http_endpoint"}


def table() -> dict[str, set[str] | None]:
    """package -> the packages it may import (None: any)."""
    text = DOC.read_text(encoding="utf-8").split("## Packages", 1)[1].split("\n## ", 1)[0]
    rules: dict[str, set[str] | None] = {}
    for row in text.splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        name = re.findall(r"`([^`]+)`", cells[0])[0].rstrip("/")
        allowed = {n.rstrip("/") for n in re.findall(r"`([^`]+)`", cells[2])}
        rules[name] = None if "all of the above" in cells[2] else allowed
    return rules


def package_of(module: str) -> str:
    """``clientmetrics.pipeline.core.rules`` -> ``pipeline/core``; a top-level module -> its
    name with ``.py``."""
    parts = module.split(".")[1:]
    if parts[:2] == ["pipeline", "core"]:
        return "pipeline/core"
    if (SRC / parts[0]).is_dir():
        return parts[0]
    return parts[0] + ".py"


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every clientmetrics import in ``path``."""
    module = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
                found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, base))
    return [(line, name) for line, name in found if name.split(".")[0] == "clientmetrics"]


def violations() -> list[str]:
    rules = table()
    out = []
    for path in sorted(SRC.rglob("*.py")):
        source = package_of(".".join(path.relative_to(SRC.parent).with_suffix("").parts))
        if source.endswith(".py"):
            allowed: set[str] | None = set()  # top-level modules: helpers only
        else:
            allowed = rules[source]
        if allowed is None:
            continue
        for line, name in imports(path):
            if name == "clientmetrics":
                continue
            target = package_of(name)
            if target == source or target.removesuffix(".py") in HELPERS:
                continue
            if target.endswith(".py") or target not in allowed:
                out.append(f"{path.relative_to(SRC)}:{line} ({source}) imports {name}")
    return out


def test_the_table_names_every_package() -> None:
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").exists()}
    assert packages | {"pipeline/core"} == set(table())


def test_every_import_follows_the_table() -> None:
    assert violations() == []


@pytest.mark.parametrize(
    ("source", "target"), [("wire", "security"), ("reporter", "admin"), ("admin", "telemetry")]
)
def test_the_check_catches_an_edge_the_table_forbids(source: str, target: str) -> None:
    assert target not in (table()[source] or set())
