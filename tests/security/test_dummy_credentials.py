"""Unknown SCRAM users look like real ones: salt length, salt alphabet, iteration count,
and the same salt on every attempt, across processes and restarts."""

from __future__ import annotations

import base64
import secrets
import stat
from pathlib import Path

from clientmetrics.security import SaslConfig, build_sasl_server, derive
from clientmetrics.security.credentials import CredentialShape
from clientmetrics.store.credentials import SECRET_FILE, CredentialFile

MECHANISM = "SCRAM-SHA-512"


def server_first(data_dir: Path, user: str) -> dict[str, str]:
    """The salt (base64) and count a fresh gateway process answers ``user`` with."""
    credentials = CredentialFile.in_data_dir(data_dir)  # a new process: nothing cached
    srv = build_sasl_server(SaslConfig((MECHANISM,)), credentials, seed=credentials.secret())
    exchange = srv.start(MECHANISM)
    first = exchange.respond(f"n,,n={user},r=abcdefgh".encode(), now_ms=0).decode()
    return dict(part.split("=", 1) for part in first.split(","))


def add(data_dir: Path, user: str, salt: bytes, iterations: int) -> None:
    credential = derive(MECHANISM, f"{user}-secret", salt=salt, iterations=iterations)
    CredentialFile.in_data_dir(data_dir).upsert(user, {MECHANISM: credential})


def test_an_unknown_users_salt_is_as_long_and_as_stable_as_a_real_ones(tmp_path: Path) -> None:
    for user in ("alice", "bob", "carol"):  # as `clientmetrics users add` makes them
        add(tmp_path, user, secrets.token_bytes(32), 8192)
    real = server_first(tmp_path, "alice")
    ghost = server_first(tmp_path, "ghost")
    assert len(base64.b64decode(ghost["s"])) == len(base64.b64decode(real["s"])) == 32
    assert ghost["i"] == real["i"] == "8192"
    # Another process (another worker, a restart) answers the same salt for the name...
    assert server_first(tmp_path, "ghost")["s"] == ghost["s"]
    # ...and another name gets another salt.
    assert server_first(tmp_path, "ghost2")["s"] != ghost["s"]


def test_unknown_users_take_the_shape_most_stored_credentials_have(tmp_path: Path) -> None:
    # Salts as Kafka's Java tools make them: base-36 text; most users at 4096 rounds.
    for i in range(3):
        add(tmp_path, f"java{i}", secrets.token_hex(13)[:26].encode(), 4096)
    add(tmp_path, "odd", secrets.token_bytes(64), 8192)
    ghost = server_first(tmp_path, "ghost")
    salt = base64.b64decode(ghost["s"])
    assert len(salt) == 26
    assert salt.isascii()
    assert salt.isalnum()
    assert ghost["i"] == "4096"


def test_with_no_users_the_default_shape_is_what_users_add_makes(tmp_path: Path) -> None:
    ghost = server_first(tmp_path, "ghost")
    assert len(base64.b64decode(ghost["s"])) == CredentialShape().salt_length == 32
    assert ghost["i"] == "8192"


def test_the_secret_is_made_once_private_and_kept(tmp_path: Path) -> None:
    first = CredentialFile.in_data_dir(tmp_path).secret()
    path = tmp_path / SECRET_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(first) == 32
    assert CredentialFile.in_data_dir(tmp_path).secret() == first
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
