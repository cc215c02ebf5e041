"""No client request reads or writes the subscription store's topic.

In proxy mode the subscriptions live in a topic on the upstream cluster, which
the gateway reads and writes as its own upstream identity. Subscriptions must
change only through the config RPCs, authorized as the caller (as Kafka's
client-metrics configs do), so the proxy refuses every client request that
names the topic, whoever carries it upstream (the gateway's own login in
terminate mode, the client's in passthrough): Produce, Fetch, DeleteRecords,
DeleteTopics, CreatePartitions, its configs, ... by name or by topic id.

Cheap on the pass-through path: a request is decoded only when it may name the
topic. A large Produce request's topics are read off a walk that skips its records
by length (no search through megabytes); any other request's bytes are searched for
the topic's name and ids (a request that names the topic cannot avoid containing
one of them; a false match, say a group named after the topic, costs a decode,
never a refusal). A refused request gets
TOPIC_AUTHORIZATION_FAILED on every item it named (the response shaped as the
api's own); one that expects no answer (Produce with acks=0) closes the
connection, as Kafka does; one the gateway cannot decode but that contains the
name or an id closes it too. Each refusal is one audit line,
``store_topic_refused``. Metadata hides the topic (see ``screen_metadata``).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import structlog

from clientmetrics.gateway.handlers import ConnectionState, audit_identity
from clientmetrics.gateway.limits import now_ms
from clientmetrics.wire import ApiKey, ErrorCode, ProtocolError, UnsupportedApi
from clientmetrics.wire.codec import ZERO_UUID
from clientmetrics.wire.limits import WarningLimiter
from clientmetrics.wire.results import NO_RESPONSE, Answer, Close, CloseReason, Request
from clientmetrics.wire.topics import (
    api_name,
    decode_any_request,
    names_topic,
    produce_topics,
    refused_topic_entry,
    topic_refusal,
)

__all__ = ["StoreTopicGuard"]

log = structlog.get_logger("clientmetrics.gateway")

#: Never decoded: SASL carries credentials and no topic; ApiVersions names none;
#: Metadata is answered with the topic hidden (``screen_metadata``) instead. The ACL
#: apis (DescribeAcls 29, CreateAcls 30, DeleteAcls 31) grant rights rather than use
#: them, need ALTER / DESCRIBE on the CLUSTER, and stay the cluster's to authorize:
#: its administrators manage the store user's ACLs through the gateway too.
_UNCHECKED = frozenset(
    {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.API_VERSIONS, 29, 30, 31}
)
#: The store topic's ids kept: a topic deleted and made again gets a new one.
_MAX_IDS = 8
#: Produce requests larger than this are walked rather than searched: the walk costs
#: about what searching 20 KB does (bench/store_guard.py), and no more for 1 MB.
_WALKED_FROM = 16 * 1024
MESSAGE = "Topic authorization failed: the subscription store's topic is the gateway's own."


class StoreTopicGuard:
    """Refuses client requests naming ``topic`` (by name or a known topic id)."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self._names = frozenset({topic})
        self._name_bytes = topic.encode()
        self._ids: dict[uuid.UUID, bytes] = {}
        self._id_set: frozenset[bytes] = frozenset()
        #: A client repeating a refused request costs a few audit lines a minute per
        #: address and api, not one per request; the next line carries the count.
        self._lines = WarningLimiter()
        #: Every refusal, logged or not (the audit lines are rate limited).
        self.refused = 0

    @property
    def ids(self) -> tuple[uuid.UUID, ...]:
        """The topic ids learned for the topic (Metadata names them)."""
        return tuple(self._ids)

    def learn(self, topic_id: uuid.UUID) -> None:
        """Remember one of the topic's ids (requests may name it by id, v13+)."""
        if topic_id == ZERO_UUID or topic_id in self._ids:
            return
        if len(self._ids) >= _MAX_IDS:
            del self._ids[next(iter(self._ids))]
        self._ids[topic_id] = topic_id.bytes
        self._id_set = frozenset(self._ids.values())
        log.info("store_topic_id", topic=self.topic, topic_id=str(topic_id))

    def _mentions(self, request: Request) -> bool:
        """Whether the request may name the topic: a large Produce's topics read off
        its walk (its records, the bulk of the proxy's traffic, are skipped by length,
        not searched); any other request's bytes searched for the name and the ids."""
        frame, header = request.frame, request.header
        if header.api_key == ApiKey.PRODUCE and len(frame) > _WALKED_FROM:
            try:
                topics = produce_topics(frame, request.offset, header.api_version)
            except ProtocolError:
                pass  # searched instead; the decode below says what is wrong
            else:
                return any(t == self._name_bytes or t in self._id_set for t in topics)
        if self._name_bytes in frame:
            return True
        return any(raw in frame for raw in self._ids.values())

    def refuse(self, conn: ConnectionState, request: Request) -> Answer | Close | None:
        """The answer refusing ``request`` if it names the topic; None: forward it."""
        header = request.header
        if header.api_key in _UNCHECKED or header.api_key == ApiKey.METADATA:
            return None
        if not self._mentions(request):  # the pass-through path
            return None
        try:
            body = decode_any_request(header, bytes(request.frame), request.offset)
        except (ProtocolError, UnsupportedApi):
            body = None  # unreadable, yet it contains the name or an id: refused
        else:
            if not names_topic(body, self._names, self._ids):
                return None
        self._audit(conn, header.api_key, header.api_version)
        if body is not None and request.id != NO_RESPONSE:
            try:
                return Answer(
                    topic_refusal(header, body, ErrorCode.TOPIC_AUTHORIZATION_FAILED, MESSAGE)
                )
            except UnsupportedApi:
                pass
        detail = f"{api_name(header.api_key)} v{header.api_version} names the store's topic"
        return Close(CloseReason.REFUSED, detail)

    def _audit(self, conn: ConnectionState, api_key: int, api_version: int) -> None:
        self.refused += 1
        api = api_name(api_key)
        decision = self._lines.check(conn.peer_host, api, now_ms())
        if not decision.emit:
            return
        extra = {"suppressed": decision.suppressed} if decision.suppressed else {}
        log.info(
            "store_topic_refused",
            **audit_identity(conn),
            **extra,
            api=api,
            api_version=api_version,
            topic=self.topic,
            error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        )

    def screen_metadata(self, request: Request, body: Any) -> Any:
        """A Metadata response without the topic, as Kafka answers a topic the caller
        may not describe: left out of an all-topics answer, TOPIC_AUTHORIZATION_FAILED
        (no id, no partitions) where the request named it. Learns its ids on the way."""
        topics = body.topics
        hits = [t for t in topics if t.name == self.topic or t.topic_id in self._ids]
        if not hits:
            return body
        for topic in hits:
            if topic.name == self.topic and int(topic.error_code) == ErrorCode.NONE:
                self.learn(topic.topic_id)
        asked = request.body().topics
        every = asked is None or (request.header.api_version == 0 and not asked)
        kept = []
        for topic in topics:
            if not any(topic is hit for hit in hits):
                kept.append(topic)
            elif not every:
                entry = refused_topic_entry(type(topic), topic.name, _REFUSED)
                kept.append(entry)
        return dataclasses.replace(body, topics=tuple(kept))


_REFUSED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
