"""Every ``sh`` block of README.md, run in order in a scratch directory.

The scratch directory stands for the reader's clone after ``make run``: it holds
the Makefile (and pyproject.toml, its install rule's input) and ``.venv`` (this
interpreter's virtualenv), nothing else, and the virtualenv is not on ``PATH``:
a block works only if it works as written.

Each block is preceded by ``<!-- readme-test: MODE [key=value ...] -->`` saying
how: ``run`` (must exit 0), ``background ready=TEXT`` (a server: must print TEXT
and keep running until the end), ``make`` (each ``make TARGET`` is checked with
``make -n``: running the demo and the suite here would recurse), ``options``
(a cluster command: every option must be one the command accepts), ``collect``
(a pytest command, collected only), ``config`` (a TOML block the gateway must
accept). The README's fixed ports are replaced by free ones; servers are stopped
with their whole process group (``make upstream`` runs Tansu under make).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from peers.free_ports import free_port_block

from clientmetrics.exporters.landing_options import LandingOptions
from clientmetrics.gateway.config_load import load_config
from tests.procs import free_port

pytestmark = [pytest.mark.integration, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent.resolve()
FENCE = re.compile(
    r"(?:<!-- readme-test: (?P<mode>[\w-]+)(?P<opts>[^>]*?)-->\s*\n)?"
    r"```(?P<lang>\w*)\n(?P<body>.*?)\n```",
    re.S,
)
OPTION = re.compile(r'(\w+)=(?:"([^"]*)"|(\S+))')
#: What each documented make target must run. ``make test`` does a fresh machine's set-up
#: itself (Debian's packages as root, the peers) and prints the slowest tests.
MAKE_RUNS = {
    "run": ("clientmetrics demo",),
    "test": ("apt-get install", "-m peers", "pytest -n", "--durations="),
    "serve": ("clientmetrics serve",),
}


@dataclass(frozen=True)
class Block:
    mode: str | None
    options: dict[str, str]
    lang: str
    body: str


def readme_blocks() -> list[Block]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = []
    for match in FENCE.finditer(text):
        found = OPTION.findall(match["opts"] or "")
        options = {key: quoted or bare for key, quoted, bare in found}
        blocks.append(Block(match["mode"], options, match["lang"], match["body"]))
    return blocks


def commands(body: str) -> list[str]:
    """The block's commands, continuation lines joined, comments dropped."""
    joined = body.replace("\\\n", " ")
    return [line.split(" #")[0].strip() for line in joined.splitlines() if line.strip()]


def test_every_command_block_says_how_it_is_tested() -> None:
    blocks = readme_blocks()
    shell = [b for b in blocks if b.lang == "sh"]
    assert len(shell) >= 6
    assert all(b.mode is not None for b in shell), [b.body for b in shell if b.mode is None]


def test_ci_runs_the_readme_test_command_and_nothing_a_reader_would_not() -> None:
    script = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    lines = [line.strip() for line in script.splitlines()]
    steps = [line for line in lines if line and not line.startswith(("#", "set ", "cd "))]
    assert steps == ["make test", ".ci/clean-install"]


