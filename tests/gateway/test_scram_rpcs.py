"""AlterUserScramCredentials / DescribeUserScramCredentials from librdkafka's AdminClient."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka.errors import ClusterAuthorizationFailedError

from clientmetrics.security import AuthenticationFailed, SaslConfig, build_sasl_server
from clientmetrics.store.credentials import CredentialFile
from tests import kadmin
from tests.procs import MIN_DEADLINE_S, GatewayProcess

pytestmark = pytest.mark.integration
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path_factory.mktemp("scram")).start()
    yield gw
    gw.stop()


def admin(gw: GatewayProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": gw.bootstrap})


def outcome(future: object) -> int:
    try:
        future.result()  # type: ignore[attr-defined]
    except KafkaException as exc:
        return int(exc.args[0].code())
    return 0


def plain_login(data_dir: Path, user: str, password: str) -> bool:
    server = build_sasl_server(
        SaslConfig(("PLAIN",)), CredentialFile.in_data_dir(data_dir), seed=b"t" * 16
    )
    try:
        server.start("PLAIN").respond(f"\0{user}\0{password}".encode(), now_ms=0)
    except AuthenticationFailed:
        return False
    return True


def test_upsert_describe_delete(gateway: GatewayProcess) -> None:
    client = admin(gateway)
    futures = client.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion("alice", ScramCredentialInfo(SHA256, 8192), b"alice-pw"),
            UserScramCredentialUpsertion("alice", ScramCredentialInfo(SHA512, 4096), b"alice-pw"),
            UserScramCredentialUpsertion("bob", ScramCredentialInfo(SHA512, 4096), b"bob-pw"),
        ],
        request_timeout=MIN_DEADLINE_S,
    )
    assert {user: outcome(f) for user, f in futures.items()} == {"alice": 0, "bob": 0}
    # The salted password librdkafka sent is stored as keys that check the password.
    assert plain_login(gateway.data_dir, "alice", "alice-pw")
    assert not plain_login(gateway.data_dir, "alice", "bob-pw")
    assert "alice-pw" not in (gateway.data_dir / "credentials.json").read_text()

    described = client.describe_user_scram_credentials(request_timeout=MIN_DEADLINE_S).result()
    infos = {
        user: sorted((i.mechanism, i.iterations) for i in d.scram_credential_infos)
        for user, d in described.items()
    }
    assert infos == {"alice": [(SHA256, 8192), (SHA512, 4096)], "bob": [(SHA512, 4096)]}

    futures = client.describe_user_scram_credentials(
        ["bob", "nobody"], request_timeout=MIN_DEADLINE_S
    )
    assert outcome(futures["bob"]) == 0
    assert outcome(futures["nobody"]) == KafkaError.RESOURCE_NOT_FOUND

    futures = client.alter_user_scram_credentials(
        [
            UserScramCredentialDeletion("bob", SHA512),
            UserScramCredentialDeletion("ghost", SHA256),
        ],
        request_timeout=MIN_DEADLINE_S,
    )
    assert {user: outcome(f) for user, f in futures.items()} == {
        "bob": 0,
        "ghost": KafkaError.RESOURCE_NOT_FOUND,
    }
    assert not plain_login(gateway.data_dir, "bob", "bob-pw")


def test_a_bad_entry_leaves_that_users_other_changes_out(gateway: GatewayProcess) -> None:
    client = admin(gateway)  # kept: results of a destroyed client are _DESTROY errors
    futures = client.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion("carol", ScramCredentialInfo(SHA256, 4096), b"carol-pw"),
            UserScramCredentialDeletion("carol", SHA512),
            UserScramCredentialUpsertion("dan", ScramCredentialInfo(SHA256, 1000), b"dan-pw"),
        ],
        request_timeout=MIN_DEADLINE_S,
    )
    assert outcome(futures["carol"]) == KafkaError.RESOURCE_NOT_FOUND
    assert outcome(futures["dan"]) == KafkaError.UNACCEPTABLE_CREDENTIAL
    assert not plain_login(gateway.data_dir, "carol", "carol-pw")
    assert not plain_login(gateway.data_dir, "dan", "dan-pw")


def test_without_the_cluster_permissions_both_are_refused(tmp_path: Path) -> None:
    config = '[authorization]\nsuper_users = ["User:admin"]\n'
    gw = GatewayProcess(tmp_path, config_text=config).start()
    try:
        client = admin(gw)
        futures = client.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("eve", ScramCredentialInfo(SHA256, 4096), b"eve-pw")],
            request_timeout=MIN_DEADLINE_S,
        )
        assert outcome(futures["eve"]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        # Described with kafka-python: librdkafka 2.16 crashes after reporting a refused
        # describe (a top-level error), as a Kafka broker sends it.
        with kadmin.admin(gw.bootstrap) as other:
            with pytest.raises(ClusterAuthorizationFailedError, match="Cluster authorization"):
                other.describe_user_scram_credentials(["eve"])
            with pytest.raises(ClusterAuthorizationFailedError):
                other.describe_user_scram_credentials()
        assert not (tmp_path / "credentials.json").exists()
    finally:
        gw.stop()


def test_request_errors_per_user_as_kafka_words_them() -> None:
    from types import SimpleNamespace as Item

    from clientmetrics.gateway.scram_rpcs import plan_alterations

    def up(name: str, mechanism: int = 1, iterations: int = 4096) -> Item:
        return Item(
            name=name, mechanism=mechanism, iterations=iterations, salt=b"s", salted_password=b"p"
        )

    order, errors, _ = plan_alterations(
        [Item(name="dup", mechanism=1)],
        [up("dup"), up(""), up("md5", mechanism=7), up("big", iterations=16385), up("fine")],
    )
    assert order == ["dup", "", "md5", "big", "fine"]
    assert {user: (int(code), message) for user, (code, message) in errors.items()} == {
        "dup": (92, "A user credential cannot be altered twice in the same request"),
        "": (93, "Username must not be empty"),
        "md5": (33, "Unknown SCRAM mechanism."),
        "big": (93, "Too many iterations"),
    }


def test_kafka_pythons_admin_client_too(gateway: GatewayProcess) -> None:
    from kafka.admin._users import UserScramCredentialUpsertion as Upsertion

    with kadmin.admin(gateway.bootstrap) as client:
        assert client.alter_user_scram_credentials(
            [Upsertion("erin", "SCRAM-SHA-256", "erin-pw", iterations=8192)]
        ) == {"erin": None}
        described = client.describe_user_scram_credentials(["erin"])
    assert described["erin"]["error"] is None
    assert [
        (int(i["mechanism"]), i["iterations"]) for i in described["erin"]["credential_infos"]
    ] == [(1, 8192)]
    assert plain_login(gateway.data_dir, "erin", "erin-pw")


def test_with_sasl_and_no_authorization_nobody_may_use_them(tmp_path: Path) -> None:
    # Kafka without an authorizer lets any user replace another's credentials (and
    # list every user name); a gateway that authenticates clients refuses both.
    from tests.plain_flood import add_user

    data = tmp_path / "data"
    add_user(data, "alice", "alice-secret")
    add_user(data, "bob", "bob-secret")
    config = '[sasl]\nmechanisms = ["PLAIN"]\n'
    gw = GatewayProcess(data, config, listen_protocol="SASL_PLAINTEXT").start()
    try:
        (warning,) = gw.events("sasl_without_authorization")
        assert "refused to every client" in str(warning["hint"])
        client = AdminClient(
            {
                "bootstrap.servers": gw.bootstrap,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "alice",
                "sasl.password": "alice-secret",
            }
        )
        futures = client.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("bob", ScramCredentialInfo(SHA512, 4096), b"mine")],
            request_timeout=MIN_DEADLINE_S,
        )
        assert outcome(futures["bob"]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        security = {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "alice",
            "sasl_plain_password": "alice-secret",
        }
        with (
            kadmin.admin(gw.bootstrap, **security) as other,
            pytest.raises(ClusterAuthorizationFailedError),
        ):
            other.describe_user_scram_credentials()
        assert plain_login(data, "bob", "bob-secret")  # unchanged
        del client  # librdkafka's threads stop before the gateway does
    finally:
        gw.stop()
