"""Certificates made for one test (trustme): nothing checked in, nothing that expires."""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography import x509

from tests.procs import MIN_DEADLINE_S


@dataclass(frozen=True)
class Pem:
    """A certificate and its key as PEM files."""

    certificate: Path
    private_key: Path
    #: The serial number of the certificate as issued (the file may be replaced later).
    serial: int


class TestCA:
    """A throw-away CA writing PEM files into ``root``."""

    __test__ = False  # not a test class

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self._ca = trustme.CA()
        self.ca = root / "ca.pem"
        self._ca.cert_pem.write_to_path(str(self.ca))

    def issue(self, name: str, *, common_name: str | None = None, org: str = "Acme") -> Pem:
        """A certificate for 127.0.0.1 and localhost, subject ``CN=common_name,OU=..,O=org``."""
        leaf = self._ca.issue_cert(
            "localhost",
            "127.0.0.1",
            common_name=common_name,
            organization_name=org,
            organization_unit_name="Test",
        )
        chain = b"".join(b.bytes() for b in leaf.cert_chain_pems)
        serial = x509.load_pem_x509_certificate(chain).serial_number
        pem = Pem(self.root / f"{name}.crt", self.root / f"{name}.key", serial)
        write_atomically(pem.certificate, chain)
        write_atomically(pem.private_key, leaf.private_key_pem.bytes())
        return pem

    def client_context(self, client: Pem | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca))
        if client is not None:
            context.load_cert_chain(str(client.certificate), str(client.private_key))
        return context


def server_context(ca: trustme.CA, *, require_client: bool = False) -> ssl.SSLContext:
    """A TLS server's context with a certificate ``ca`` issued for 127.0.0.1 and localhost;
    with ``require_client``, clients must present one ``ca`` issued (mutual TLS)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    if require_client:
        ca.configure_trust(context)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def served_serial(port: int, context: ssl.SSLContext) -> int:
    """The serial number of the certificate a TLS server on 127.0.0.1 presents now."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=MIN_DEADLINE_S) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number
