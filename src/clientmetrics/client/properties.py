"""Kafka client properties: Java ``.properties`` files and the TLS/SASL settings in them.

``--command-config`` (the admin tool, the simulator) takes the same file a Java
client reads, so the parser follows ``java.util.Properties.load`` (comments,
``=``/``:``/space separators, line continuations, escapes). Unsupported transport
settings fail here, at build time, with one clear line rather than later on the wire.
"""

from __future__ import annotations

import re
import ssl
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from clientmetrics.client.sasl import SaslCredentials, SaslOAuthBearer, SaslPlain, SaslScram
from clientmetrics.errors import ConfigurationError

__all__ = [
    "CONNECT_TIMEOUT_S",
    "PROTOCOLS",
    "SUPPORTED_MECHANISMS",
    "ClientSecurity",
    "librdkafka_properties",
    "parse_bootstrap",
    "parse_properties",
    "read_properties",
]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: How long reaching a Kafka cluster (connect, TLS, SASL, a first answer) may take
#: before a command that needs it at start says it cannot: the gateway's upstream
#: (``upstream_connect_timeout_s``) and the pipeline's source and master.
CONNECT_TIMEOUT_S = 10.0
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
#: Kafka's file token retriever (KIP-768): the JWT is read from this file.
TOKEN_FILE_PROPERTY = "sasl.oauthbearer.token.endpoint.url"
# JAAS options: name="value" with backslash escapes inside the quotes.
_JAAS_OPTION = re.compile(r'([A-Za-z_][\w.-]*)\s*=\s*"((?:[^"\\]|\\.)*)"')
_LINE_END = re.compile(r"\r\n|\r|\n")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    pending = ""
    # Only \n, \r and \r\n end a line in Java (str.splitlines would split on \x85 too).
    for raw in _LINE_END.split(text):
        line = raw.lstrip(" \t\f")  # Java skips leading blanks of every natural line
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd count of backslashes continues the line
            pending += line[:-1]
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 6 <= len(text):
                try:
                    out.append(chr(int(text[i + 2 : i + 6], 16)))
                except ValueError as exc:
                    raise ConfigurationError(f"Malformed \\uxxxx encoding in {text!r}") from exc
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


