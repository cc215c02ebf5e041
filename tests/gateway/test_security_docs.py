"""docs/security.md, users and authorization: its console blocks run, its TOML loads."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

from clientmetrics.gateway.config_load import load_config
from tests.procs import BIN

DOC = Path(__file__).parents[2] / "docs" / "security.md"
DATA = "/var/lib/clientmetrics"


def blocks(language: str) -> list[str]:
    """The page's blocks in ``language``, except the complete examples'
    (``security-example``, run by test_security_example.py)."""
    found = re.findall(
        rf"(<!-- security-example:[^>]*-->\s*\n)?^```{language}\n(.*?)^```",
        DOC.read_text(),
        flags=re.S | re.M,
    )
    return [body for tag, body in found if not tag]


def test_console_blocks(tmp_path: Path) -> None:
    for block in blocks("console"):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            assert lines[i].startswith("$ "), lines[i]
            text = lines[i][2:]
            i += 1
            while text.endswith("\\"):
                text = text[:-1] + " " + lines[i].strip()
                i += 1
            expected = []
            while i < len(lines) and not lines[i].startswith("$ "):
                expected.append(lines[i])
                i += 1
            argv = shlex.split(text.replace(DATA, str(tmp_path)))
            assert argv[0] == "clientmetrics"
            result = subprocess.run(
                [str(BIN / "clientmetrics"), *argv[1:]],
                capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            assert (result.stdout + result.stderr).splitlines() == expected, text


TAGGED = re.compile(r"<!-- security-doc: (?P<tag>[^>]*?) -->\s*\n```\w*\n(?P<body>.*?)\n```", re.S)


def test_toml_blocks_load(tmp_path: Path) -> None:
    tagged = {m["tag"].strip(): m["body"] for m in TAGGED.finditer(DOC.read_text())}
    found = [tagged[tag] for tag in ("sasl.toml", "authorization.toml", "cap.toml")]
    for text in found:
        path = tmp_path / "gateway.toml"
        path.write_text(text)
        load_config(path, data_dir=tmp_path)
