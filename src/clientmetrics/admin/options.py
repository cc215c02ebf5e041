"""``kafka-client-metrics`` options: parsed and checked as Kafka's tool does.

Kafka parses with jopt-simple and then runs ``ClientMetricsCommandOptions.checkArgs``;
both are reproduced here, messages included, because runbooks match on them:

* parse errors (unknown option, missing argument) and ``checkArgs`` usage failures ->
  ``UsageError`` (message + usage on stderr, exit 1);
* ``checkArgs`` plain failures (``--bootstrap-server must be specified.``, an
  ``--interval`` that is not an integer) -> ``ArgumentError`` (Kafka adds a stack trace);
* ``--interval`` is a string, as in Kafka 4.4: empty resets (deletes) the interval.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from clientmetrics.admin.usage import OptionHelp, format_help

__all__ = [
    "ACTIONS",
    "HEADLINE",
    "ArgumentError",
    "CommandOptions",
    "OptionValueError",
    "UsageError",
    "help_text",
    "parse_args",
]

HEADLINE = "This tool helps to manipulate and describe client metrics configurations."
ACTIONS = ("alter", "delete", "describe", "list")
_SELECTORS = (
    "client_id",
    "client_instance_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)
_SELECTOR_LINES = "\n".join("\t" + name for name in _SELECTORS)

OPTIONS: tuple[OptionHelp, ...] = (
    OptionHelp(
        "bootstrap-server",
        "REQUIRED: The Kafka server to connect to.",
        "<String: server to connect to>",
    ),
    OptionHelp(
        "command-config",
        "Property file containing configs to be passed to Admin Client.",
        "<String: command config property file>",
    ),
    OptionHelp("alter", "Alter the configuration for the client metrics resource."),
    OptionHelp("delete", "Delete the configuration for the client metrics resource."),
    OptionHelp("describe", "List configurations for the client metrics resource."),
    OptionHelp("list", "List the client metrics resources."),
    OptionHelp("name", "Name of client metrics configuration resource.", "<String: name>"),
    OptionHelp("generate-name", "Generate a UUID to use as the name."),
    OptionHelp(
        "interval",
        "The metrics push interval in milliseconds.\nLeave empty to reset the interval.",
        "<String: push interval>",
    ),
    OptionHelp(
        "match",
        "Matching selector 'k1=v1,k2=v2'. The following is a list of valid selector names: \n"
        + _SELECTOR_LINES,
        "<String: k1=v1,k2=v2>",
    ),
    OptionHelp("metrics", "Telemetry metric name prefixes 'm1,m2'.", "<String: m1,m2>"),
    OptionHelp("help", "Print usage information."),
    OptionHelp("version", "Display Kafka version."),
    # Beyond Kafka's tool:
    OptionHelp(
        "output",
        "Output format of --list and --describe: text (as Kafka prints it) "
        "or json (one JSON document).",
        "<String: text|json>",
        default="text",
    ),
    OptionHelp(
        "timeout",
        "Timeout in milliseconds for connecting and for each request.",
        "<Integer: timeout ms>",
        default="30000",
    ),
)
_TAKES_ARGUMENT = frozenset(o.name for o in OPTIONS if o.argument)
_KNOWN = frozenset(o.name for o in OPTIONS)
_SPLIT_ON_COMMA = frozenset({"match", "metrics"})
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def help_text() -> str:
    """The options table Kafka prints under a usage message."""
    return format_help(OPTIONS)


class ArgumentError(Exception):
    """Bad arguments, reported as one line on stderr (exit 1)."""


class UsageError(ArgumentError):
    """Bad arguments, reported as the message plus the usage table on stderr (exit 1)."""


class OptionValueError(Exception):
    """An option value that cannot be converted (reported like a failed command)."""


@dataclass(frozen=True)
class CommandOptions:
    """Which options were given, with their raw values in order."""

    given: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    argc: int = 0

    def has(self, name: str) -> bool:
        """Whether option ``name`` was given."""
        return name in self.given

    def value(self, name: str) -> str | None:
        """The single value of ``name`` (jopt-simple's ``valueOf``)."""
        values = self.given.get(name)
        if not values:
            return None
        if len(values) > 1:
            raise OptionValueError(
                f"Found multiple arguments for option {name}, but you asked for only one"
            )
        return values[0]

    def values(self, name: str) -> tuple[str, ...] | None:
        """Every value of ``name``, ``None`` if it was not given."""
        return self.given.get(name)

    def integer(self, name: str) -> int | None:
        """The value of ``name`` as Java's ``Integer.valueOf`` reads it."""
        raw = self.value(name)
        if raw is None:
            return None
        if not _is_java_int(raw):
            raise OptionValueError(f"Cannot parse argument '{raw}' of option {name}")
        return int(raw)

    @property
    def action(self) -> str:
        """The one action given (valid after ``parse_args``)."""
        return next(a for a in ACTIONS if self.has(a))


def _is_java_int(text: str) -> bool:
    """What Java's ``Integer.parseInt`` accepts: a sign, decimal digits, 32 bits."""
    return bool(_JAVA_INT.fullmatch(text)) and -(2**31) <= int(text) < 2**31


def _split_values(name: str, raw: str) -> list[str]:
    if name not in _SPLIT_ON_COMMA:
        return [raw]
    # jopt-simple's StringTokenizer: empty tokens vanish, all-empty keeps the raw value.
    tokens = [token for token in raw.split(",") if token]
    return tokens or [raw]


def _tokenize(argv: Sequence[str]) -> dict[str, list[str]]:
    given: dict[str, list[str]] = {}
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            break  # the rest are non-option arguments, which the tool ignores
        if not arg.startswith("-") or arg == "-":
            continue
        key, sep, inline = arg.lstrip("-").partition("=")
        if key not in _KNOWN:
            bad = key if arg.startswith("--") else key[:1]
            raise UsageError(f"{bad} is not a recognized option")
        values = given.setdefault(key, [])
        if key not in _TAKES_ARGUMENT:
            continue
        if not sep:
            if i >= len(args):
                raise UsageError(f"Option {key} requires an argument")
            inline = args[i]  # taken even if it looks like an option, as jopt-simple does
            i += 1
        values.extend(_split_values(key, inline))
    return given


def _check_invalid(opts: CommandOptions, used: str, invalid: Sequence[str]) -> None:
    if opts.has(used):
        for other in invalid:
            if opts.has(other):
                raise UsageError(f'Option "[{used}]" can\'t be used with option "[{other}]"')


def _check(opts: CommandOptions) -> None:
    if opts.argc == 0 or opts.has("help"):
        raise UsageError(HEADLINE)
    if sum(opts.has(a) for a in ACTIONS) != 1:
        raise UsageError(
            "Command must include exactly one action: --alter, --delete, --describe or --list."
        )
    if not opts.has("bootstrap-server"):
        raise ArgumentError("--bootstrap-server must be specified.")
    alter_only = ("generate-name", "interval", "match", "metrics")
    _check_invalid(opts, "delete", alter_only)
    _check_invalid(opts, "describe", alter_only)
    _check_invalid(opts, "list", ("name", *alter_only))
    _check_invalid(opts, "alter", ("output",))
    _check_invalid(opts, "delete", ("output",))
    if opts.has("alter") and opts.has("name") == opts.has("generate-name"):
        raise ArgumentError("One of --name or --generate-name must be specified with --alter.")
    interval = opts.given.get("interval", ("",))[0]
    if interval and not _is_java_int(interval):
        raise ArgumentError("Invalid interval value. Enter an integer, or leave empty to reset.")
    if opts.has("delete") and not opts.has("name"):
        raise ArgumentError("A client metrics resource name must be specified with --delete.")


def parse_args(argv: Sequence[str]) -> CommandOptions:
    """Parse and check ``argv`` (without the program name).

    ``--version`` is returned unchecked (the caller prints the version and exits 0),
    exactly where Kafka's ``maybePrintHelpOrVersion`` would.
    """
    given = _tokenize(argv)
    opts = CommandOptions(MappingProxyType({k: tuple(v) for k, v in given.items()}), len(argv))
    if opts.argc and not opts.has("help") and opts.has("version"):
        return opts
    _check(opts)
    return opts
