"""Listeners: PROTOCOL://HOST:PORT, TLS on SSL listeners, certificates reloaded in place."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]
from cryptography.hazmat.primitives import serialization

from clientmetrics.errors import ConfigurationError
from clientmetrics.gateway.config import Address, Listener
from clientmetrics.gateway.config_load import load_config
from clientmetrics.gateway.server import Gateway
from clientmetrics.gateway.tls import ClientAuth
from clientmetrics.security.protocol import SecurityProtocol
from clientmetrics.store.memory import MemorySubscriptionStore
from tests.procs import MIN_DEADLINE_S
from tests.tlsfiles import TestCA, served_serial, write_atomically


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gw.toml"
    path.write_text(text)
    return path


def tls_toml(ca: TestCA, server: str = "server", extra: str = "") -> str:
    pem = ca.root / f"{server}.crt", ca.root / f"{server}.key"
    return f'[tls]\ncertificate = "{pem[0]}"\nprivate_key = "{pem[1]}"\nca = "{ca.ca}"\n' + extra


def test_listen_takes_protocols_a_list_and_bare_host_port(tmp_path: Path) -> None:
    ca = TestCA(tmp_path / "pki")
    ca.issue("server")
    path = write(
        tmp_path,
        '[gateway]\nlisten = ["0.0.0.0:9092", "ssl://127.0.0.1:9093"]\n' + tls_toml(ca),
    )
    cfg = load_config(path, data_dir=tmp_path, environ={})
    assert cfg.listeners == (
        Listener(SecurityProtocol.PLAINTEXT, Address("0.0.0.0", 9092)),
        Listener(SecurityProtocol.SSL, Address("127.0.0.1", 9093)),
    )
    assert [listener.name for listener in cfg.listeners] == ["PLAINTEXT", "SSL"]
    assert cfg.listen == Address("0.0.0.0", 9092)
    assert cfg.tls is not None
    assert cfg.tls.client_auth is ClientAuth.NONE
    # the command line (a repeated --listen) replaces the file's list
    cli = load_config(
        path, data_dir=tmp_path, environ={}, overrides={"listen": ["SSL://127.0.0.1:0"]}
    )
    assert [str(listener) for listener in cli.listeners] == ["SSL://127.0.0.1:0"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[gateway]\nlisten = "SSL://127.0.0.1:9093"\n', "needs a [tls] section"),
        ('[gateway]\nlisten = "TLS://127.0.0.1:9093"\n', "unknown security protocol 'TLS'"),
        ('[gateway]\nlisten = ["1.2.3.4:1", "PLAINTEXT://:2"]\n', "more than one PLAINTEXT"),
        (
            '[gateway]\nlisten = "SASL_PLAINTEXT://127.0.0.1:1"\n',
            "needs a [sasl] section naming its mechanisms",
        ),
        (
            '[gateway]\nlisten = ["127.0.0.1:1", "SSL://127.0.0.1:2"]\nupstream = "h:9092"\n'
            '[tls]\ncertificate = "c"\nprivate_key = "k"\n',
            "proxy mode serves exactly one listener",
        ),
        ('[tls]\ncertificate = "c"\n', "certificate and private_key go together"),
        ('[tls]\ncertificate = "c"\nprivate_key = "k"\nclient_auth = "yes"\n', "client_auth"),
        ('[tls]\ncertificate = "c"\nprivate_key = "k"\nclient_auth = "required"\n', "needs ca"),
        ('[tls]\ncertificate = "c"\nprivate_key = "k"\ncolour = 1\n', "[tls] colour"),
        (
            '[tls]\ncertificate = "c"\nprivate_key = "k"\nprincipal_mapping_rules = "RULE:x"\n',
            "invalid principal mapping rule",
        ),
        ('[upstream]\nca = "ca.pem"\n', "need security_protocol SSL or SASL_SSL"),
        ('[upstream]\nsecurity_protocol = "SSL"\nsasl_mechanism = "PLAIN"\n', "sasl_* settings"),
        (
            '[upstream]\nsecurity_protocol = "SASL_SSL"\nsasl_mechanism = "GSSAPI"\n'
            'sasl_username = "u"\nsasl_password = "p"\n',
            "sasl_mechanism must be one of",
        ),
        (
            '[gateway]\nupstream = "h:9092"\n[upstream]\nsecurity_protocol = "SASL_SSL"\n',
            "the topic store on a SASL upstream needs",
        ),
    ],
)
def test_bad_listener_and_tls_settings_are_one_clear_error(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        load_config(write(tmp_path, text), data_dir=tmp_path, environ={})


def test_upstream_settings_in_librdkafka_names(tmp_path: Path) -> None:
    text = (
        '[gateway]\nupstream = "broker:9093"\n'
        '[upstream]\nsecurity_protocol = "sasl_ssl"\nca = "/pki/ca.pem"\n'
        'certificate = "/pki/gw.crt"\nprivate_key = "/pki/gw.key"\ncheck_hostname = false\n'
        'private_key_password = "kp"\n'
        'sasl_mechanism = "SCRAM-SHA-512"\nsasl_username = "gw"\nsasl_password = "s3cret"\n'
    )
    cfg = load_config(write(tmp_path, text), data_dir=tmp_path, environ={})
    assert cfg.upstream_security.librdkafka() == {
        "security.protocol": "sasl_ssl",
        "ssl.ca.location": "/pki/ca.pem",
        "ssl.certificate.location": "/pki/gw.crt",
        "ssl.key.location": "/pki/gw.key",
        "ssl.key.password": "kp",
        "ssl.endpoint.identification.algorithm": "none",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "gw",
        "sasl.password": "s3cret",
    }
    assert "s3cret" not in repr(cfg)
    assert "'kp'" not in repr(cfg)


def test_unreadable_certificate_is_a_configuration_error(tmp_path: Path) -> None:
    ca = TestCA(tmp_path / "pki")
    ca.issue("server")
    (ca.root / "server.key").write_text("not a key")
    text = '[gateway]\nlisten = "SSL://127.0.0.1:0"\n' + tls_toml(ca)
    cfg = load_config(write(tmp_path, text), data_dir=tmp_path, environ={})
    with pytest.raises(ConfigurationError, match="cannot load TLS files"):
        Gateway(cfg, store=MemorySubscriptionStore(), exporters=[])


async def test_encrypted_private_key_with_its_password(tmp_path: Path) -> None:
    ca = TestCA(tmp_path / "pki")
    server = ca.issue("server")
    key = serialization.load_pem_private_key(server.private_key.read_bytes(), password=None)
    server.private_key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"k3y-pass"),
        )
    )
    listen = '[gateway]\nlisten = "SSL://127.0.0.1:0"\n'
    wrong = load_config(
        write(tmp_path, listen + tls_toml(ca, extra='private_key_password = "nope"\n')),
        data_dir=tmp_path,
        environ={},
    )
    with pytest.raises(ConfigurationError, match="cannot load TLS files"):
        Gateway(wrong, store=MemorySubscriptionStore(), exporters=[])
    gateway = await start(
        tmp_path, listen + tls_toml(ca, extra='private_key_password = "k3y-pass"\n')
    )
    try:
        served = await asyncio.to_thread(served_serial, gateway.port, ca.client_context())
        assert served == server.serial
    finally:
        await gateway.close()


async def start(tmp_path: Path, text: str) -> Gateway:
    cfg = load_config(write(tmp_path, text), data_dir=tmp_path / "data", environ={})
    gateway = Gateway(cfg, store=MemorySubscriptionStore(), exporters=[])
    await gateway.start()
    return gateway


def broker_ports(bootstrap: str, **settings: str) -> list[int]:
    """Metadata as librdkafka sees it: the port of each broker it is told about."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3, **settings})
    metadata = admin.list_topics(timeout=MIN_DEADLINE_S)
    return [broker.port for broker in metadata.brokers.values()]


