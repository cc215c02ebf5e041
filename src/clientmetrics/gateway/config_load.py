"""Build the gateway configuration from TOML, environment and command line.

Precedence, lowest first: built-in defaults, the TOML file (``--config``), environment
variables ``CLIENTMETRICS_<SECTION>_<KEY>``, then explicit command-line options. The
result (``config.GatewayConfig``) checks itself as it is built.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from clientmetrics.errors import ConfigurationError
from clientmetrics.gateway.config import (
    COMPRESSION_IDS,
    Address,
    ExporterSpec,
    GatewayConfig,
    Listener,
)
from clientmetrics.gateway.config_keys import PROXY_KEYS, EnvSettings, check_known, normalised
from clientmetrics.gateway.tls import tls_from
from clientmetrics.gateway.upstream_security import upstream_from
from clientmetrics.security.authorizer import AuthorizationConfig, parse_authorization
from clientmetrics.security.protocol import SecurityProtocol
from clientmetrics.security.sasl import parse_sasl
from clientmetrics.telemetry.manager import TelemetryConfig


def _telemetry_from(section: Mapping[str, Any]) -> TelemetryConfig:
    known = {f.name for f in fields(TelemetryConfig)}
    values: dict[str, Any] = {}
    for key, value in section.items():
        name = key.replace(".", "_").replace("-", "_")
        if name not in known:
            raise ConfigurationError(f"unknown [telemetry] setting {key!r}")
        if name == "accepted_compression_types":
            values[name] = tuple(_compression_id(v) for v in value)
        else:
            values[name] = value
    try:
        return TelemetryConfig(**values)
    except TypeError as exc:
        raise ConfigurationError(f"[telemetry]: {exc}") from exc


def _compression_id(value: object) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.lower() in COMPRESSION_IDS:
        return COMPRESSION_IDS[value.lower()]
    raise ConfigurationError(f"unknown compression type {value!r}")


def load_config(
    path: Path | None,
    *,
    data_dir: Path | None = None,
    overrides: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
) -> GatewayConfig:
    """Build the configuration from a TOML file, the environment and explicit overrides."""
    doc = _read_toml(path) if path is not None else {}
    env = EnvSettings.from_environ(os.environ if environ is None else environ)
    check_known(doc, env, GATEWAY_KEYS)
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    # Variables still in force (not overridden on the command line), to name in errors.
    from_env = {k for k in env.section("gateway") if normalised(k) not in given}
    gateway: dict[str, Any] = {**doc.get("gateway", {}), **env.section("gateway"), **given}
    try:
        telemetry = _telemetry_from(
            {**doc.get("telemetry", {}), **_typed(env.section("telemetry"))}
        )
    except ConfigurationError as exc:
        raise env.blame(exc, "telemetry", set(env.section("telemetry"))) from exc
    exporters = _exporter_specs(doc.get("exporters", {}))
    root = data_dir or gateway.pop("data_dir", None)
    gateway.pop("data_dir", None)
    if root is None:
        raise ConfigurationError("a data directory is required (--data-dir)")
    tls_section = {**doc.get("tls", {}), **env.section("tls")}
    try:
        tls = tls_from(tls_section) if "tls" in doc or tls_section else None
    except ConfigurationError as exc:
        raise env.blame(exc, "tls", set(env.section("tls"))) from exc
    try:
        upstream = upstream_from({**doc.get("upstream", {}), **env.section("upstream")})
    except ConfigurationError as exc:
        raise env.blame(exc, "upstream", set(env.section("upstream"))) from exc
    sections = _security_sections(doc)
    # Checked once the upstream (a [gateway] value or an override) is known.
    late = {key: sections.pop(key) for key in ("proxy_sasl", "proxy_telemetry") if key in sections}
    try:
        config = GatewayConfig(
            data_dir=Path(root),
            telemetry=telemetry,
            exporters=exporters,
            tls=tls,
            upstream_security=upstream,
            source=path,
            **sections,
        )
        config = replace(config, **_gateway_values(gateway), **late)
    except TypeError as exc:
        raise ConfigurationError(f"[gateway]: {exc}") from exc
    except ConfigurationError as exc:
        raise env.blame(exc, "gateway", from_env) from exc
    return _with_upstream_topic(config)


def _exporter_specs(section: Mapping[str, Any]) -> tuple[ExporterSpec, ...]:
    """``[exporters.NAME]`` tables, ``enabled = false`` ones left out.

    The landing exporter (durable, it gates the answer) comes first unless its
    own table disables it; the others are added to it, not instead of it.
    """
    specs: dict[str, ExporterSpec] = {"landing": ExporterSpec("landing")}
    for name, table in section.items():
        if not isinstance(table, Mapping):
            raise ConfigurationError(f"[exporters.{name}] must be a table")
        options = dict(table)
        enabled = options.pop("enabled", True)
        if not isinstance(enabled, bool):
            raise ConfigurationError(f"[exporters.{name}] enabled must be true or false")
        if enabled:
            specs[name] = ExporterSpec(name, options)
        else:
            specs.pop(name, None)
    return tuple(specs.values())


def _with_upstream_topic(config: GatewayConfig) -> GatewayConfig:
    """In proxy mode the topic exporter's cluster defaults to the upstream one, reached
    with the upstream's security settings (its own ``producer`` table wins)."""
    if not config.proxy:
        return config
    specs = tuple(
        _upstream_topic(spec, config)
        if spec.name == "topic" and "bootstrap_servers" not in spec.options
        else spec
        for spec in config.exporters
    )
    return replace(config, exporters=specs)


