"""Kafka's ``ssl.principal.mapping.rules``: a certificate's subject to a principal name.

The syntax is Kafka's: comma-separated rules, tried in order, the first that
applies wins; ``DEFAULT`` keeps the subject as it is, and
``RULE:pattern/replacement/`` (optionally followed by ``L`` or ``U`` to lower- or
upper-case the result) applies when the pattern matches the *whole* subject,
which is then rewritten as Java's ``replaceAll`` would (``$1`` for a group, a
backslash quotes the next character; a reference to a group the pattern does not
have stays literal text, as in Kafka). A ``/`` inside a pattern or replacement is
written ``\\/``. When no rule applies, the connection is refused, as Kafka does.

Patterns are RE2 (linear time: a hostile certificate cannot make matching slow),
so Java-only constructs such as look-arounds and back-references are refused
when the rules are loaded. Sans-IO.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import re2

from clientmetrics.errors import ClientMetricsError, ConfigurationError
from clientmetrics.security.base import ANONYMOUS

__all__ = ["ANONYMOUS", "NoMatchingRule", "PrincipalMapper", "parse_rules"]

USER = "User:"


class NoMatchingRule(ClientMetricsError):
    """No mapping rule applies to a certificate's subject (the connection is refused)."""


@dataclass(frozen=True, slots=True)
class _Rule:
    text: str
    pattern: Any = None  # compiled RE2, None for DEFAULT
    replacement: str = ""
    case: str = ""  # "", "L" or "U"

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        result: str = self.pattern.sub(self.replacement, name)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


def _until_slash(text: str, pos: int) -> tuple[str, int] | None:
    """The text up to the next unescaped ``/`` and the position after it."""
    out: list[str] = []
    while pos < len(text):
        char = text[pos]
        if char == "\\" and pos + 1 < len(text):
            out.append(text[pos : pos + 2])
            pos += 2
            continue
        if char == "/":
            return "".join(out), pos + 1
        out.append(char)
        pos += 1
    return None


def _replacement(java: str, groups: int, rule: str) -> str:
    """Java's replacement syntax as RE2's: ``$n`` to ``\\n``, ``\\x`` to a literal x."""
    out: list[str] = []
    pos = 0
    while pos < len(java):
        char = java[pos]
        if char == "\\":
            if pos + 1 == len(java):
                raise ConfigurationError(f"principal mapping rule {rule!r}: trailing backslash")
            literal = java[pos + 1]
            out.append("\\\\" if literal == "\\" else literal)
            pos += 2
        elif char == "$":
            digits = pos + 1
            while digits < len(java) and java[digits].isdigit():
                digits += 1
            if digits == pos + 1:
                raise ConfigurationError(
                    f"principal mapping rule {rule!r}: '$' must be followed by a group number"
                )
            number = java[pos + 1 : digits]
            # Java reads as many digits as still name a group; Kafka leaves a reference
            # to a group that does not exist as literal text.
            index = int(number)
            while index > groups and index >= 10:
                index //= 10
            if index > groups:
                out.append("$" + number)
                pos = digits
                continue
            used = len(str(index))
            out.append(f"\\g<{index}>")
            out.append(number[used:])
            pos = digits
        else:
            out.append(char)
            pos += 1
    return "".join(out)


def _compile(rule: str, pattern: str, replacement: str, case: str) -> _Rule:
    try:
        compiled = re2.compile(pattern)
    except re2.error as exc:
        raise ConfigurationError(f"principal mapping rule {rule!r}: bad pattern: {exc}") from exc
    groups = int(compiled.groups)
    return _Rule(rule, compiled, _replacement(replacement, groups, rule), case)


def _one_rule(text: str, pos: int) -> tuple[_Rule | None, int]:
    """The rule starting at ``pos`` (None for an empty one) and where it ends."""
    if text.startswith("DEFAULT", pos):
        return _Rule("DEFAULT"), pos + len("DEFAULT")
    if text.startswith("RULE:", pos):
        pattern = _until_slash(text, pos + len("RULE:"))
        replacement = _until_slash(text, pattern[1]) if pattern is not None else None
        if pattern is not None and replacement is not None:
            end = replacement[1]
            case = text[end] if end < len(text) and text[end] in "LU" else ""
            end += len(case)
            source = text[pos:end]
            return _compile(source, pattern[0], replacement[0], case), end
    if pos == len(text) or text[pos] == ",":
        return None, pos
    stop = text.find(",", pos)
    bad = text[pos:] if stop < 0 else text[pos:stop]
    raise ConfigurationError(f"invalid principal mapping rule: {bad.strip()!r}")


def parse_rules(rules: str | Sequence[str]) -> tuple[_Rule, ...]:
    """Kafka's rule syntax: one comma-separated string, or a list of single rules."""
    texts = [rules] if isinstance(rules, str) else list(rules)
    out: list[_Rule] = []
    for raw in texts:
        text = raw.strip()
        pos = 0
        while pos < len(text):
            rule, end = _one_rule(text, pos)
            rest = len(text[end:]) - len(text[end:].lstrip())
            end += rest
            if end < len(text) and text[end] != ",":
                source = rule.text if rule is not None else ""
                raise ConfigurationError(
                    f"invalid principal mapping rule {source!r}: unexpected {text[end:]!r}"
                )
            if rule is not None:
                out.append(rule)
            pos = end + 1 if end < len(text) else end
            pos += len(text[pos:]) - len(text[pos:].lstrip())
    if not out:
        raise ConfigurationError("principal_mapping_rules names no rule")
    return tuple(out)


class PrincipalMapper:
    """Maps a certificate subject (RFC 2253 text) to a ``User:`` principal."""

    def __init__(self, rules: str | Sequence[str] = "DEFAULT") -> None:
        self._rules = parse_rules(rules)

    @property
    def rules(self) -> tuple[str, ...]:
        """The rules as written, in the order they are tried."""
        return tuple(rule.text for rule in self._rules)

    def name(self, subject: str) -> str:
        """The principal name for ``subject``; raises ``NoMatchingRule``."""
        for rule in self._rules:
            result = rule.apply(subject)
            if result is not None:
                return result
        raise NoMatchingRule(f"no principal mapping rule applies to {subject!r}")

    def principal(self, subject: str | None) -> str:
        """``User:`` plus the mapped name; ``User:ANONYMOUS`` without a certificate."""
        if subject is None:
            return ANONYMOUS
        return USER + self.name(subject)
