"""Which subscriptions apply to a client: KIP-714 ``match`` selectors.

Every ``(selector, pattern)`` pair of a subscription must match (AND); an
empty list matches every client. Patterns are RE2 and anchored at both ends,
like Java's ``Pattern.matches`` (Kafka 4.5 moved to RE2/J for the same reason:
no catastrophic backtracking). A pattern RE2 cannot compile (a backreference
that slipped past the config layer, say) makes its subscription match nothing
instead of failing the request.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import re2

from clientmetrics.telemetry.model import ClientContext, Subscription, kafka_uuid_text


def _options() -> Any:
    options = re2.Options()
    # A bad pattern is reported through the return value, not through absl logs.
    options.log_errors = False
    return options


#: Bound on remembered (pattern, value) outcomes; the memo is cleared when full.
MEMO_SIZE = 65536


@dataclass(frozen=True, slots=True)
class CompiledSubscription:
    """A subscription with its ``match`` patterns compiled once."""

    subscription: Subscription
    #: (selector, compiled pattern or None when it does not compile).
    patterns: tuple[tuple[str, Any], ...]
    #: Outcomes by (compiled pattern, value), shared through the PatternCache: most
    #: attribute values (software name, version, client id) repeat across clients,
    #: and a call into the re2 wrapper costs far more than a dict lookup.
    memo: dict[tuple[Any, str], bool] = field(default_factory=dict, compare=False, repr=False)

    @property
    def valid(self) -> bool:
        """False when a pattern failed to compile; such a subscription matches nothing."""
        return all(pattern is not None for _, pattern in self.patterns)

    def matches(self, client_instance_id: uuid.UUID, ctx: ClientContext) -> bool:
        """True when every selector's pattern fully matches the client's attribute."""
        for selector, pattern in self.patterns:
            if pattern is None:
                return False
            if not any(
                self._fullmatch(pattern, v) for v in _attribute(selector, client_instance_id, ctx)
            ):
                return False
        return True

    def _fullmatch(self, pattern: Any, value: str) -> bool:
        key = (pattern, value)
        found = self.memo.get(key)
        if found is None:
            found = pattern.fullmatch(value) is not None
            if len(self.memo) >= MEMO_SIZE:
                self.memo.clear()
            self.memo[key] = found
        return found


def _attribute(selector: str, client_instance_id: uuid.UUID, ctx: ClientContext) -> tuple[str, ...]:
    """The text(s) a selector is matched against; empty for an unknown selector."""
    if selector == "client_instance_id":
        # The KIP's examples use the canonical text, Kafka matches its base64 form.
        return (str(client_instance_id), kafka_uuid_text(client_instance_id))
    if selector == "client_id":
        return (ctx.client_id,)
    if selector == "client_software_name":
        return (ctx.client_software_name,)
    if selector == "client_software_version":
        return (ctx.client_software_version,)
    if selector == "client_source_address":
        return (ctx.client_source_address,)
    if selector == "client_source_port":
        return (str(ctx.client_source_port),)
    return ()


class PatternCache:
    """Compiles each distinct pattern text once, however many subscriptions use it."""

    __slots__ = ("_compiled", "_memo", "_options")

    def __init__(self) -> None:
        self._compiled: dict[str, Any] = {}
        self._memo: dict[tuple[Any, str], bool] = {}
        self._options = _options()

    def compile(self, pattern: str) -> Any:
        """The compiled RE2 pattern, or None if RE2 rejects it."""
        text = pattern.strip()  # Kafka compiles value.trim()
        if text not in self._compiled:
            try:
                self._compiled[text] = re2.compile(text, self._options)
            except re2.error:
                self._compiled[text] = None
        return self._compiled[text]

    def compile_subscription(self, subscription: Subscription) -> CompiledSubscription:
        """Compile every pattern of ``subscription``."""
        patterns = tuple((sel, self.compile(pat)) for sel, pat in subscription.match)
        return CompiledSubscription(subscription, patterns, self._memo)

    def retain(self, subscriptions: Iterable[Subscription]) -> None:
        """Forget patterns no longer used by ``subscriptions`` (keeps the cache bounded)."""
        used = {pat.strip() for sub in subscriptions for _, pat in sub.match}
        self._compiled = {k: v for k, v in self._compiled.items() if k in used}
        self._memo.clear()


def matching_subscriptions(
    compiled: Iterable[CompiledSubscription], client_instance_id: uuid.UUID, ctx: ClientContext
) -> list[Subscription]:
    """The subscriptions among ``compiled`` that apply to this client."""
    return [c.subscription for c in compiled if c.matches(client_instance_id, ctx)]
