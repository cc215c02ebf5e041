"""``kafka-client-metrics``: Kafka's ``kafka-client-metrics.sh``, over ``clientmetrics.admin``.

Same options, output lines, messages and exit codes as Kafka's
``ClientMetricsCommand`` (reference §5), plus ``--output json`` and ``--timeout``.
Where Kafka prints a Java stack trace, this prints only the message.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import TextIO

from clientmetrics.admin.api import (
    AsyncAdmin,
    ClientMetricsResource,
    generate_name,
    subscription_configs,
)
from clientmetrics.admin.errors import AdminConnectionError, AdminError, AdminTimeoutError
from clientmetrics.admin.options import (
    ArgumentError,
    CommandOptions,
    OptionValueError,
    UsageError,
    help_text,
    parse_args,
)
from clientmetrics.admin.properties import AdminConfig, read_properties
from clientmetrics.errors import ConfigurationError

__all__ = ["ERROR_PREFIX", "main", "run"]

ERROR_PREFIX = "Error while executing client metrics command : "
OUTPUT_FORMATS = ("text", "json")


def _version() -> str:
    try:
        return metadata.version("clientmetrics")
    except metadata.PackageNotFoundError:
        return "unknown"


def _config(opts: CommandOptions) -> AdminConfig:
    bootstrap = opts.value("bootstrap-server") or ""
    config_path = opts.value("command-config")
    props = read_properties(config_path) if config_path is not None else {}
    timeout_ms = opts.integer("timeout")
    timeout_s = 30.0 if timeout_ms is None else timeout_ms / 1000
    return AdminConfig.from_properties(bootstrap, props, timeout_s=timeout_s)


def _describe_json(resources: Sequence[ClientMetricsResource]) -> str:
    return json.dumps(
        {
            "resources": [
                {
                    "name": resource.name,
                    "configs": [
                        {"name": e.name, "value": e.value, "source": e.source_name}
                        for e in resource.configs
                    ],
                }
                for resource in resources
            ]
        },
        indent=2,
    )


async def _describe(admin: AsyncAdmin, opts: CommandOptions, out: TextIO, as_json: bool) -> None:
    name = opts.value("name")
    listed = list(await admin.list_client_metrics_resources())
    if name is not None and name not in listed and not as_json:
        # Kafka 4.4's tool checks the listing first and describes only what exists.
        print(f"The client metric resource {name} doesn't exist and doesn't have dynamic config.",
              file=out)  # fmt: skip
        return
    names = [name] if name is not None else listed
    resources = []
    for entity in names:
        resource = await admin.describe(entity)
        if as_json:
            resources.append(resource)
            continue
        # Printed as each arrives, like Kafka, so a later failure keeps earlier output.
        print(f"Client metrics configs for {entity} are:", file=out, flush=True)
        for entry in resource.configs:
            value = "null" if entry.value is None else entry.value  # Java string concat
            print(f"  {entry.name}={value}", file=out, flush=True)
    if as_json:
        print(_describe_json(resources), file=out)


async def _execute(opts: CommandOptions, config: AdminConfig, out: TextIO) -> None:
    output = opts.value("output") or "text"
    if output not in OUTPUT_FORMATS:
        raise OptionValueError(f"Cannot parse argument '{output}' of option output")
    async with AsyncAdmin(config) as admin:
        action = opts.action
        if action == "alter":
            name = generate_name() if opts.has("generate-name") else opts.value("name") or ""
            interval = opts.value("interval")  # checked already: empty or an integer
            configs = subscription_configs(
                metrics=opts.values("metrics"),
                interval_ms=int(interval) if interval else None,
                match=opts.values("match"),
            )
            if interval == "":
                configs["interval.ms"] = ""  # Kafka 4.4: an empty --interval resets it
            await admin.alter(name, configs)
            print(f"Altered client metrics config for {name}.", file=out)
        elif action == "delete":
            name = opts.value("name") or ""
            await admin.delete(name)
            print(f"Deleted client metrics config for {name}.", file=out)
        elif action == "describe":
            await _describe(admin, opts, out, output == "json")
        else:
            names = await admin.list_client_metrics_resources()
            if output == "json":
                print(json.dumps({"resources": list(names)}, indent=2), file=out)
            else:
                print("\n".join(names), file=out)


def _failure(exc: Exception) -> str:
    if isinstance(exc, AdminError) and not isinstance(
        exc, (AdminConnectionError, AdminTimeoutError)
    ):
        return exc.message  # the broker's message alone, as Kafka's tool prints it
    return str(exc)


def run(argv: Sequence[str], out: TextIO, err: TextIO) -> int:
    """Run the tool on ``argv`` (no program name); the exit code."""
    try:
        opts = parse_args(argv)
    except UsageError as exc:
        print(exc, file=err)
        err.write(help_text())
        return 1
    except ArgumentError as exc:
        print(exc, file=err)
        return 1
    if opts.has("version"):
        print(_version(), file=out)
        return 0
    try:
        config = _config(opts)
    except ConfigurationError as exc:
        # Kafka fails here (creating its Admin) outside the command's own error handling.
        print(exc, file=err)
        return 1
    except OptionValueError as exc:
        print(ERROR_PREFIX + str(exc), file=out)
        return 1
    try:
        asyncio.run(_execute(opts, config, out))
    except (AdminError, OptionValueError) as exc:
        print(ERROR_PREFIX + _failure(exc), file=out)
        return 1
    except Exception as exc:  # Kafka's tool catches Throwable here too; no traceback
        print(ERROR_PREFIX + (str(exc) or type(exc).__name__), file=out)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point: ``kafka-client-metrics``."""
    try:
        return run(sys.argv[1:] if argv is None else argv, sys.stdout, sys.stderr)
    except KeyboardInterrupt:
        return 130
