"""The protocol core does no I/O: wire/, telemetry/ and security/ never touch sockets or clocks."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "clientmetrics"
FORBIDDEN_MODULES = {"asyncio", "socket", "selectors", "ssl", "threading", "time", "datetime"}
FORBIDDEN_CALLS = {"open", "print", "input"}
PURE_PACKAGES = ("wire", "telemetry", "security")
PURE_FILES = sorted(
    path for package in PURE_PACKAGES for path in SRC.joinpath(package).rglob("*.py")
)


@pytest.mark.parametrize("path", PURE_FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_pure_package_has_no_io(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.module == "datetime" and [a.name for a in node.names] == ["timedelta"]:
                continue  # a duration (kio's type for Kafka's *Ms fields), not a clock
            names = [(node.module or "").split(".")[0]]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in FORBIDDEN_CALLS, f"{path}:{node.lineno} calls {node.func.id}"
            continue
        else:
            continue
        for name in names:
            assert name not in FORBIDDEN_MODULES, f"{path}:{node.lineno} imports {name}"


def test_the_check_sees_files() -> None:
    assert len(PURE_FILES) >= 2
