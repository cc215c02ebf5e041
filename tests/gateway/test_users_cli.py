"""``clientmetrics users``: add, list, remove; one line and exit 1 on errors."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from clientmetrics.cli import cli
from clientmetrics.security import AuthenticationFailed, SaslConfig, build_sasl_server
from clientmetrics.store.credentials import CredentialFile


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), input=stdin)
    return result.exit_code, result.stdout, result.stderr


def authenticates(data_dir: Path, user: str, password: str) -> bool:
    server = build_sasl_server(
        SaslConfig(("PLAIN",)), CredentialFile.in_data_dir(data_dir), seed=b"k" * 16
    )
    exchange = server.start("PLAIN")
    try:
        exchange.respond(f"\0{user}\0{password}".encode(), now_ms=0)
    except AuthenticationFailed:
        return False
    return exchange.outcome is not None


def test_add_list_remove(tmp_path: Path) -> None:
    d = str(tmp_path)
    assert run("users", "add", "alice", "--data-dir", d, "--password", "pw-a")[0] == 0
    code, out, _ = run(
        "users",
        "add",
        "bob",
        "--data-dir",
        d,
        "--password-stdin",
        "--mechanism",
        "SCRAM-SHA-512",
        "--iterations",
        "4096",
        stdin="pw-b\n",
    )
    assert code == 0
    assert out == "user bob: SCRAM-SHA-512 set\n"
    code, out, _ = run("users", "list", "--data-dir", d)
    assert out.splitlines() == [
        "alice\tSCRAM-SHA-256=iterations=8192,SCRAM-SHA-512=iterations=8192",
        "bob\tSCRAM-SHA-512=iterations=4096",
    ]
    assert authenticates(tmp_path, "bob", "pw-b")
    assert not authenticates(tmp_path, "bob", "pw-b\n")
    assert run("users", "remove", "bob", "--data-dir", d)[0] == 0
    assert not authenticates(tmp_path, "bob", "pw-b")
    assert authenticates(tmp_path, "alice", "pw-a")


def test_errors_are_one_line_and_non_zero(tmp_path: Path) -> None:
    d = str(tmp_path)
    code, _, err = run("users", "remove", "ghost", "--data-dir", d)
    assert (code, err) == (1, "clientmetrics users: no such user: ghost\n")
    code, _, err = run(
        "users", "add", "x", "--data-dir", d, "--password", "p", "--iterations", "100"
    )
    assert (code, err) == (
        1,
        "clientmetrics users: iterations must be between 4096 and 16384, got 100\n",
    )
    code, _, err = run("users", "add", "x", "--data-dir", d)
    assert code == 2
    assert "exactly one of --password and --password-stdin" in err
    (tmp_path / "credentials.json").write_text("nonsense")
    code, _, err = run("users", "list", "--data-dir", d)
    assert code == 1
    assert err.startswith("clientmetrics users: ")
    assert err.count("\n") == 1
