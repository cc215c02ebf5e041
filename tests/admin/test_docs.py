"""docs/admin.md cannot rot: its console blocks run against a real gateway, in order.

In a ```console block, a line starting with ``$ `` is a command (``\\`` continues it)
and the lines up to the next command are what it prints (stdout then stderr; trailing
blanks of each line are ignored, as editors strip them). ``localhost:9092`` stands for
the gateway. A name made by ``--generate-name`` is bound the first time the doc shows
it and must then be the same everywhere. ```python blocks run too, in one namespace.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.admin.tool import command, run_tool
from tests.procs import GatewayProcess

pytestmark = pytest.mark.integration

DOC = Path(__file__).parents[2] / "docs" / "admin.md"
DOC_BOOTSTRAP = "localhost:9092"
# Kafka's Uuid.toString(): 22 base64url characters; a doc example has digits and capitals.
GENERATED = re.compile(r"(?<![\w-])(?=[\w-]*\d)(?=[\w-]*[A-Z])[A-Za-z0-9_-]{22}(?![\w-])")
# A name the tool generates is random: it may lack a digit or a capital.
ANY_UUID = re.compile(r"(?<![\w-])[A-Za-z0-9_-]{22}(?![\w-])")


@dataclass
class Step:
    argv: list[str]
    expected: list[str]


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def steps(block: str) -> list[Step]:
    out: list[Step] = []
    lines = block.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.startswith("$ "):
            raise AssertionError(f"output without a command in docs/admin.md: {line!r}")
        text = line[2:]
        while text.endswith("\\"):
            text = text[:-1] + " " + lines[i].strip()
            i += 1
        expected = []
        while i < len(lines) and not lines[i].startswith("$ "):
            expected.append(lines[i].rstrip())
            i += 1
        out.append(Step(shlex.split(text), expected))
    return out


def bind(expected: str, actual: str, names: dict[str, str]) -> str:
    """Replace generated names in ``expected`` by the actual ones (binding new ones)."""
    fresh = [name for name in ANY_UUID.findall(actual) if name not in names.values()]
    for doc_name in GENERATED.findall(expected):
        if doc_name not in names and fresh:
            names[doc_name] = fresh.pop(0)
        expected = expected.replace(doc_name, names.get(doc_name, doc_name))
    return expected


def test_every_console_block_prints_what_the_doc_says(fresh_gateway: GatewayProcess) -> None:
    text = DOC.read_text()
    names: dict[str, str] = {}
    all_steps = [step for block in blocks(text, "console") for step in steps(block)]
    assert len(all_steps) >= 10
    for step in all_steps:
        assert step.argv[0] == "kafka-client-metrics", step.argv
        argv = [arg.replace(DOC_BOOTSTRAP, fresh_gateway.bootstrap) for arg in step.argv[1:]]
        argv = [names.get(arg, arg) for arg in argv]
        result = run_tool(*argv)
        actual = "\n".join(line.rstrip() for line in (result.out + result.err).splitlines())
        expected = bind("\n".join(step.expected).rstrip("\n"), actual, names)
        actual = actual.replace(fresh_gateway.bootstrap, DOC_BOOTSTRAP).rstrip("\n")
        assert actual == expected, f"$ {shlex.join(step.argv)}\n(ran {command()})"


def test_python_blocks_run(fresh_gateway: GatewayProcess) -> None:
    namespace: dict[str, object] = {}
    for block in blocks(DOC.read_text(), "python"):
        exec(
            compile(block.replace(DOC_BOOTSTRAP, fresh_gateway.bootstrap), str(DOC), "exec"),
            namespace,
        )