def _split_key(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\":
            i += 2
            continue
        if char in "=: \t\f":
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def parse_properties(text: str) -> dict[str, str]:
    """The key/value pairs of a Java ``.properties`` text (later keys win, as in Java)."""
    return dict(_split_key(line) for line in _logical_lines(text))


def read_properties(path: str | Path) -> dict[str, str]:
    """Read a ``.properties`` file; a missing or unreadable file is a ``ConfigurationError``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"{path} ({exc.strerror or exc})") from exc
    return parse_properties(text)


def parse_bootstrap(servers: str) -> tuple[tuple[str, int], ...]:
    """``host:port[,host:port...]`` as (host, port) pairs; IPv6 hosts in brackets."""
    out: list[tuple[str, int]] = []
    for item in (part.strip() for part in servers.split(",")):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigurationError(f"Invalid url in bootstrap.servers: {item}")
        out.append((host, int(port)))
    if not out:
        raise ConfigurationError("No resolvable bootstrap urls given in bootstrap.servers")
    return tuple(out)


def _check_store_types(props: Mapping[str, str]) -> None:
    for kind in ("truststore", "keystore"):
        store_type = props.get(f"ssl.{kind}.type", "JKS")  # Java's default store type
        if f"ssl.{kind}.location" in props and store_type.upper() != "PEM":
            raise ConfigurationError(
                f"ssl.{kind}.type={store_type} is not supported; "
                f"use ssl.{kind}.type=PEM with a PEM ssl.{kind}.location"
            )
    if "ssl.keystore.key" in props or "ssl.keystore.certificate.chain" in props:
        raise ConfigurationError(
            "inline ssl.keystore.key/ssl.keystore.certificate.chain are not supported; "
            "use ssl.keystore.type=PEM with ssl.keystore.location"
        )
    if ("ssl.certificate.location" in props) != ("ssl.key.location" in props):
        raise ConfigurationError(
            "ssl.certificate.location and ssl.key.location must be set together"
        )


def _ssl_context(props: Mapping[str, str]) -> ssl.SSLContext:
    """An SSLContext from Kafka's ``ssl.*`` client properties (PEM stores only).

    Java's names (``ssl.truststore.location``, ``ssl.keystore.location`` with
    ``ssl.*.type=PEM``) and librdkafka's (``ssl.ca.location``,
    ``ssl.certificate.location`` + ``ssl.key.location``) are both understood.
    """
    _check_store_types(props)
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    password = props.get("ssl.key.password")
    try:
        for cafile in (props.get("ssl.truststore.location"), props.get("ssl.ca.location")):
            if cafile is not None:
                context.load_verify_locations(cafile=cafile)
        if "ssl.truststore.certificates" in props:
            context.load_verify_locations(cadata=props["ssl.truststore.certificates"])
        if "ssl.keystore.location" in props:
            context.load_cert_chain(props["ssl.keystore.location"], password=password)
        if "ssl.certificate.location" in props:
            context.load_cert_chain(
                props["ssl.certificate.location"], props["ssl.key.location"], password=password
            )
    except (OSError, ssl.SSLError) as exc:
        raise ConfigurationError(f"Invalid SSL configuration: {exc}") from exc
    # Kafka verifies the host name unless the algorithm is set to the empty string
    # (librdkafka: "none").
    if props.get("ssl.endpoint.identification.algorithm", "https").strip().lower() in ("", "none"):
        context.check_hostname = False
    return context


def _jaas_options(jaas: str, module: str, mechanism: str) -> dict[str, str]:
    if module not in jaas:
        raise ConfigurationError(f"sasl.jaas.config must use {module} for {mechanism}")
    return {key: re.sub(r"\\(.)", r"\1", value) for key, value in _JAAS_OPTION.findall(jaas)}


def _oauthbearer(props: Mapping[str, str]) -> SaslOAuthBearer:
    jaas = props.get("sasl.jaas.config")
    if jaas is not None:
        _jaas_options(jaas, _OAUTH_MODULE, "OAUTHBEARER")
    url = props.get(TOKEN_FILE_PROPERTY, "")
    if not url.startswith("file:"):
        raise ConfigurationError(
            f"sasl.mechanism=OAUTHBEARER needs {TOKEN_FILE_PROPERTY}=file:///path/to/token "
            "(a JWT in a file); token endpoints over HTTP are not supported by this tool"
        )
    path = urllib.parse.unquote(urllib.parse.urlsplit(url).path)
    if not path:
        raise ConfigurationError(f"{TOKEN_FILE_PROPERTY}={url} names no file")
    return SaslOAuthBearer(Path(path))


def _sasl_credentials(props: Mapping[str, str]) -> SaslCredentials:
    """Credentials from ``sasl.mechanism`` and ``sasl.jaas.config`` (or librdkafka's
    ``sasl.username`` / ``sasl.password``)."""
    mechanism = props.get("sasl.mechanism", "GSSAPI").strip().upper()
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ConfigurationError(
            f"sasl.mechanism={mechanism} is not supported by this tool; "
            f"supported: {', '.join(SUPPORTED_MECHANISMS)}"
        )
    if mechanism == "OAUTHBEARER":
        return _oauthbearer(props)
    module = _PLAIN_MODULE if mechanism == "PLAIN" else _SCRAM_MODULE
    jaas = props.get("sasl.jaas.config")
    if jaas is not None:
        options = _jaas_options(jaas, module, mechanism)
        username, password = options.get("username"), options.get("password")
    else:
        username, password = props.get("sasl.username"), props.get("sasl.password")
    if username is None or password is None:
        raise ConfigurationError(
            f"sasl.mechanism={mechanism} needs a username and password: set sasl.jaas.config "
            f"({module.rsplit('.', 1)[1]}) or sasl.username and sasl.password"
        )
    if mechanism == "PLAIN":
        return SaslPlain(username, password)
    return SaslScram(mechanism, username, password)


@dataclass(frozen=True)
class ClientSecurity:
    """TLS and SASL settings of a Kafka client, from Kafka's client properties.

    One parser for the admin tool and the simulator (and anything else that
    connects as a Kafka client).
    """

    ssl_context: ssl.SSLContext | None = None
    sasl: SaslCredentials | None = None

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        """``security.protocol``, ``sasl.*`` and ``ssl.*``; raises ``ConfigurationError``."""
        protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in PROTOCOLS:
            raise ConfigurationError(
                f"Invalid value {protocol} for configuration security.protocol: "
                f"String must be one of: {', '.join(PROTOCOLS)}"
            )
        return cls(
            ssl_context=_ssl_context(props) if protocol.endswith("SSL") else None,
            sasl=_sasl_credentials(props) if protocol.startswith("SASL_") else None,
        )


def librdkafka_properties(props: Mapping[str, str]) -> dict[str, str]:
    """The same client properties in librdkafka's names (a confluent-kafka client).

    Checked as ``ClientSecurity`` checks them (same errors); PEM stores only, as
    there. A Java PEM keystore holds the key and its chain in one file, which
    librdkafka reads as both ``ssl.certificate.location`` and ``ssl.key.location``.
    """
    security = ClientSecurity.from_properties(props)
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    out = {"security.protocol": protocol.lower()}
    if security.ssl_context is not None:
        for ca in ("ssl.truststore.location", "ssl.ca.location"):
            if ca in props:
                out["ssl.ca.location"] = props[ca]
        if "ssl.truststore.certificates" in props:
            out["ssl.ca.pem"] = props["ssl.truststore.certificates"]
        if "ssl.keystore.location" in props:
            out["ssl.certificate.location"] = props["ssl.keystore.location"]
            out["ssl.key.location"] = props["ssl.keystore.location"]
        for name in ("ssl.certificate.location", "ssl.key.location", "ssl.key.password"):
            if name in props:
                out[name] = props[name]
        out["ssl.endpoint.identification.algorithm"] = (
            "https" if security.ssl_context.check_hostname else "none"
        )
    sasl = security.sasl
    if isinstance(sasl, SaslOAuthBearer):
        raise ConfigurationError(
            "sasl.mechanism=OAUTHBEARER with a token file is not supported for reading a topic"
        )
    if isinstance(sasl, SaslPlain | SaslScram):
        out.update({"sasl.mechanism": sasl.mechanism, "sasl.username": sasl.username,
                    "sasl.password": sasl.password})  # fmt: skip
    return out
