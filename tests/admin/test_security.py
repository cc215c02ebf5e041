"""SSL and SASL/PLAIN through ``--command-config``, against a front relaying to a gateway."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from clientmetrics.admin import (
    AdminAuthenticationError,
    AdminConfig,
    AsyncAdmin,
    SaslPlain,
    parse_properties,
)
from clientmetrics.wire import ErrorCode
from tests.admin.front import Front, make_certificate
from tests.admin.tool import list_with, run_tool
from tests.procs import GatewayProcess

pytestmark = pytest.mark.integration

PREFIX = "Error while executing client metrics command : "
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="alice" password="{password}";'
)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_certificate(tmp_path_factory.mktemp("tls"))


def server_context(certificate: tuple[Path, Path]) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(*certificate)
    return context


def front(gateway: GatewayProcess, **kwargs: object) -> Iterator[Front]:
    started = Front(("127.0.0.1", gateway.port), **kwargs).start()  # type: ignore[arg-type]
    yield started
    started.stop()


@pytest.fixture
def tls_front(gateway: GatewayProcess, certificate: tuple[Path, Path]) -> Iterator[Front]:
    yield from front(gateway, ssl_context=server_context(certificate))


@pytest.fixture
def sasl_front(gateway: GatewayProcess) -> Iterator[Front]:
    yield from front(gateway, users={"alice": "s3cret"})


@pytest.fixture
def sasl_ssl_front(gateway: GatewayProcess, certificate: tuple[Path, Path]) -> Iterator[Front]:
    yield from front(gateway, ssl_context=server_context(certificate), users={"alice": "s3cret"})


def test_ssl_with_a_pem_truststore(
    gateway: GatewayProcess, tls_front: Front, certificate: tuple[Path, Path], tmp_path: Path
) -> None:
    run_tool(
        "--bootstrap-server",
        gateway.bootstrap,
        "--alter",
        "--name",
        "tls-sub",
        "--interval",
        "1000",
    )
    props = (
        "security.protocol=SSL\nssl.truststore.type=PEM\n"
        f"ssl.truststore.location={certificate[0]}\n"
    )
    code, out, err = list_with(tls_front.port, tmp_path, props)
    assert (code, err) == (0, "")
    assert "tls-sub" in out.splitlines()


def test_ssl_rejects_an_untrusted_certificate(tls_front: Front, tmp_path: Path) -> None:
    code, out, err = list_with(tls_front.port, tmp_path, "security.protocol=SSL\n")
    assert (code, err) == (1, "")
    assert out.startswith(
        f"{PREFIX}Could not connect to bootstrap server 127.0.0.1:{tls_front.port} "
        "(SSL handshake failed: CERTIFICATE_VERIFY_FAILED"
    )


def test_sasl_plaintext_plain_with_jaas_config(sasl_front: Front, tmp_path: Path) -> None:
    props = "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n" + (
        "sasl.jaas.config=" + JAAS.format(password="s3cret") + "\n"
    )
    code, _out, err = list_with(sasl_front.port, tmp_path, props)
    assert (code, err) == (0, "")
    assert sasl_front.sasl_requests == [17, 36]


def test_sasl_wrong_password_is_kafkas_message_and_code(sasl_front: Front, tmp_path: Path) -> None:
    props = "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n" + (
        "sasl.username=alice\nsasl.password=wrong\n"
    )
    code, out, err = list_with(sasl_front.port, tmp_path, props)
    assert (code, err) == (1, "")
    assert out == (f"{PREFIX}Authentication failed: Invalid username or password\n")


async def test_sasl_ssl_through_the_python_api(
    sasl_ssl_front: Front, certificate: tuple[Path, Path]
) -> None:
    props = parse_properties(
        "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={certificate[0]}\n"
        "sasl.jaas.config=" + JAAS.format(password="s3cret") + "\n"
    )
    config = AdminConfig.from_properties(f"127.0.0.1:{sasl_ssl_front.port}", props)
    assert config.sasl == SaslPlain("alice", "s3cret")
    assert "s3cret" not in repr(config)
    async with AsyncAdmin(config) as admin:
        await admin.alter("sasl-ssl-sub", {"metrics": "org.apache.kafka."})
        assert "sasl-ssl-sub" in await admin.list_client_metrics_resources()
    bad = AdminConfig.from_properties(
        f"127.0.0.1:{sasl_ssl_front.port}", {**props, "sasl.jaas.config": JAAS.format(password="x")}
    )
    with pytest.raises(AdminAuthenticationError) as info:
        async with AsyncAdmin(bad):
            pass
    assert info.value.error_code is ErrorCode.SASL_AUTHENTICATION_FAILED
