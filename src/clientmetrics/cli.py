"""The ``clientmetrics`` command.

Each subcommand lives in the package that owns it; this module only assembles
them, importing each lazily so that ``clientmetrics serve`` never imports pyspark.
"""

from __future__ import annotations

import importlib
import sys

import click

from clientmetrics import __version__

#: subcommand name -> "module:attribute" of a click command or group.
SUBCOMMANDS: dict[str, str] = {
    "serve": "clientmetrics.gateway.cli:serve",
    "pipeline": "clientmetrics.pipeline.cli:pipeline",
    "simulate": "clientmetrics.reporter.cli:simulate",
    "demo": "clientmetrics.demo:demo",
    "dashboard": "clientmetrics.dashboard.cli:dashboard",
    "users": "clientmetrics.gateway.users_cli:users",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported only when they are used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in SUBCOMMANDS if self._resolve(name) is not None)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._resolve(cmd_name)

    @staticmethod
    def _resolve(name: str) -> click.Command | None:
        target = SUBCOMMANDS.get(name)
        if target is None:
            return None
        module_name, _, attribute = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and module_name.startswith(exc.name):
                return None  # not built yet
            raise
        command = getattr(module, attribute)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup)
@click.version_option(__version__, prog_name="clientmetrics")
def cli() -> None:
    """Kafka client telemetry: gateway, pipeline, simulator and dashboard."""


def main() -> None:
    """Console-script entry point."""
    sys.exit(cli.main(standalone_mode=True))
