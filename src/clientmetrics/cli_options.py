"""What every command's options share: how a default that is not a click default is shown."""

from __future__ import annotations

from typing import Any

import click


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


__all__ = ["DescribedDefault"]