def _upstream_topic(spec: ExporterSpec, config: GatewayConfig) -> ExporterSpec:
    producer = spec.options.get("producer", {})
    if not isinstance(producer, Mapping):
        raise ConfigurationError("[exporters.topic] producer must be a table")
    security = config.upstream_security.librdkafka()
    options = {
        **spec.options,
        "bootstrap_servers": ",".join(map(str, config.upstream)),
        "producer": {**security, **producer},
    }
    return ExporterSpec(spec.name, options)


def _security_sections(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``[sasl]`` and ``[authorization]``, each validated by its own parser."""
    out: dict[str, Any] = {}
    if "sasl" in doc:
        out["sasl"] = parse_sasl(doc["sasl"])
    if "authorization" in doc:
        out["authorization"] = parse_authorization(doc["authorization"])
    if "proxy" in doc:
        section = doc["proxy"]
        unknown = set(section) - PROXY_KEYS if isinstance(section, dict) else {"?"}
        if unknown:
            raise ConfigurationError(f"unknown [proxy] setting(s): {', '.join(sorted(unknown))}")
        if "sasl" in section:
            out["proxy_sasl"] = str(section["sasl"])
        if "telemetry" in section:
            out["proxy_telemetry"] = str(section["telemetry"])
    return out


def load_authorization(path: Path | None) -> AuthorizationConfig | None:
    """Re-read only ``[authorization]`` of the TOML file (SIGHUP); raises ``ConfigurationError``."""
    if path is None:
        return None
    section = _read_toml(path).get("authorization")
    return None if section is None else parse_authorization(section)


def _read_toml(path: Path) -> dict[str, Any]:
    """The config file's tables; a missing or unreadable file, or bad TOML, is one line."""
    try:
        return tomllib.loads(path.read_text())
    except OSError as exc:
        raise ConfigurationError(f"cannot read config file {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"config file {path} is not valid TOML: {exc}") from exc


def _typed(section: Mapping[str, str]) -> dict[str, object]:
    return {k: int(v) if v.lstrip("-").isdigit() else v for k, v in section.items()}


def _gateway_values(section: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in section.items():
        try:
            out.update(_gateway_value(key, value))
        except ValueError as exc:
            raise ConfigurationError(f"[gateway] {key}: invalid value {value!r}") from exc
    return out


def _address(name: str, value: Any) -> Address:
    return value if isinstance(value, Address) else Address.parse(str(value), name)


def _addresses(name: str, value: Any) -> tuple[Address, ...]:
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(Address.parse(str(item).strip(), name) for item in items if item)


#: Every ``[gateway]`` setting: its field in ``GatewayConfig`` and how its value is read.
#: The one list of them: unknown keys are whatever is not here (``config_keys``).
_GATEWAY_SETTINGS: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "listen": ("listeners", lambda _name, value: _listeners(value)),
    "admin_listen": ("admin_listen", _address),
    **{
        name: (name, lambda _name, value: int(value))
        for name in (
            "node_id",
            "max_request_bytes",
            "expiry_check_ms",
            "connection_records_interval_ms",
            "connection_records_max_keys",
            "workers",
            "broker_port_base",
            "queued_max_request_bytes",
            "connections_max_idle_ms",
            "max_connections_per_ip",
            "connection_creation_rate_per_ip",
            "connections_max_reauth_ms",
            "loop_stall_log_ms",
            "subscriptions_fetch_wait_ms",
            "max_subscriptions",
        )
    },
    **{
        name: (name, lambda _name, value: str(value))
        for name in ("advertised_host", "cluster_id", "store", "subscriptions_topic")
    },
    **{
        name: (name, lambda _name, value: float(value))
        for name in ("shutdown_timeout_s", "upstream_connect_timeout_s")
    },
    "upstream": ("upstream", _addresses),
    "subscriptions_bootstrap_servers": ("subscriptions_bootstrap_servers", _addresses),
    "subscriptions_key_file": ("subscriptions_key_file", lambda _name, value: Path(str(value))),
}
#: ``data_dir`` too: ``--data-dir`` may come from the file.
GATEWAY_KEYS = frozenset({*_GATEWAY_SETTINGS, "data_dir"})


def _gateway_value(key: str, value: Any) -> dict[str, Any]:
    name = normalised(key)
    if name not in _GATEWAY_SETTINGS:
        raise ConfigurationError(f"unknown [gateway] setting {key!r}")
    field_name, read = _GATEWAY_SETTINGS[name]
    return {field_name: read(name, value)}


def _listeners(value: Any) -> tuple[Listener, ...]:
    """``listen``: one listener, a comma-separated string, or a list (TOML, repeated option)."""
    if isinstance(value, Listener):
        return (value,)
    if isinstance(value, Address):
        return (Listener(SecurityProtocol.PLAINTEXT, value),)
    items = value.split(",") if isinstance(value, str) else list(value)
    return tuple(
        item if isinstance(item, Listener) else Listener.parse(str(item))
        for item in items
        if not isinstance(item, str) or item.strip()
    )
