"""The SCRAM credential file in the data directory (``DATA/credentials.json``).

The format and the derivation are ``security.credentials``'; this module only
reads and writes. Every change is a read-modify-write under an exclusive lock
(the ``users`` command and a running gateway may both write), written to a
temporary file, synced and renamed over the old one, so a crash leaves either
the old or the new file, never half of one. Readers see changes made by other
processes: the file is re-read when its modification stamp changes.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

from clientmetrics.security.credentials import (
    CredentialError,
    CredentialShape,
    ScramCredential,
    dumps_credentials,
    loads_credentials,
    typical_shape,
)

__all__ = ["CREDENTIALS_FILE", "SECRET_FILE", "CredentialFile"]

CREDENTIALS_FILE = "credentials.json"
#: The secret unknown users' dummy salts are derived from: kept beside the
#: credentials so every process and every restart of a gateway uses the same.
SECRET_FILE = "credentials.secret"
SECRET_BYTES = 32
Users = dict[str, dict[str, ScramCredential]]


class CredentialFile:
    """A ``CredentialLookup`` over the credential file, with atomic updates."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._users: Users = {}
        self._stamp: tuple[int, int, int] | None = None
        self._shapes: dict[str, CredentialShape] = {}

    @classmethod
    def in_data_dir(cls, data_dir: Path) -> CredentialFile:
        return cls(data_dir / CREDENTIALS_FILE)

    def _current_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CredentialError(f"cannot read {self.path}: {exc.strerror}") from exc
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _read(self) -> Users:
        try:
            return loads_credentials(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise CredentialError(f"cannot read {self.path}: {exc.strerror}") from exc
        except CredentialError as exc:
            raise CredentialError(f"{self.path}: {exc}") from exc

    def _refresh(self) -> Users:
        stamp = self._current_stamp()
        if stamp != self._stamp:
            self._users = self._read() if stamp is not None else {}
            self._stamp = stamp
            self._shapes = {}
        return self._users

    def typical_shape(self, mechanism: str) -> CredentialShape:
        """The shape most stored credentials of ``mechanism`` have (unknown users get it)."""
        try:
            users = self._refresh()
        except CredentialError:
            return CredentialShape()
        shape = self._shapes.get(mechanism)
        if shape is None:
            shape = self._shapes[mechanism] = typical_shape(users, mechanism)
        return shape

    def scram(self, user: str, mechanism: str) -> ScramCredential | None:
        """The stored credential, or ``None`` (also when the file cannot be read)."""
        try:
            return self._refresh().get(user, {}).get(mechanism)
        except CredentialError:
            return None  # an unreadable file authenticates nobody; the operator sees it in list

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        """Every user and its credentials; raises ``CredentialError`` on a bad file."""
        return {user: dict(mechs) for user, mechs in self._refresh().items()}

    def secret(self) -> bytes:
        """The dummy-salt secret (``SECRET_FILE``), made on first use: written whole to a
        temporary file (mode 0600), then linked into place, so concurrent workers all
        read the one that got there first, never a partial one."""
        path = self.path.with_name(SECRET_FILE)
        try:
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f".{SECRET_FILE}.{os.getpid()}.tmp")
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                try:
                    os.write(fd, secrets.token_bytes(SECRET_BYTES))
                    os.fsync(fd)
                finally:
                    os.close(fd)
                with contextlib.suppress(FileExistsError):
                    os.link(tmp, path)
                tmp.unlink()
            data = path.read_bytes()
        except OSError as exc:
            raise CredentialError(f"cannot read or create {path}: {exc.strerror}") from exc
        if len(data) < 16:
            raise CredentialError(f"{path} holds {len(data)} bytes; remove it to make a new one")
        return data

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def update(self, change: Callable[[Users], None]) -> Users:
        """Apply ``change`` to the current users in place, then write atomically."""
        try:
            with self._locked():
                users = self._read()
                change(users)
                users = {user: mechs for user, mechs in users.items() if mechs}
                self._write(users)
        except OSError as exc:
            raise CredentialError(f"cannot write {self.path}: {exc.strerror}") from exc
        self._stamp = None
        return users

    def _write(self, users: Users) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, dumps_credentials(users).encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def upsert(self, user: str, credentials: dict[str, ScramCredential]) -> None:
        """Set ``user``'s credential for each given mechanism (others are kept)."""
        self.update(lambda users: users.setdefault(user, {}).update(credentials))

    def remove(self, user: str, mechanisms: tuple[str, ...] | None = None) -> bool:
        """Delete ``user`` (or only some mechanisms); whether anything was removed."""
        removed: list[str] = []

        def change(users: Users) -> None:
            mechs = users.get(user, {})
            for mech in list(mechs) if mechanisms is None else mechanisms:
                if mechs.pop(mech, None) is not None:
                    removed.append(mech)

        self.update(change)
        return bool(removed)
