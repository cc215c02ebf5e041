"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), standalone mode.

They manage the same credential file as ``clientmetrics users``, so
``kafka-configs --alter --add-config 'SCRAM-SHA-512=[password=...]' --entity-type users``
and an AdminClient work against the gateway. As in Kafka, describing needs DESCRIBE
and altering ALTER on the cluster; the client sends a salted password (never the
password itself) and the gateway keeps only StoredKey and ServerKey. Error codes and
messages follow Kafka's KRaft ``ScramControlManager``.

Unlike a Kafka broker without an authorizer, a gateway that authenticates clients
with SASL but has no ``[authorization]`` refuses both RPCs to everyone
(CLUSTER_AUTHORIZATION_FAILED): any user could otherwise replace another user's
credentials, or list every user name. ``clientmetrics users`` still manages them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from clientmetrics.gateway.authz import CLUSTER_AUTHORIZATION_FAILED_MESSAGE, AuthorizationHolder
from clientmetrics.gateway.handlers import ConnectionState
from clientmetrics.security.base import Operation
from clientmetrics.security.credentials import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    CredentialError,
    ScramCredential,
    keys_from_salted_password,
)
from clientmetrics.store.credentials import CredentialFile, Users
from clientmetrics.wire import (
    ErrorCode,
    encode_response,
    response_type,
)
from clientmetrics.wire.build import build
from clientmetrics.wire.results import Answer, Reply, Request

__all__ = ["ScramHandlers"]


#: Kafka's ScramMechanism type ids on the wire.
MECHANISM_IDS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_TYPES = {name: type_id for type_id, name in MECHANISM_IDS.items()}

Outcome = tuple[ErrorCode, str | None]
_OK: Outcome = (ErrorCode.NONE, None)


@dataclass(frozen=True, slots=True)
class _Change:
    user: str
    mechanism: int
    #: None for a deletion.
    credential: ScramCredential | None
    error: Outcome = _OK


