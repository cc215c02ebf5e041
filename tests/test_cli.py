"""The ``clientmetrics`` command: listing without importing, one line for a missing extra.

Optional packages are hidden by a finder placed first on ``sys.meta_path`` that
raises ``ModuleNotFoundError`` for them, exactly as if they were not installed.
The same checks run against a real wheel in fresh virtualenvs in ``.ci/clean-install``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clientmetrics.cli import SUBCOMMANDS

#: Without the spark extra (and without kafka-python, which the reporter's users bring).
_HIDE = ("pyspark", "kafka")
_HIDING = """
import importlib.abc, sys
class _Hidden(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {hide!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _Hidden())
"""
_RUN = (
    _HIDING
    + """
import json
sys.argv = ["clientmetrics", *{args!r}]
from clientmetrics.cli import main
try:
    main()
finally:
    optional = sorted(m for m in sys.modules if m.split(".")[0] == "pyspark"
                      and sys.modules[m] is not None)
    commands = sorted(m for m in sys.modules if m.endswith(".cli") and m != "clientmetrics.cli")
    print(json.dumps({{"optional": optional, "commands": commands}}), file=sys.stderr)
"""
)


def run(*args: str, cwd: Path | None = None) -> tuple[int, str, list[str], dict[str, list[str]]]:
    done = subprocess.run(
        [sys.executable, "-c", _RUN.format(hide=_HIDE, args=args)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        check=False,
    )
    *lines, imported = done.stderr.splitlines()
    return done.returncode, done.stdout, lines, json.loads(imported)


def test_help_lists_every_command_importing_none() -> None:
    code, out, err, imported = run("--help")
    assert (code, err) == (0, [])
    listed = [line.split()[0] for line in out.split("Commands:\n")[1].splitlines()]
    assert listed == list(SUBCOMMANDS)
    assert imported == {"optional": [], "commands": []}


@pytest.mark.parametrize("command", ["serve", "simulate", "dashboard", "pipeline"])
def test_core_commands_help_without_extras(command: str) -> None:
    code, out, err, imported = run(command, "--help")
    assert (code, err) == (0, [])
    assert f"Usage: clientmetrics {command}" in out
    assert imported["optional"] == []


@pytest.mark.parametrize(
    "args", [("pipeline", "run"), ("pipeline", "stream"), ("demo", "--duration", "30")]
)
def test_missing_spark_extra_is_one_line(args: tuple[str, ...], tmp_path: Path) -> None:
    code, out, err, _ = run(*args, cwd=tmp_path)
    assert (code, out) == (2, "")
    assert err == [f"clientmetrics {args[0]}: needs pyspark: pip install 'clientmetrics[spark]'"]


def test_dashboard_serves_without_the_spark_extra() -> None:
    script = _HIDING.format(hide=("pyspark",)) + (
        "import clientmetrics.dashboard, clientmetrics.dashboard.cli\n"
        "import clientmetrics.admin, clientmetrics.reporter, clientmetrics.gateway.server\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stderr) == (0, "")


def test_every_option_has_help_and_defaults_are_shown_one_way() -> None:
    import click
    from click._utils import UNSET

    from clientmetrics.cli import cli

    ctx = click.Context(cli)

    def commands(group: click.Group) -> list[tuple[str, click.Command]]:
        found = []
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None
            if isinstance(command, click.Group):
                found += [(f"{name} {sub}", c) for sub, c in commands(command)]
            else:
                found.append((name, command))
        return found

    for name, command in commands(cli):
        for param in command.params:
            if not isinstance(param, click.Option) or param.hidden:
                continue
            where = f"{name} {param.opts[0]}"
            assert param.help, f"{where} has no help text"
            # Hand-written defaults ("... [60]") were the other way of writing them.
            assert not re.search(r"\[[^]]*\]\.?$", param.help), f"{where}: use show_default"
            default = param.get_default(ctx, call=False)
            if default not in (None, UNSET) and not param.is_flag and not param.multiple:
                assert param.show_default, f"{where} hides its default"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("dashboard", "--listen", "127.0.0.1:70000"),
            "Error: --listen must be HOST:PORT, got '127.0.0.1:70000'",
        ),
        (
            ("simulate", "--bootstrap-server", "127.0.0.1:70000", "--clients", "1"),
            "Error: Invalid value: expected HOST:PORT",
        ),
        (
            ("simulate", "--bootstrap-server", "127.0.0.1:0", "--clients", "1"),
            "Error: Invalid value: expected HOST:PORT",
        ),
    ],
)
def test_a_port_out_of_range_is_one_line(args: tuple[str, ...], message: str) -> None:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "clientmetrics"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines()[-1] == message