class Scratch:
    """The working directory, environment and servers of one README run."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ports = {
            9092: free_port(),
            9093: free_port(),
            9464: free_port(),
            8050: free_port(),
            19092: free_port(),
            19100: free_port_block(120),
        }
        (root / ".venv").symlink_to(sys.prefix, target_is_directory=True)
        for name in ("Makefile", "pyproject.toml"):
            (root / name).symlink_to(REPO / name)
        path = [d for d in os.environ["PATH"].split(os.pathsep) if Path(d).resolve() != BIN]
        self.env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
        self.env["PATH"] = os.pathsep.join(path)
        self.servers: list[subprocess.Popen[bytes]] = []

    def substitute(self, text: str) -> str:
        return re.sub(
            r"\b(9092|9093|9464|8050|19092|19100)\b", lambda m: str(self.ports[int(m[1])]), text
        )

    def run(self, body: str, timeout: float, cwd: Path | None = None) -> str:
        started = time.monotonic()
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", self.substitute(body)],
            cwd=cwd or self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, f"{body}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        print(f"{time.monotonic() - started:6.1f}s  {body.splitlines()[0]}")
        return done.stdout + done.stderr

    def background(self, body: str, ready: str, timeout: float = 60) -> None:
        log = self.root / f"server-{len(self.servers)}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                ["bash", "-c", "exec " + self.substitute(body).strip()],
                cwd=self.root,
                env=self.env,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        self.servers.append(proc)
        deadline = time.monotonic() + timeout
        while ready not in log.read_text(errors="replace"):
            assert proc.poll() is None, f"{body} exited:\n{log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"{body} never printed {ready!r}"
            time.sleep(0.2)

    def close(self) -> None:
        for proc in reversed(self.servers):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)  # its own session: the group is its own
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Scratch]:
    here = Scratch(tmp_path)
    yield here
    here.close()


def check_make(body: str) -> None:
    for command in commands(body):
        target = command.split()[1]
        done = subprocess.run(
            ["make", "-n", target], cwd=REPO, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        for step in MAKE_RUNS[target]:
            assert step in done.stdout, (step, done.stdout)


def check_options(scratch: Scratch, body: str) -> None:
    for command in commands(body):
        words = shlex.split(command)
        first = next(i for i, w in enumerate(words) if w.startswith("--"))
        helped = scratch.run(shlex.join([*words[:first], "--help"]), 30)
        for word in words[first:]:
            if word.startswith("--"):
                assert f"{word} " in helped or f"{word}\n" in helped, (word, helped)


def check_config(scratch: Scratch, body: str) -> None:
    path = scratch.root / "gateway.toml"
    path.write_text(body)
    config = load_config(path, data_dir=scratch.root / "cfg", environ={})
    assert str(config.listen) == "127.0.0.1:9092"
    (landing,) = config.exporters
    assert LandingOptions.from_mapping(landing.options).roll_seconds == 5.0


#: What the scratch directory holds that a reader's clone would not: the clone's own
#: files, and this test's logs and configuration.
NOT_THE_READERS = re.compile(r"\.venv|Makefile|pyproject\.toml|server-\d+\.log|gateway\.toml")


def not_ignored(root: Path) -> list[str]:
    """What the README's blocks created under ``root`` that the clone's .gitignore misses."""
    made = [
        p.name + ("/" if p.is_dir() else "")
        for p in root.iterdir()
        if not NOT_THE_READERS.fullmatch(p.name)
    ]
    return [
        name
        for name in made
        if subprocess.run(
            ["git", "check-ignore", "-q", "--no-index", name], cwd=REPO, check=False
        ).returncode
        != 0
    ]


def test_gitignore_covers_what_the_readme_creates(tmp_path: Path) -> None:
    for made in ("cm-data/", "cm-proxy/", "spark-warehouse/"):
        (tmp_path / made).mkdir()
    (tmp_path / "rules.toml").write_text("")
    (tmp_path / "derby.log").write_text("")
    (tmp_path / "server-0.log").write_text("")
    assert not_ignored(tmp_path) == []
    (tmp_path / "notes.txt").write_text("")
    assert not_ignored(tmp_path) == ["notes.txt"]


@pytest.mark.timeout(900)  # every README block in turn: ~70 s quiet, over 300 s on a busy run
def test_readme_blocks_run_in_order(scratch: Scratch) -> None:
    for block in readme_blocks():
        if block.lang == "toml" and block.mode == "config":
            check_config(scratch, block.body)
        if block.lang != "sh":
            continue
        if block.mode == "make":
            check_make(block.body)
        elif block.mode == "run":
            scratch.run(block.body, float(block.options.get("timeout", 60)))
        elif block.mode == "background":
            scratch.background(block.body, block.options["ready"])
        elif block.mode == "options":
            check_options(scratch, block.body)
        elif block.mode == "collect":
            cwd = REPO if block.options.get("cwd") == "repo" else None
            out = scratch.run(block.body + " --collect-only -q", 120, cwd)
            assert re.search(r"tests/\w+/test_\w+\.py", out), out
        else:
            pytest.fail(f"unknown readme-test mode {block.mode!r}")
    # Whatever the blocks left in the clone, git ignores.
    assert not_ignored(scratch.root) == []
    # What the blocks claim happened did: tables with the simulated clients and an alert.
    tables = scratch.root / "cm-data" / "tables"
    clients = sum(pq.ParquetFile(p).metadata.num_rows for p in tables.glob("clients/*/*.parquet"))
    assert clients == 20
    assert list(tables.glob("alerts/*/*.parquet"))