def _upsertion(item: Any) -> _Change:
    user, mech = str(item.name), int(item.mechanism)
    name = MECHANISM_IDS.get(mech)
    if name is None:
        return _Change(
            user, mech, None, (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism.")
        )
    iterations = int(item.iterations)
    if iterations < MIN_ITERATIONS:
        return _Change(user, mech, None, (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"))
    if iterations > MAX_ITERATIONS:
        return _Change(user, mech, None, (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"))
    salt, salted = bytes(item.salt), bytes(item.salted_password)
    if not salt or not salted:
        return _Change(
            user,
            mech,
            None,
            (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"),
        )
    stored_key, server_key = keys_from_salted_password(name, salted)
    return _Change(user, mech, ScramCredential(salt, stored_key, server_key, iterations))


def plan_alterations(
    deletions: Any, upsertions: Any
) -> tuple[list[str], dict[str, Outcome], list[_Change]]:
    """Users in order of first appearance, per-user request errors, and the changes."""
    changes = [_Change(str(d.name), int(d.mechanism), None) for d in deletions]
    changes += [_upsertion(u) for u in upsertions]
    order: list[str] = []
    errors: dict[str, Outcome] = {}
    seen: set[tuple[str, int]] = set()
    for change in changes:
        if change.user not in order:
            order.append(change.user)
        if change.user in errors:
            continue
        if not change.user:
            errors[change.user] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif change.error != _OK:
            errors[change.user] = change.error
        elif change.mechanism not in MECHANISM_IDS:
            errors[change.user] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism.")
        elif (change.user, change.mechanism) in seen:
            errors[change.user] = (
                ErrorCode.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            )
        seen.add((change.user, change.mechanism))
    return order, errors, changes


def apply_alterations(users: Users, changes: list[_Change], errors: dict[str, Outcome]) -> None:
    """Apply each valid user's changes to ``users`` in place; a user with an error is untouched."""
    for change in changes:
        if change.user in errors or change.credential is not None:
            continue
        if MECHANISM_IDS[change.mechanism] not in users.get(change.user, {}):
            errors[change.user] = (
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
    for change in changes:
        if change.user in errors:
            continue
        mechs = users.setdefault(change.user, {})
        name = MECHANISM_IDS[change.mechanism]
        if change.credential is None:
            mechs.pop(name, None)
        else:
            mechs[name] = change.credential


class ScramHandlers:
    """The SCRAM credential RPCs over the data dir's credential file."""

    def __init__(
        self, credentials: CredentialFile, authorization: AuthorizationHolder, *, sasl: bool = False
    ) -> None:
        """``sasl``: clients authenticate with SASL (then, without ``[authorization]``,
        nobody may use these RPCs)."""
        self._credentials = credentials
        self._authz = authorization
        self._sasl = sasl

    def _permitted(self, conn: ConnectionState, operation: Operation) -> bool:
        if not self._authz.enforced and self._sasl:
            return False
        return self._authz.allowed(conn, operation)

    async def describe_user_scram_credentials(
        self, conn: ConnectionState, request: Request
    ) -> Reply:
        header = request.header
        body = request.body()
        values: dict[str, Any] = {"throttle_time": 0, "error_code": ErrorCode.NONE}
        values["error_message"], values["results"] = None, []
        if not self._permitted(conn, Operation.DESCRIBE):
            # The error at the top only: librdkafka 2.16 aborts when per-user results
            # come with it, and reports the top-level error for each named user.
            values["error_code"] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            values["error_message"] = CLUSTER_AUTHORIZATION_FAILED_MESSAGE
        else:
            try:
                users = await asyncio.to_thread(self._credentials.users)
            except CredentialError as exc:
                values["error_code"], values["error_message"] = (
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    str(exc),
                )
            else:
                wanted = [str(u.name) for u in body.users or ()]
                values["results"] = self.describe_results(users, wanted)
        cls = response_type(header.api_key, header.api_version)
        return Answer(encode_response(header, build(cls, values)))

    @staticmethod
    def describe_results(users: Users, wanted: list[str]) -> list[dict[str, Any]]:
        """One result per requested user (every user when none is named)."""
        results = []
        seen: set[str] = set()
        for user in wanted or sorted(users):
            result: dict[str, Any] = {
                "user": user,
                "error_code": ErrorCode.NONE,
                "error_message": None,
            }
            if user in seen:
                result["error_code"] = ErrorCode.DUPLICATE_RESOURCE
                result["error_message"] = (
                    "Cannot describe SCRAM credentials for the same user twice in a single "
                    f"request: {user}"
                )
            elif not users.get(user):
                result["error_code"] = ErrorCode.RESOURCE_NOT_FOUND
                result["error_message"] = (
                    f"Attempt to describe a user credential that does not exist: {user}"
                )
            infos = [
                {"mechanism": MECHANISM_TYPES[m], "iterations": c.iterations}
                for m, c in sorted(users.get(user, {}).items())
            ]
            result["credential_infos"] = infos if result["error_code"] == ErrorCode.NONE else []
            seen.add(user)
            results.append(result)
        return results

    async def alter_user_scram_credentials(self, conn: ConnectionState, request: Request) -> Reply:
        header = request.header
        body = request.body()
        order, errors, changes = plan_alterations(body.deletions, body.upsertions)
        if not self._permitted(conn, Operation.ALTER):
            refused = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED_MESSAGE)
            errors = dict.fromkeys(order, refused)
        elif any(user not in errors for user in order):
            try:
                await asyncio.to_thread(
                    self._credentials.update,
                    lambda users: apply_alterations(users, changes, errors),
                )
            except CredentialError as exc:
                failed = (ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))
                errors = {user: errors.get(user, failed) for user in order}
        results = [
            {
                "user": user,
                "error_code": errors.get(user, _OK)[0],
                "error_message": errors.get(user, _OK)[1],
            }
            for user in order
        ]
        cls = response_type(header.api_key, header.api_version)
        return Answer(encode_response(header, build(cls, {"throttle_time": 0, "results": results})))
