"""The ACL authorizer: super users, deny wins, ALTER_CONFIGS implies DESCRIBE_CONFIGS."""

from __future__ import annotations

import pytest

from clientmetrics.errors import ConfigurationError
from clientmetrics.security import AclAuthorizer, Operation, parse_authorization

ALTER, DESCRIBE = Operation.ALTER_CONFIGS, Operation.DESCRIBE_CONFIGS


def authorizer(**section: object) -> AclAuthorizer:
    return AclAuthorizer(parse_authorization(section))


def test_super_user_may_do_everything_others_nothing() -> None:
    auth = authorizer(super_users=["User:admin"])
    for op in Operation:
        assert auth.authorize("User:admin", "10.0.0.1", op)
        assert not auth.authorize("User:bob", "10.0.0.1", op)
    assert not auth.authorize("User:ANONYMOUS", "127.0.0.1", DESCRIBE)


def test_alter_implies_describe_but_not_the_reverse() -> None:
    auth = authorizer(
        acls=[
            {"principal": "User:bob", "operation": "ALTER_CONFIGS", "permission": "allow"},
            {"principal": "User:eve", "operation": "describe_configs", "permission": "allow"},
            {"principal": "User:ops", "operation": "ALTER", "permission": "allow"},
        ]
    )
    assert auth.authorize("User:bob", "h", ALTER)
    assert auth.authorize("User:bob", "h", DESCRIBE)
    assert auth.authorize("User:eve", "h", DESCRIBE)
    assert not auth.authorize("User:eve", "h", ALTER)
    assert auth.authorize("User:ops", "h", Operation.DESCRIBE)
    assert not auth.authorize("User:ops", "h", DESCRIBE)


def test_deny_wins_and_hosts_match() -> None:
    auth = authorizer(
        acls=[
            {"principal": "User:*", "operation": "ALL", "permission": "allow"},
            {"principal": "User:bob", "operation": "ALTER_CONFIGS", "permission": "deny"},
            {
                "principal": "User:carol",
                "operation": "ALL",
                "permission": "deny",
                "host": "10.9.9.9",
            },
        ]
    )
    assert not auth.authorize("User:bob", "h", ALTER)
    assert auth.authorize("User:bob", "h", DESCRIBE)  # a deny implies nothing
    assert not auth.authorize("User:carol", "10.9.9.9", DESCRIBE)
    assert auth.authorize("User:carol", "10.0.0.1", ALTER)


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            {"acls": [{"principal": "bob", "operation": "ALTER_CONFIGS", "permission": "allow"}]},
            "TYPE:NAME",
        ),
        (
            {"acls": [{"principal": "User:b", "operation": "WRITE", "permission": "allow"}]},
            "operation must be one of",
        ),
        (
            {"acls": [{"principal": "User:b", "operation": "ALTER", "permission": "maybe"}]},
            "permission must be allow or deny",
        ),
        (
            {
                "acls": [
                    {"principal": "User:b", "operation": "ALTER", "permission": "allow", "x": 1}
                ]
            },
            "unknown key",
        ),
        ({"super_users": "User:admin"}, "must be a list"),
        ({"superusers": []}, "unknown"),
    ],
)
def test_bad_sections_are_refused_with_a_clear_error(
    section: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_authorization(section)
