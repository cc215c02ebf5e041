"""TLS for the listeners and the upstream links: contexts that reload their files.

Operators rotate certificates without restarting the gateway. A context is built
once and kept (asyncio servers hold on to the context they were created with);
reloading calls ``load_cert_chain`` on that live context, which every handshake
after it uses. The new files are first loaded into a scratch context, from one
snapshot of their bytes, so a key that does not match its certificate, a file
caught half-written, or garbage never reaches the live context: a failed reload
logs an error and the old certificate stays in use.

A CA bundle is re-read the same way, but OpenSSL can only add to a context's
trust store: a CA removed from the bundle stays trusted until a restart.
"""

from __future__ import annotations

import asyncio
import enum
import ssl
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from clientmetrics.errors import ConfigurationError
from clientmetrics.security.principal import ANONYMOUS, PrincipalMapper
from clientmetrics.security.x500 import subject_name

__all__ = [
    "ClientAuth",
    "ReloadingContext",
    "TlsConfig",
    "TlsFiles",
    "password_setting",
    "path_setting",
    "reload_all",
    "server_context",
    "tls_from",
    "tls_principal",
]

log = structlog.get_logger("clientmetrics.gateway.tls")


class ClientAuth(enum.Enum):
    """Kafka's ``ssl.client.auth``."""

    NONE = "none"
    REQUESTED = "requested"
    REQUIRED = "required"


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """PEM files of one side of a TLS connection."""

    certificate: Path | None = None
    private_key: Path | None = None
    #: PEM bundle of the CAs trusted to sign the peer's certificate.
    ca: Path | None = None
    #: The private key's password, when it is encrypted (Kafka's ``ssl.key.password``).
    key_password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if (self.certificate is None) != (self.private_key is None):
            raise ConfigurationError("certificate and private_key go together")
        if self.key_password is not None and self.private_key is None:
            raise ConfigurationError("private_key_password needs private_key")

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(p for p in (self.certificate, self.private_key, self.ca) if p is not None)


@dataclass(frozen=True, slots=True)
class TlsConfig:
    """The listeners' ``[tls]`` section."""

    files: TlsFiles
    client_auth: ClientAuth = ClientAuth.NONE
    principal_mapping_rules: tuple[str, ...] = ("DEFAULT",)
    #: How often the files' modification times are checked (0: only on SIGHUP).
    reload_check_s: float = 5.0
    mapper: PrincipalMapper = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.files.certificate is None:
            raise ConfigurationError("[tls] needs certificate and private_key")
        if self.client_auth is not ClientAuth.NONE and self.files.ca is None:
            raise ConfigurationError(f"[tls] client_auth = {self.client_auth.value!r} needs ca")
        if self.reload_check_s < 0:
            raise ConfigurationError("[tls] reload_check_s must not be negative")
        object.__setattr__(self, "mapper", PrincipalMapper(self.principal_mapping_rules))


