"""Certificate subjects as Kafka prints them, and Kafka's principal mapping rules.

The expected subjects were printed by ``X509Certificate.getSubjectX500Principal()
.getName()`` (OpenJDK 17) for certificates built the same way; the mapping cases
are Kafka's (SslPrincipalMapperTest) plus ``replaceAll`` corner cases whose results
were printed by Java with Kafka's mapping code.
"""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from clientmetrics.errors import ConfigurationError
from clientmetrics.security.principal import NoMatchingRule, PrincipalMapper
from clientmetrics.security.x500 import CertificateError, subject_name

_KEY = ec.generate_private_key(ec.SECP256R1())


def _der(name: x509.Name) -> bytes:
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "issuer")]))
        .public_key(_KEY.public_key())
        .serial_number(7)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(hours=1))
        .sign(_KEY, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.DER)


def _attr(oid: x509.ObjectIdentifier, value: str) -> x509.NameAttribute:
    return x509.NameAttribute(oid, value)


SUBJECTS = [
    (
        x509.Name(
            [
                _attr(NameOID.COUNTRY_NAME, "US"),
                _attr(NameOID.ORGANIZATION_NAME, "Acme"),
                _attr(NameOID.ORGANIZATIONAL_UNIT_NAME, "Ops"),
                _attr(NameOID.COMMON_NAME, "client1"),
            ]
        ),
        "CN=client1,OU=Ops,O=Acme,C=US",
    ),
    (
        x509.Name(
            [
                _attr(NameOID.DOMAIN_COMPONENT, "example"),
                _attr(NameOID.EMAIL_ADDRESS, "a@b.c"),
                _attr(NameOID.USER_ID, "u1"),
                _attr(NameOID.STATE_OR_PROVINCE_NAME, "Bay"),
                _attr(NameOID.LOCALITY_NAME, "S F"),
                _attr(NameOID.SERIAL_NUMBER, "42"),
                _attr(NameOID.COMMON_NAME, ' Smith, John+X=<1>;#"\\ '),
            ]
        ),
        r"CN=\ Smith\, John\+X\=\<1\>\;\#\"\\\ ,2.5.4.5=#13023432,L=S F,ST=Bay,UID=u1,"
        r"1.2.840.113549.1.9.1=#16056140622e63,DC=example",
    ),
    (
        x509.Name(
            [
                x509.RelativeDistinguishedName(
                    [
                        _attr(NameOID.COMMON_NAME, "a"),
                        _attr(NameOID.ORGANIZATIONAL_UNIT_NAME, "b"),
                    ]
                ),
                x509.RelativeDistinguishedName([_attr(NameOID.ORGANIZATION_NAME, "Ünï")]),
            ]
        ),
        "O=Ünï,CN=a+OU=b",
    ),
    (
        x509.Name(
            [
                x509.NameAttribute(
                    NameOID.ORGANIZATION_NAME,
                    "Bmp",
                    _type=x509.name._ASN1Type.BMPString,  # type: ignore[attr-defined]
                ),
                _attr(NameOID.COMMON_NAME, "#lead"),
            ]
        ),
        r"CN=\#lead,O=\00B\00m\00p",
    ),
]


@pytest.mark.parametrize(("name", "expected"), SUBJECTS, ids=["plain", "odd", "multi", "bmp"])
def test_subject_name_is_what_java_prints(name: x509.Name, expected: str) -> None:
    assert subject_name(_der(name)) == expected


@pytest.mark.parametrize("cut", [0, 1, 10, 100])
def test_truncated_certificate_is_a_certificate_error(cut: int) -> None:
    der = _der(SUBJECTS[0][0])
    with pytest.raises(CertificateError):
        subject_name(der[:cut])


DUKE = "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Cupertino,ST=CA,C=US"


@pytest.mark.parametrize(
    ("rules", "subject", "expected"),
    [
        ("DEFAULT", DUKE, DUKE),
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "CN=kafka1,OU=ServiceUsers,O=Org,C=US", "kafka1"),
        (
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, DEFAULT",
            DUKE,
            DUKE,
        ),
        (
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
            DUKE,
            "duke@javasoft",
        ),
        (
            "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/U",
            DUKE,
            "DUKE@JAVASOFT",
        ),
        (
            r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT",
            r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz",
            r"Tkac\, Adam",
        ),
        # a slash in a pattern and a replacement is written \/
        (r"RULE:^CN=(\w+)\/(\w+)$/$2\/$1/", "CN=team/app", "app/team"),
        # a reference to a group that does not exist stays literal; \$ is a dollar
        (r"RULE:^CN=(\w+)$/$1-$2-\$/", "CN=svc", "svc-$2-$"),
        # Java reads $12 as group 1 then "2" when there are fewer than 12 groups
        ("RULE:^CN=(\\w)(\\w)$/$12/", "CN=ab", "a2"),
        # replaceAll also replaces the empty match at the end of the subject
        ("RULE:.*/x/", "CN=a", "xx"),
        ("RULE:^OU=.*$/nope/,RULE:^CN=(.*)$/$1/", "CN=second", "second"),
    ],
)
def test_mapping_rules(rules: str, subject: str, expected: str) -> None:
    assert PrincipalMapper(rules).name(subject) == expected


def test_rules_given_as_a_list_and_principal_form() -> None:
    mapper = PrincipalMapper(["RULE:^CN=([^,]+),O=Acme$/$1/L", "DEFAULT"])
    assert mapper.rules == ("RULE:^CN=([^,]+),O=Acme$/$1/L", "DEFAULT")
    assert mapper.principal("CN=Client1,O=Acme") == "User:client1"
    assert mapper.principal("CN=x,O=Other") == "User:CN=x,O=Other"
    assert mapper.principal(None) == "User:ANONYMOUS"


def test_no_rule_applies() -> None:
    with pytest.raises(NoMatchingRule, match="CN=x"):
        PrincipalMapper("RULE:^CN=y$/y/").name("CN=x")


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "DEFAULT/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1/L/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/L",
        "RULE:CN=(.*?),OU=ServiceUsers.*/U",
        "RULE:CN=(.*?),OU=ServiceUsers.*/LU",
        "RULE:^CN=(?=x)(.*)$/$1/",  # look-ahead: not RE2
        "RULE:^(.*)$/$/",
        "",
    ],
)
def test_invalid_rules_are_configuration_errors(rules: str) -> None:
    with pytest.raises(ConfigurationError):
        PrincipalMapper(rules)
