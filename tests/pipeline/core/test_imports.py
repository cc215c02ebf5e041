"""The core is pure Arrow: nothing in it imports pyspark, directly or through what it imports."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from clientmetrics.pipeline import core

CORE = Path(core.__file__).parent


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_core_module_imports_pyspark_or_the_spark_shell() -> None:
    modules = sorted(CORE.glob("*.py"))
    assert len(modules) >= 9
    for module in modules:
        for name in _imported(module):
            assert not name.startswith("pyspark"), (module.name, name)
            assert not name.startswith(
                ("clientmetrics.pipeline.spark", "clientmetrics.pipeline.jobs")
            ), (
                module.name,
                name,
            )


def test_importing_every_core_module_loads_no_pyspark() -> None:
    names = [f"clientmetrics.pipeline.core.{p.stem}" for p in sorted(CORE.glob("*.py"))]
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}: importlib.import_module(name)\n"
        "import clientmetrics.dashboard.series, clientmetrics.dashboard.inventory\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyspark'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