def path_setting(value: object, what: str) -> Path | None:
    """A file path from TOML or the environment (None when absent or empty)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str | Path):
        raise ConfigurationError(f"{what}: expected a file path, got {value!r}")
    return Path(value).expanduser()


def password_setting(value: object) -> str | None:
    """``private_key_password`` (None when absent)."""
    return None if value is None else str(value)


#: The ``[tls]`` settings.
TLS_KEYS = frozenset(
    {
        "certificate",
        "private_key",
        "private_key_password",
        "ca",
        "client_auth",
        "principal_mapping_rules",
        "reload_check_s",
    }
)


def tls_from(section: Mapping[str, Any]) -> TlsConfig:
    """The ``[tls]`` section: certificate, private_key, ca, client_auth, mapping rules."""
    unknown = set(section) - TLS_KEYS
    if unknown:
        raise ConfigurationError(f"unknown [tls] setting(s): {', '.join(sorted(unknown))}")
    auth = str(section.get("client_auth", "none")).lower()
    try:
        client_auth = ClientAuth(auth)
    except ValueError:
        raise ConfigurationError(
            f"[tls] client_auth must be none, requested or required, got {auth!r}"
        ) from None
    rules = section.get("principal_mapping_rules", "DEFAULT")
    files = TlsFiles(
        path_setting(section.get("certificate"), "[tls] certificate"),
        path_setting(section.get("private_key"), "[tls] private_key"),
        path_setting(section.get("ca"), "[tls] ca"),
        password_setting(section.get("private_key_password")),
    )
    try:
        every = float(section.get("reload_check_s", 5.0))
    except (TypeError, ValueError):
        raise ConfigurationError("[tls] reload_check_s must be a number of seconds") from None
    return TlsConfig(
        files,
        client_auth,
        (rules,) if isinstance(rules, str) else tuple(str(r) for r in rules),
        every,
    )


def _snapshot(files: TlsFiles) -> tuple[int, ...]:
    out: list[int] = []
    for path in files.paths:
        try:
            stat = path.stat()
        except OSError:
            out.extend((-1, -1))
            continue
        out.extend((stat.st_mtime_ns, stat.st_size))
    return tuple(out)


def _load(context: ssl.SSLContext, files: TlsFiles) -> None:
    """Load ``files`` into ``context``; raises ``ssl.SSLError`` or ``OSError``."""
    if files.ca is not None:
        context.load_verify_locations(cafile=str(files.ca))
    if files.certificate is None or files.private_key is None:
        return
    # One snapshot of both files, so a rotation caught between the certificate
    # and the key cannot pair a new certificate with an old key.
    cert = files.certificate.read_bytes()
    key = files.private_key.read_bytes()
    with tempfile.TemporaryDirectory(prefix="clientmetrics-tls-") as tmp:
        chain = Path(tmp, "chain.pem")
        chain.write_bytes(cert + b"\n" + key)  # the directory is private (0700)
        scratch = ssl.SSLContext(context.protocol)
        password = files.key_password
        scratch.load_cert_chain(str(chain), password=password)  # refuses a key that does not match
        context.load_cert_chain(str(chain), password=password)


class ReloadingContext:
    """An ``SSLContext`` whose certificate, key and CAs are re-read when they change."""

    def __init__(self, context: ssl.SSLContext, files: TlsFiles, *, name: str) -> None:
        self.context = context
        self._files = files
        self._name = name
        self._seen = _snapshot(files)
        try:
            _load(context, files)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(f"{name}: cannot load TLS files: {exc}") from exc

    def reload(self) -> bool:
        """Re-read the files now; False (and the old ones kept) if they do not load."""
        self._seen = _snapshot(self._files)
        try:
            _load(self.context, self._files)
        except (OSError, ssl.SSLError) as exc:
            log.error("tls_reload_failed", context=self._name, error=str(exc))
            return False
        log.info("tls_reloaded", context=self._name, files=[str(p) for p in self._files.paths])
        return True

    def reload_if_changed(self) -> bool:
        """Reload when a file's modification time or size changed since the last look."""
        if _snapshot(self._files) == self._seen:
            return False
        return self.reload()

    async def watch(self, every_s: float) -> None:
        """Poll the files every ``every_s`` seconds until cancelled."""
        while True:
            await asyncio.sleep(every_s)
            self.reload_if_changed()


def server_context(config: TlsConfig) -> ReloadingContext:
    """The listeners' context: TLS 1.2 or newer, client certificates as configured."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.verify_mode = {
        ClientAuth.NONE: ssl.CERT_NONE,
        ClientAuth.REQUESTED: ssl.CERT_OPTIONAL,
        ClientAuth.REQUIRED: ssl.CERT_REQUIRED,
    }[config.client_auth]
    return ReloadingContext(context, config.files, name="listener")


def tls_principal(ssl_object: ssl.SSLObject | ssl.SSLSocket | None, mapper: PrincipalMapper) -> str:
    """The principal of a TLS connection, as Kafka's default principal builder makes it.

    ``User:`` plus the client certificate's subject mapped by the rules, or
    ``User:ANONYMOUS`` without a certificate (or without TLS). Raises
    ``NoMatchingRule`` when no rule applies: Kafka refuses such a connection.
    """
    if ssl_object is None:
        return ANONYMOUS
    der = ssl_object.getpeercert(binary_form=True)
    return mapper.principal(subject_name(der) if der else None)


def reload_all(contexts: Sequence[ReloadingContext]) -> None:
    """Re-read every context's files (SIGHUP)."""
    for context in contexts:
        context.reload()
