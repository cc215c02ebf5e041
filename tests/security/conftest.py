from __future__ import annotations

from collections.abc import Iterator

import pytest

from clientmetrics.security import OAuthBearerConfig, SaslConfig, build_sasl_server
from clientmetrics.security.credentials import (
    CredentialShape,
    ScramCredential,
    derive,
    typical_shape,
)
from clientmetrics.store.credentials import CredentialFile
from tests.admin.front import Front
from tests.procs import GatewayProcess
from tests.security.jwts import AUDIENCE, ISSUER, Signer


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

    def typical_shape(self, mechanism: str) -> CredentialShape:
        return typical_shape(self.users, mechanism)


@pytest.fixture
def credentials() -> MemoryCredentials:
    store = MemoryCredentials()
    store.add("alice", "alice-secret")
    return store


@pytest.fixture(scope="module")
def signer() -> Signer:
    return Signer()


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory, signer: Signer) -> Iterator[Front]:
    """A SASL front (the gateway's mechanisms) before a real gateway; alice has alice-pw."""
    data = tmp_path_factory.mktemp("sasl")
    gw = GatewayProcess(data).start()
    credentials = CredentialFile.in_data_dir(data)
    credentials.upsert(
        "alice",
        {
            m: derive(m, "alice-pw", salt=m.encode().ljust(16, b"."), iterations=4096)
            for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
        },
    )
    config = SaslConfig(
        ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"),
        OAuthBearerConfig("test", ISSUER, AUDIENCE),
    )
    server = build_sasl_server(config, credentials, seed=b"r" * 16, jwks=signer.jwks())
    started = Front(("127.0.0.1", gw.port), sasl_server=server).start()
    yield started
    started.stop()
    gw.stop()
