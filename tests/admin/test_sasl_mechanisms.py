"""SCRAM, OAUTHBEARER and PEM stores through ``--command-config``.

The front answers SASL with the gateway's own server mechanisms (``security``) and
relays everything else to a real gateway; certificates are made here with trustme.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from clientmetrics.security import OAuthBearerConfig, SaslConfig, build_sasl_server, derive
from clientmetrics.store.credentials import CredentialFile
from tests.admin.front import Front
from tests.admin.tool import list_with
from tests.procs import GatewayProcess
from tests.security.jwts import AUDIENCE, ISSUER, Signer
from tests.tlsfiles import server_context

pytestmark = pytest.mark.integration

PREFIX = "Error while executing client metrics command : "
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="alice" password="{password}";'
)


@pytest.fixture(scope="module")
def signer() -> Signer:
    return Signer()


@pytest.fixture(scope="module")
def sasl_front(
    gateway: GatewayProcess, tmp_path_factory: pytest.TempPathFactory, signer: Signer
) -> Iterator[Front]:
    credentials = CredentialFile.in_data_dir(tmp_path_factory.mktemp("creds"))
    credentials.upsert(
        "alice",
        {
            m: derive(m, "alice-pw", salt=m.encode().ljust(16, b"-"), iterations=4096)
            for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")
        },
    )
    config = SaslConfig(
        ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"),
        OAuthBearerConfig("test", ISSUER, AUDIENCE),
    )
    server = build_sasl_server(config, credentials, seed=b"f" * 16, jwks=signer.jwks())
    front = Front(("127.0.0.1", gateway.port), sasl_server=server).start()
    yield front
    front.stop()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_with_jaas_config(sasl_front: Front, tmp_path: Path, mechanism: str) -> None:
    before = len(sasl_front.principals)
    props = f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n"
    props += "sasl.jaas.config=" + SCRAM_JAAS.format(password="alice-pw") + "\n"
    assert list_with(sasl_front.port, tmp_path, props)[::2] == (0, "")
    assert sasl_front.principals[before:] == ["User:alice"]


def test_scram_librdkafka_style_and_wrong_password(sasl_front: Front, tmp_path: Path) -> None:
    props = "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
    assert (
        list_with(
            sasl_front.port, tmp_path, props + "sasl.username=alice\nsasl.password=alice-pw\n"
        )[0]
        == 0
    )
    code, out, err = list_with(
        sasl_front.port, tmp_path, props + "sasl.username=alice\nsasl.password=nope\n"
    )
    assert (code, err) == (1, "")
    assert out == (
        f"{PREFIX}Authentication failed during authentication due to invalid credentials "
        "with SASL mechanism SCRAM-SHA-512\n"
    )


def test_oauthbearer_token_from_a_file(sasl_front: Front, signer: Signer, tmp_path: Path) -> None:
    token_file = tmp_path / "token.jwt"
    props = (
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
        "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
        "required ;\n"
        f"sasl.oauthbearer.token.endpoint.url=file://{token_file}\n"
    )
    now = int(time.time())
    token_file.write_text(signer.token(now, sub="svc-reporter") + "\n")
    before = len(sasl_front.principals)
    assert list_with(sasl_front.port, tmp_path, props)[::2] == (0, "")
    assert sasl_front.principals[before:] == ["User:svc-reporter"]
    token_file.write_text(signer.token(now - 7200, sub="svc-reporter"))  # expired an hour ago
    code, out, _ = list_with(sasl_front.port, tmp_path, props)
    assert code == 1
    assert out == f'{PREFIX}{{"status":"invalid_token"}}\n'


def test_oauthbearer_needs_a_token_file(tmp_path: Path) -> None:
    props = "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
    code, _, err = list_with(1, tmp_path, props)
    assert code == 1
    assert err == (
        "sasl.mechanism=OAUTHBEARER needs sasl.oauthbearer.token.endpoint.url=file:///path/to/"
        "token (a JWT in a file); token endpoints over HTTP are not supported by this tool\n"
    )


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def mtls_front(gateway: GatewayProcess, ca: trustme.CA) -> Iterator[Front]:
    context = server_context(ca, require_client=True)
    front = Front(("127.0.0.1", gateway.port), ssl_context=context).start()
    yield front
    front.stop()


@pytest.mark.parametrize("style", ["java-pem", "librdkafka"])
def test_mutual_tls_with_pem_files(
    mtls_front: Front, ca: trustme.CA, tmp_path: Path, style: str
) -> None:
    ca_file, both, cert_file, key_file = (
        tmp_path / n for n in ("ca.pem", "both.pem", "c.pem", "k.pem")
    )
    ca.cert_pem.write_to_path(str(ca_file))
    client = ca.issue_cert("client-1")
    client.private_key_and_cert_chain_pem.write_to_path(str(both))
    client.cert_chain_pems[0].write_to_path(str(cert_file))
    client.private_key_pem.write_to_path(str(key_file))
    if style == "java-pem":
        props = (
            "security.protocol=SSL\nssl.truststore.type=PEM\n"
            f"ssl.truststore.location={ca_file}\nssl.keystore.type=PEM\nssl.keystore.location={both}\n"
        )
    else:
        props = (
            f"security.protocol=SSL\nssl.ca.location={ca_file}\n"
            f"ssl.certificate.location={cert_file}\nssl.key.location={key_file}\n"
        )
    assert list_with(mtls_front.port, tmp_path, props)[::2] == (0, "")
    # Without a client certificate the front refuses the handshake.
    code, out, _ = list_with(
        mtls_front.port, tmp_path, f"security.protocol=SSL\nssl.ca.location={ca_file}\n"
    )
    assert code == 1
    # TLS 1.3 refuses the missing certificate after the handshake: a disconnect.
    assert out == (
        f"{PREFIX}Could not connect to bootstrap server 127.0.0.1:{mtls_front.port} "
        "(disconnected before a response was received)\n"
    )


def test_half_a_librdkafka_key_pair_is_refused(tmp_path: Path) -> None:
    code, _, err = list_with(
        1, tmp_path, "security.protocol=SSL\nssl.certificate.location=/x.pem\n"
    )
    assert (code, err) == (
        1,
        "ssl.certificate.location and ssl.key.location must be set together\n",
    )
