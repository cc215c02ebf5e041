"""The ``clientmetrics`` command.

Each subcommand lives in the package that owns it; this module only lists them.
A subcommand's module is imported only when that subcommand runs, so
``clientmetrics --help`` and ``clientmetrics serve`` never import pyspark, and a
command whose optional extra is missing says in one line which one to install.
"""

from __future__ import annotations

import importlib
import sys

import click

from clientmetrics import __version__
from clientmetrics.cli_options import CommandError
from clientmetrics.extras import MissingExtraError, missing_extra

#: name -> ("module:attribute" of a click command or group, one-line help for the listing).
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("clientmetrics.gateway.cli:serve", "Run the gateway (standalone or proxy)."),
    "simulate": ("clientmetrics.reporter.cli:simulate", "Drive a gateway with simulated clients."),
    "dashboard": ("clientmetrics.dashboard.cli:dashboard", "Serve the read-only web dashboard."),
    "pipeline": ("clientmetrics.pipeline.cli:pipeline", "Turn pushes into tables (spark extra)."),
    "demo": ("clientmetrics.demo.cli:demo", "Run everything on one machine (spark extra)."),
    "investigate": (
        "clientmetrics.investigate.cli:investigate",
        "Find clients, watch them live, stop: troubleshoot a client.",
    ),
    "fleet": ("clientmetrics.dashboard.fleet_cli:fleet", "Export every client and its usage."),
    "users": ("clientmetrics.gateway.users_cli:users", "Manage the SCRAM users SASL checks."),
}

#: Exit status of a command whose optional extra is not installed (as for a usage error).
MISSING_EXTRA_EXIT = 2


class LazyGroup(click.Group):
    """A group whose subcommands are imported only when one is run or asked for help."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = SUBCOMMANDS.get(cmd_name)
        if entry is None:
            return None
        module_name, _, attribute = entry[0].partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            _raise_if_extra(cmd_name, exc)
            raise
        command = getattr(module, attribute)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # From the table: listing the commands must not import them.
        with formatter.section("Commands"):
            formatter.write_dl([(name, text) for name, (_, text) in SUBCOMMANDS.items()])

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except ModuleNotFoundError as exc:
            _raise_if_extra(ctx.invoked_subcommand or "", exc)
            raise
        except MissingExtraError as exc:
            raise _MissingExtra(f"clientmetrics {ctx.invoked_subcommand}: {exc}") from exc


class _MissingExtra(CommandError):
    exit_code = MISSING_EXTRA_EXIT


def _raise_if_extra(command: str, exc: ModuleNotFoundError) -> None:
    extra = missing_extra(exc)
    if extra is not None:
        raise _MissingExtra(f"clientmetrics {command}: {extra}") from exc


@click.group(cls=LazyGroup)
@click.version_option(__version__, prog_name="clientmetrics")
def cli() -> None:
    """Kafka client telemetry: gateway, pipeline, simulator and dashboard."""


def main() -> None:
    """Console-script entry point."""
    sys.exit(cli.main(standalone_mode=True))
