"""Kafka client properties in librdkafka's names (``investigate watch --topic``'s consumer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clientmetrics.client import librdkafka_properties
from clientmetrics.errors import ConfigurationError
from tests.tlsfiles import TestCA

PLAIN_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="ops" '
    'password="s3cret";'
)


def test_java_names_become_librdkafka_names(tmp_path: Path) -> None:
    ca = TestCA(tmp_path)
    props = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": PLAIN_JAAS,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca.ca),
    }
    assert librdkafka_properties(props) == {
        "security.protocol": "sasl_ssl",
        "ssl.ca.location": str(ca.ca),
        "ssl.endpoint.identification.algorithm": "https",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "ops",
        "sasl.password": "s3cret",
    }


def test_a_pem_keystore_is_both_certificate_and_key(tmp_path: Path) -> None:
    ca = TestCA(tmp_path)
    client = ca.issue("client")
    keystore = tmp_path / "client-keystore.pem"
    keystore.write_bytes(client.certificate.read_bytes() + client.private_key.read_bytes())
    props = {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca.ca),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.endpoint.identification.algorithm": "",
    }
    assert librdkafka_properties(props) == {
        "security.protocol": "ssl",
        "ssl.ca.location": str(ca.ca),
        "ssl.certificate.location": str(keystore),
        "ssl.key.location": str(keystore),
        "ssl.endpoint.identification.algorithm": "none",
    }


def test_scram_and_plaintext() -> None:
    props = {
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "ops",
        "sasl.password": "s3cret",
    }
    assert librdkafka_properties(props) == {
        "security.protocol": "sasl_plaintext",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "ops",
        "sasl.password": "s3cret",
    }
    assert librdkafka_properties({}) == {"security.protocol": "plaintext"}


@pytest.mark.parametrize(
    ("props", "message"),
    [
        (
            {"security.protocol": "SSL", "ssl.truststore.location": "/x.jks"},
            "ssl.truststore.type=JKS is not supported",
        ),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.token.endpoint.url": "file:///tmp/token",
            },
            "OAUTHBEARER with a token file is not supported for reading a topic",
        ),
        ({"security.protocol": "SASL_PLAINTEXT"}, "sasl.mechanism=GSSAPI is not supported"),
    ],
)
def test_what_cannot_be_translated_is_one_clear_error(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        librdkafka_properties(props)
