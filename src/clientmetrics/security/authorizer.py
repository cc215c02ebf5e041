"""The ACL authorizer for the operations on the CLUSTER resource, as Kafka's.

Super users may do everything. Otherwise a DENY that matches wins over any ALLOW;
an ALLOW of ``ALTER_CONFIGS`` implies ``DESCRIBE_CONFIGS`` and one of ``ALTER``
implies ``DESCRIBE``, as in Kafka's AclAuthorizer; nothing matching means refused.
Principals and hosts match exactly or through the wildcards ``User:*`` and ``*``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clientmetrics.errors import ConfigurationError
from clientmetrics.security.base import Operation

__all__ = ["Acl", "AclAuthorizer", "AuthorizationConfig", "Permission", "parse_authorization"]

ALL = "ALL"
#: An ALLOW of the key also allows the values (Kafka's implied operations).
_IMPLIED_BY: Mapping[Operation, tuple[Operation, ...]] = {
    Operation.DESCRIBE_CONFIGS: (Operation.ALTER_CONFIGS,),
    Operation.DESCRIBE: (Operation.ALTER,),
}


class Permission(enum.Enum):
    ALLOW = "allow"
    DENY = "deny"


@dataclass(frozen=True, slots=True)
class Acl:
    """One access control entry on the cluster."""

    principal: str
    operation: Operation | None  # None: ALL
    permission: Permission
    host: str = "*"

    def matches(self, principal: str, host: str) -> bool:
        if self.host not in ("*", host):
            return False
        return self.principal == principal or (
            self.principal == "User:*" and principal.startswith("User:")
        )


@dataclass(frozen=True, slots=True)
class AuthorizationConfig:
    """The ``[authorization]`` section: super users and ACLs."""

    super_users: tuple[str, ...] = ()
    acls: tuple[Acl, ...] = ()


def _principal(value: object, where: str) -> str:
    if not isinstance(value, str) or ":" not in value or value.endswith(":"):
        raise ConfigurationError(
            f"{where}: a principal is TYPE:NAME (e.g. User:alice), got {value!r}"
        )
    return value


def _acl(index: int, entry: object) -> Acl:
    where = f"[authorization] acls[{index}]"
    if not isinstance(entry, Mapping):
        raise ConfigurationError(f"{where}: expected a table with principal, operation, permission")
    unknown = set(entry) - {"principal", "operation", "permission", "host"}
    if unknown:
        raise ConfigurationError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    names = [op.value for op in Operation]
    op_text = str(entry.get("operation", "")).upper()
    if op_text != ALL and op_text not in names:
        raise ConfigurationError(
            f"{where}: operation must be one of {', '.join([*names, ALL])}, "
            f"got {entry.get('operation')!r}"
        )
    perm_text = str(entry.get("permission", "")).lower()
    if perm_text not in ("allow", "deny"):
        raise ConfigurationError(f"{where}: permission must be allow or deny")
    host = entry.get("host", "*")
    if not isinstance(host, str) or not host:
        raise ConfigurationError(f"{where}: host must be an address or *")
    return Acl(
        principal=_principal(entry.get("principal"), where),
        operation=None if op_text == ALL else Operation(op_text),
        permission=Permission(perm_text),
        host=host,
    )


#: The ``[authorization]`` settings.
AUTHORIZATION_KEYS = frozenset({"super_users", "acls"})


def parse_authorization(section: Mapping[str, Any]) -> AuthorizationConfig:
    """Validate the TOML ``[authorization]`` section; raises ``ConfigurationError``."""
    unknown = set(section) - AUTHORIZATION_KEYS
    if unknown:
        raise ConfigurationError(
            f"unknown [authorization] setting(s): {', '.join(sorted(unknown))}"
        )
    supers = section.get("super_users", [])
    acls = section.get("acls", [])
    if not isinstance(supers, Sequence) or isinstance(supers, str):
        raise ConfigurationError("[authorization] super_users must be a list of principals")
    if not isinstance(acls, Sequence) or isinstance(acls, str):
        raise ConfigurationError("[authorization] acls must be a list of tables")
    return AuthorizationConfig(
        super_users=tuple(_principal(p, "[authorization] super_users") for p in supers),
        acls=tuple(_acl(i, entry) for i, entry in enumerate(acls)),
    )


class AclAuthorizer:
    """``Authorizer`` over an ``AuthorizationConfig``."""

    def __init__(self, config: AuthorizationConfig) -> None:
        self.config = config
        self._supers = frozenset(config.super_users)

    def authorize(self, principal: str, host: str, operation: Operation) -> bool:
        if principal in self._supers:
            return True
        matching = [acl for acl in self.config.acls if acl.matches(principal, host)]
        if any(
            acl.permission is Permission.DENY and acl.operation in (None, operation)
            for acl in matching
        ):
            return False
        granting = (None, operation, *_IMPLIED_BY.get(operation, ()))
        return any(
            acl.permission is Permission.ALLOW and acl.operation in granting for acl in matching
        )
