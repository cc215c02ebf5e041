"""Kafka's usage text: jopt-simple's ``BuiltinHelpFormatter`` (80 columns) re-done.

Operators diff usage output and scripts grep it, so the layout follows jopt-simple
exactly: options sorted by name, two columns each at most 39 wide, words wrapped
with a two-space continuation indent, every row padded to the column widths.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["OptionHelp", "format_help"]

_OVERALL_WIDTH = 80
_SEPARATOR_WIDTH = 2
_INDENT = "  "
# A line-break opportunity follows each run of blanks (java.text.BreakIterator, roughly).
_WORDS = re.compile(r"\s+|\S+\s*")


@dataclass(frozen=True)
class OptionHelp:
    """One option as jopt-simple describes it."""

    name: str
    description: str
    argument: str | None = None
    """``<String: name>`` style text shown after the option, ``None`` for flags."""
    default: str | None = None

    def display(self) -> str:
        """The left column: ``--name`` plus its argument indicator."""
        return f"--{self.name}" + (f" {self.argument}" if self.argument else "")

    def full_description(self) -> str:
        """The right column before wrapping."""
        if self.default is None:
            return self.description
        return f"{self.description} (default: {self.default})"


def _fit_line(line: str, width: int) -> list[str]:
    pieces: list[str] = []
    piece = ""
    for word in _WORDS.findall(line):
        if len(piece) + len(word) > width:
            pieces.append(piece.rstrip())
            piece = _INDENT + word
        else:
            piece += word
    if piece:
        pieces.append(piece)
    return pieces


def _fit(text: str, width: int) -> list[str]:
    pieces: list[str] = []
    for line in text.strip().split("\n"):
        pieces.extend(_fit_line(line, width))
    return pieces


def _widths(rows: Sequence[tuple[str, str]]) -> tuple[int, int]:
    # jopt-simple 5.0.4 Rows: the option column takes at most half, the description the rest.
    option = min((_OVERALL_WIDTH - _SEPARATOR_WIDTH) // 2, max(len(left) for left, _ in rows))
    rest = _OVERALL_WIDTH - option - _SEPARATOR_WIDTH
    return option, min(rest, max(len(right) for _, right in rows))


def format_help(options: Sequence[OptionHelp]) -> str:
    """The options table, as ``OptionParser.printHelpOn`` prints it."""
    rows = [("Option", "Description"), ("------", "-----------")]
    rows += [(o.display(), o.full_description()) for o in sorted(options, key=lambda o: o.name)]
    option_width, description_width = _widths(rows)
    fitted: list[tuple[str, str]] = []
    for left, right in rows:
        lefts, rights = _fit(left, option_width), _fit(right, description_width)
        for i in range(max(len(lefts), len(rights))):
            fitted.append(
                (lefts[i] if i < len(lefts) else "", rights[i] if i < len(rights) else "")
            )
    # jopt-simple re-measures after fitting: the columns shrink to their widest piece.
    option_width, description_width = _widths(fitted)
    separator = " " * _SEPARATOR_WIDTH
    return "".join(
        f"{left.ljust(option_width)}{separator}{right.ljust(description_width)}\n"
        for left, right in fitted
    )
