"""``clientmetrics users``: manage the SCRAM credentials SASL listeners check.

Credentials live in ``DATA/credentials.json`` as Kafka stores them (salted, no
clear-text password); a running gateway sees changes without a restart.
"""

from __future__ import annotations

import secrets
import sys
from pathlib import Path
from typing import NoReturn

import click

from clientmetrics.cli_options import DescribedDefault, data_dir_option
from clientmetrics.security.credentials import (
    DEFAULT_ITERATIONS,
    SCRAM_MECHANISMS,
    CredentialError,
    derive,
    validate_user_name,
)
from clientmetrics.store.credentials import CredentialFile

SALT_BYTES = 32
_data_dir = data_dir_option("The gateway's data directory", required=True)
_mechanisms = click.option(
    "--mechanism",
    "mechanisms",
    multiple=True,
    type=click.Choice(list(SCRAM_MECHANISMS), case_sensitive=False),
    cls=DescribedDefault,
    show_default="both",
    help="SCRAM mechanism (repeatable).",
)


def _fail(message: str) -> NoReturn:
    click.echo(f"clientmetrics users: {message}", err=True)
    sys.exit(1)


def _read_password(password: str | None, password_stdin: bool) -> str:
    if (password is None) == (not password_stdin):
        raise click.UsageError("give exactly one of --password and --password-stdin")
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    assert password is not None
    if not password:
        raise click.UsageError("the password must not be empty")
    return password


@click.group()
def users() -> None:
    """Manage SCRAM users (PLAIN checks the same credentials)."""


@users.command("add")
@click.argument("name")
@_data_dir
@click.option("--password", help="The password (visible to other local users: prefer stdin)")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input")
@_mechanisms
@click.option(
    "--iterations",
    type=int,
    default=DEFAULT_ITERATIONS,
    show_default=True,
    help="PBKDF2 iterations (4096-16384)",
)
def add(
    name: str,
    data_dir: Path,
    password: str | None,
    password_stdin: bool,
    mechanisms: tuple[str, ...],
    iterations: int,
) -> None:
    """Add user NAME, or replace its credentials."""
    secret = _read_password(password, password_stdin)
    chosen = tuple(m.upper() for m in mechanisms) or tuple(SCRAM_MECHANISMS)
    try:
        validate_user_name(name)
        creds = {
            m: derive(m, secret, salt=secrets.token_bytes(SALT_BYTES), iterations=iterations)
            for m in chosen
        }
        CredentialFile.in_data_dir(data_dir).upsert(name, creds)
    except CredentialError as exc:
        _fail(str(exc))
    click.echo(f"user {name}: {', '.join(chosen)} set")


@users.command("remove")
@click.argument("name")
@_data_dir
@_mechanisms
def remove(name: str, data_dir: Path, mechanisms: tuple[str, ...]) -> None:
    """Remove user NAME (or only the given mechanisms' credentials)."""
    chosen = tuple(m.upper() for m in mechanisms) or None
    try:
        removed = CredentialFile.in_data_dir(data_dir).remove(name, chosen)
    except CredentialError as exc:
        _fail(str(exc))
    if not removed:
        _fail(f"no such user: {name}")
    click.echo(f"user {name}: removed")


@users.command("list")
@_data_dir
def list_users(data_dir: Path) -> None:
    """List users with their mechanisms and iteration counts (never the keys)."""
    try:
        found = CredentialFile.in_data_dir(data_dir).users()
    except CredentialError as exc:
        _fail(str(exc))
    for name, mechs in sorted(found.items()):
        described = ",".join(f"{m}=iterations={c.iterations}" for m, c in sorted(mechs.items()))
        click.echo(f"{name}\t{described}")
