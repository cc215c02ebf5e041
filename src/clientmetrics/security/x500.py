"""A certificate's subject as Kafka prints it: ``X500Principal.getName()`` (RFC 2253).

Kafka's default SSL principal is ``User:`` plus this text, and its
``ssl.principal.mapping.rules`` match against it, so the gateway must produce
the same characters the JVM does, quirks included:

- RDNs in reverse order of the certificate (most specific first), the values of
  a multi-valued RDN joined with ``+`` in certificate order;
- keywords only for CN, C, L, ST, O, OU, STREET, DC and UID; any other
  attribute (emailAddress, serialNumber, ...) as its dotted OID with ``#`` and
  the hex of the value's DER encoding;
- string values (Printable, T61, IA5, General, BMP, UTF8) taken as UTF-8 bytes
  (so a BMPString shows its zero bytes as ``\\00``); ``, = + < > # ; " \\``
  escaped with a backslash anywhere, leading and trailing spaces escaped too.

Only the DER needed to reach the subject is read; anything malformed raises
``CertificateError``. Sans-IO: bytes in, text out.
"""

from __future__ import annotations

from clientmetrics.errors import ClientMetricsError

__all__ = ["CertificateError", "subject_name"]

_SEQUENCE, _SET, _OID, _INTEGER, _VERSION = 0x30, 0x31, 0x06, 0x02, 0xA0
#: Attribute types Java names by keyword in RFC 2253 output.
_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
#: DER tags of the values Java prints as text: Printable, T61, IA5, General, BMP, UTF8.
_STRING_TAGS = frozenset({0x13, 0x14, 0x16, 0x1B, 0x1E, 0x0C})
_ESCAPED = frozenset(',=+<>#;"\\')


class CertificateError(ClientMetricsError):
    """A certificate whose DER cannot be read."""


def _element(der: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the DER element at ``pos``."""
    if pos + 2 > end:
        raise CertificateError("truncated DER element")
    tag, first = der[pos], der[pos + 1]
    pos += 2
    if first < 0x80:
        length = first
    else:
        count = first & 0x7F
        if not 0 < count <= 4 or pos + count > end:
            raise CertificateError("bad DER length")
        length = int.from_bytes(der[pos : pos + count], "big")
        pos += count
    if pos + length > end:
        raise CertificateError("DER element runs past its parent")
    return tag, pos, pos + length


def _expect(der: bytes, pos: int, end: int, tag: int) -> tuple[int, int]:
    found, start, stop = _element(der, pos, end)
    if found != tag:
        raise CertificateError(f"expected DER tag {tag:#x}, found {found:#x}")
    return start, stop


def _oid(content: bytes) -> str:
    if not content:
        raise CertificateError("empty OID")
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = arcs[0]
    head = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    return ".".join(str(arc) for arc in head + arcs[1:])


def _escape(text: str) -> str:
    chars: list[str] = []
    for char in text:
        if char in _ESCAPED:
            chars.append("\\" + char)
        elif char == "\0":
            chars.append("\\00")
        else:
            chars.append(char)
    joined = "".join(chars)
    # Leading and trailing spaces (and CRs) are escaped one by one, after the rest.
    lead = len(joined) - len(joined.lstrip(" \r"))
    trail = len(joined.rstrip(" \r"))
    if trail <= lead:
        return "".join("\\" + c for c in joined)
    head = "".join("\\" + c for c in joined[:lead])
    tail = "".join("\\" + c for c in joined[trail:])
    return head + joined[lead:trail] + tail


def _attribute(der: bytes, start: int, end: int) -> str:
    oid_start, oid_end = _expect(der, start, end, _OID)
    oid = _oid(der[oid_start:oid_end])
    tag, value_start, value_end = _element(der, oid_end, end)
    keyword = _KEYWORDS.get(oid)
    if keyword is None or tag not in _STRING_TAGS:
        return f"{keyword or oid}=#{der[oid_end:value_end].hex()}"
    return f"{keyword}={_escape(der[value_start:value_end].decode('utf-8', 'replace'))}"


def _name(der: bytes, start: int, end: int) -> str:
    rdns: list[str] = []
    pos = start
    while pos < end:
        set_start, set_end = _expect(der, pos, end, _SET)
        values: list[str] = []
        inner = set_start
        while inner < set_end:
            seq_start, seq_end = _expect(der, inner, set_end, _SEQUENCE)
            values.append(_attribute(der, seq_start, seq_end))
            inner = seq_end
        rdns.append("+".join(values))
        pos = set_end
    return ",".join(reversed(rdns))


def subject_name(certificate_der: bytes) -> str:
    """The subject of a DER X.509 certificate, as ``X500Principal.getName()`` prints it."""
    der = bytes(certificate_der)
    cert_start, cert_end = _expect(der, 0, len(der), _SEQUENCE)
    pos, tbs_end = _expect(der, cert_start, cert_end, _SEQUENCE)
    tag, _, stop = _element(der, pos, tbs_end)
    if tag == _VERSION:
        pos = stop
    # serialNumber, signature algorithm, issuer, validity, then the subject.
    for expected in (_INTEGER, _SEQUENCE, _SEQUENCE, _SEQUENCE):
        _, pos = _expect(der, pos, tbs_end, expected)
    name_start, name_end = _expect(der, pos, tbs_end, _SEQUENCE)
    return _name(der, name_start, name_end)
