"""What every command shares: how defaults are shown, --log-level, --data-dir, one-line errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar

import click

from clientmetrics.logs import LOG_FORMATS

F = TypeVar("F", bound=Callable[..., Any])

#: The data directory the commands that read a gateway's data look in unless told.
DEFAULT_DATA_DIR = Path("./cm-data")


class DescribedDefault(click.Option):
    """An option whose default is worked out later (from the configuration file, the
    data directory, the Spark launcher): no click default, ``show_default`` says what
    it is, and help shows it as ``[default: VALUE]`` like any other default (click
    would put it in parentheses)."""

    def get_help_extra(self, ctx: click.Context) -> Any:
        extra = super().get_help_extra(ctx)
        if "default" in extra:
            extra["default"] = extra["default"].removeprefix("(").removesuffix(")")
        return extra


class CommandError(click.ClickException):
    """A command's failure as one line on stderr, as given (no ``Error:`` prefix)."""

    exit_code = 1

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(self.message, err=True)


class BadConfiguration(CommandError):
    """A bad configuration, wherever it is found (the file, the environment, an option,
    or at start): one line, exit 2, as for a usage error."""

    exit_code = 2


def log_options(level: str = "info") -> Callable[[F], F]:
    """``--log-level`` and ``--log-format``, as every command that logs takes them."""
    level_option = click.option(
        "--log-level",
        default=level,
        show_default=True,
        type=click.Choice(["debug", "info", "warning", "error"]),
        help="Least severe log events shown.",
    )
    format_option = click.option(
        "--log-format",
        default="auto",
        show_default=True,
        type=click.Choice(LOG_FORMATS),
        help="Log lines on stderr: console (for people), json (one object a line), "
        "auto (console at a terminal, else json).",
    )

    def decorate(function: F) -> F:
        return level_option(format_option(function))

    return decorate


def data_dir_option(
    help: str, *, default: Path | None = None, required: bool = False
) -> Callable[[F], F]:
    """``--data-dir``, the gateway's data directory, as the commands that read or manage
    it take it: an existing file is refused; ``default`` is shown when there is one."""
    shown: dict[str, Any] = {} if default is None else {"default": default, "show_default": True}
    return click.option(
        "--data-dir",
        type=click.Path(file_okay=False, path_type=Path),
        required=required,
        help=help,
        **shown,
    )


__all__ = [
    "DEFAULT_DATA_DIR",
    "BadConfiguration",
    "CommandError",
    "DescribedDefault",
    "data_dir_option",
    "log_options",
]