async def test_every_listener_serves_and_metadata_names_the_one_connected_on(
    tmp_path: Path,
) -> None:
    ca = TestCA(tmp_path / "pki")
    server = ca.issue("server")
    gateway = await start(
        tmp_path,
        '[gateway]\nlisten = ["127.0.0.1:0", "SSL://127.0.0.1:0"]\n' + tls_toml(ca),
    )
    try:
        plain, tls = gateway.ports["PLAINTEXT"], gateway.ports["SSL"]
        assert plain != tls
        assert await asyncio.to_thread(broker_ports, f"127.0.0.1:{plain}") == [plain]
        ssl_ports = await asyncio.to_thread(
            broker_ports,
            f"127.0.0.1:{tls}",
            **{"security.protocol": "ssl", "ssl.ca.location": str(ca.ca)},
        )
        assert ssl_ports == [tls]
        assert await asyncio.to_thread(served_serial, tls, ca.client_context()) == server.serial
    finally:
        await gateway.close()


async def test_certificate_reload_on_request_and_a_bad_file_keeps_the_old_one(
    tmp_path: Path,
) -> None:
    ca = TestCA(tmp_path / "pki")
    first = ca.issue("server")
    gateway = await start(
        tmp_path,
        '[gateway]\nlisten = "SSL://127.0.0.1:0"\n' + tls_toml(ca, extra="reload_check_s = 0\n"),
    )
    context = ca.client_context()
    port = gateway.port
    try:
        assert await asyncio.to_thread(served_serial, port, context) == first.serial
        second = ca.issue("server")  # rotated in place
        assert await asyncio.to_thread(served_serial, port, context) == first.serial
        gateway.reload_tls()  # what SIGHUP calls
        assert await asyncio.to_thread(served_serial, port, context) == second.serial
        # a key that does not belong to the certificate is refused; the old pair stays
        other = ca.issue("other")
        write_atomically(second.certificate, ca.issue("third").certificate.read_bytes())
        write_atomically(second.private_key, other.private_key.read_bytes())
        gateway.reload_tls()
        assert await asyncio.to_thread(served_serial, port, context) == second.serial
        write_atomically(second.private_key, b"garbage")
        gateway.reload_tls()
        assert await asyncio.to_thread(served_serial, port, context) == second.serial
    finally:
        await gateway.close()


async def test_changed_files_are_picked_up_without_a_signal(tmp_path: Path) -> None:
    ca = TestCA(tmp_path / "pki")
    first = ca.issue("server")
    gateway = await start(
        tmp_path,
        '[gateway]\nlisten = "SSL://127.0.0.1:0"\n' + tls_toml(ca, extra="reload_check_s = 0.1\n"),
    )
    context = ca.client_context()
    try:
        assert await asyncio.to_thread(served_serial, gateway.port, context) == first.serial
        second = ca.issue("server")
        for _ in range(600):  # 60 s: generous, the reload tick runs late on a busy machine
            await asyncio.sleep(0.1)
            if await asyncio.to_thread(served_serial, gateway.port, context) == second.serial:
                break
        else:
            pytest.fail("the rotated certificate was not picked up")
    finally:
        await gateway.close()
