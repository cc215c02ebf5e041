"""Which gateway settings exist, and where a value came from.

``load_config`` checks every section of the TOML file and every
``CLIENTMETRICS_<SECTION>_<KEY>`` variable against these tables first, so all the
unknown settings are reported in one error, not one per start; and an invalid
value that came from the environment is reported with the variable's name.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from clientmetrics.errors import ConfigurationError
from clientmetrics.gateway.tls import TLS_KEYS
from clientmetrics.gateway.upstream_security import UPSTREAM_KEYS
from clientmetrics.security.authorizer import AUTHORIZATION_KEYS
from clientmetrics.security.sasl import OAUTHBEARER_KEYS, SASL_KEYS
from clientmetrics.telemetry.manager import TelemetryConfig

__all__ = ["ENV_PREFIX", "EnvSettings", "check_known", "normalised"]

ENV_PREFIX = "CLIENTMETRICS_"
#: ``[proxy]``: who authenticates clients, who answers telemetry.
PROXY_KEYS = frozenset({"sasl", "telemetry"})

#: Sections whose keys may be spelled with ``-`` or ``.`` for ``_``.
_LENIENT = ("gateway", "telemetry")


def normalised(key: str) -> str:
    """A ``[gateway]`` or ``[telemetry]`` key as its setting's name."""
    return key.replace("-", "_").replace(".", "_")


@functools.cache
def _known(gateway: frozenset[str]) -> dict[str, frozenset[str]]:
    return {
        "gateway": gateway,
        "telemetry": frozenset(f.name for f in fields(TelemetryConfig)),
        "tls": TLS_KEYS,
        "upstream": UPSTREAM_KEYS,
        "sasl": SASL_KEYS,
        "authorization": AUTHORIZATION_KEYS,
        "proxy": PROXY_KEYS,
    }


@dataclass(frozen=True)
class EnvSettings:
    """The ``CLIENTMETRICS_<SECTION>_<KEY>`` variables: values, and each one's name."""

    values: Mapping[str, Mapping[str, str]]
    names: Mapping[str, Mapping[str, str]]

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> EnvSettings:
        values: dict[str, dict[str, str]] = {}
        names: dict[str, dict[str, str]] = {}
        for variable, value in environ.items():
            if variable.startswith(ENV_PREFIX) and variable.count("_") >= 2:
                _, section, key = variable.split("_", 2)
                values.setdefault(section.lower(), {})[key.lower()] = value
                names.setdefault(section.lower(), {})[key.lower()] = variable
        return cls(values, names)

    def section(self, name: str) -> dict[str, str]:
        return dict(self.values.get(name, {}))

    def blame(self, exc: ConfigurationError, section: str, keys: set[str]) -> ConfigurationError:
        """``exc`` naming the variables among ``keys`` (still in force) that it mentions."""
        text = str(exc)
        names = sorted(
            variable
            for key, variable in self.names.get(section, {}).items()
            if key in keys and (key in text or normalised(key) in text)
        )
        if not names:
            return exc
        return ConfigurationError(f"{text} (from {', '.join(names)})")


def check_known(doc: Mapping[str, Any], env: EnvSettings, gateway: frozenset[str]) -> None:
    """``ConfigurationError`` listing every unknown section, key and variable at once.

    ``gateway``: the ``[gateway]`` settings (``gateway.config_load`` holds their one list).
    """
    known = _known(gateway)
    unknown = [f"[{name}]" for name in doc if name not in known and name != "exporters"]
    for section in known:
        table = doc.get(section, {})
        if isinstance(table, Mapping):
            unknown += [f"[{section}] {key}" for key in table if not _is_known(known, section, key)]
        if section == "sasl" and isinstance(table, Mapping):
            oauth = table.get("oauthbearer", {})
            if isinstance(oauth, Mapping):
                unknown += [f"[sasl.oauthbearer] {k}" for k in oauth if k not in OAUTHBEARER_KEYS]
    for section, names in env.names.items():
        if section in ("gateway", "telemetry", "tls", "upstream"):
            unknown += [
                f"{variable} ([{section}] {key})"
                for key, variable in names.items()
                if not _is_known(known, section, key)
            ]
    if unknown:
        raise ConfigurationError(f"unknown settings: {', '.join(unknown)}")


def _is_known(known: Mapping[str, frozenset[str]], section: str, key: str) -> bool:
    name = normalised(key) if section in _LENIENT else key
    return name in known[section]
