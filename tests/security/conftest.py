from __future__ import annotations

import pytest

from clientmetrics.security.credentials import ScramCredential, derive


class MemoryCredentials:
    """A ``CredentialLookup`` over a dict, for the mechanisms' tests."""

    def __init__(self) -> None:
        self.users: dict[str, dict[str, ScramCredential]] = {}

    def add(self, user: str, password: str, *, iterations: int = 4096) -> None:
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            self.users.setdefault(user, {})[mechanism] = derive(
                mechanism, password, salt=(user.encode() * 16)[:16], iterations=iterations
            )

    def scram(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.users.get(user, {}).get(mechanism)


@pytest.fixture
def credentials() -> MemoryCredentials:
    store = MemoryCredentials()
    store.add("alice", "alice-secret")
    return store
