"""The credential file: atomic updates, reloaded by readers, no clear-text passwords."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from clientmetrics.security import AuthenticationFailed, SaslConfig, build_sasl_server, derive
from clientmetrics.security.credentials import CredentialError
from clientmetrics.store.credentials import CredentialFile


def plain(lookup: CredentialFile, user: str, password: str) -> str | None:
    server = build_sasl_server(SaslConfig(("PLAIN",)), lookup, seed=b"k" * 16)
    exchange = server.start("PLAIN")
    try:
        exchange.respond(f"\0{user}\0{password}".encode(), now_ms=0)
    except AuthenticationFailed:
        return None
    return exchange.outcome.principal if exchange.outcome else None


def test_writer_and_reader_processes_share_the_file(tmp_path: Path) -> None:
    writer = CredentialFile.in_data_dir(tmp_path)
    reader = CredentialFile.in_data_dir(tmp_path)  # e.g. the running gateway
    assert plain(reader, "alice", "pw-alice") is None
    writer.upsert(
        "alice",
        {
            "SCRAM-SHA-256": derive(
                "SCRAM-SHA-256", "pw-alice", salt=os.urandom(16), iterations=4096
            )
        },
    )
    assert plain(reader, "alice", "pw-alice") == "User:alice"
    assert plain(reader, "alice", "wrong") is None
    text = (tmp_path / "credentials.json").read_text()
    assert "pw-alice" not in text
    assert stat.S_IMODE((tmp_path / "credentials.json").stat().st_mode) == 0o600
    assert writer.remove("alice")
    assert plain(reader, "alice", "pw-alice") is None
    assert not writer.remove("alice")
    assert not list(tmp_path.glob("*.tmp"))


def test_removing_one_mechanism_keeps_the_other(tmp_path: Path) -> None:
    store = CredentialFile.in_data_dir(tmp_path)
    creds = {
        m: derive(m, "pw", salt=b"s" * 16, iterations=4096)
        for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
    }
    store.upsert("bob", creds)
    assert store.remove("bob", ("SCRAM-SHA-256",))
    assert set(store.users()["bob"]) == {"SCRAM-SHA-512"}
    assert store.remove("bob", ("SCRAM-SHA-512",))
    assert store.users() == {}


def test_a_corrupt_file_is_reported_and_authenticates_nobody(tmp_path: Path) -> None:
    (tmp_path / "credentials.json").write_text("{broken")
    store = CredentialFile.in_data_dir(tmp_path)
    with pytest.raises(CredentialError, match=r"credentials\.json"):
        store.users()
    assert store.scram("alice", "SCRAM-SHA-256") is None
