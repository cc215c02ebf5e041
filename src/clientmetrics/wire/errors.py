"""Kafka error codes, as on the wire (``Errors.java``), with their retriable flag."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from clientmetrics.errors import ClientMetricsError

if TYPE_CHECKING:
    from clientmetrics.wire.headers import RequestHeader


class ErrorCode(enum.IntEnum):
    """Kafka protocol error codes used by this project.

    ``retriable`` mirrors Kafka's RetriableException hierarchy.
    """

    retriable: bool

    def __new__(cls, value: int, retriable: bool = False) -> ErrorCode:
        obj = int.__new__(cls, value)
        obj._value_ = value
        obj.retriable = retriable
        return obj

    UNKNOWN_SERVER_ERROR = -1, False
    NONE = 0, False
    CORRUPT_MESSAGE = 2, True
    UNKNOWN_TOPIC_OR_PARTITION = 3, True
    LEADER_NOT_AVAILABLE = 5, True
    NOT_LEADER_OR_FOLLOWER = 6, True
    REQUEST_TIMED_OUT = 7, True
    NETWORK_EXCEPTION = 13, True
    COORDINATOR_LOAD_IN_PROGRESS = 14, True
    COORDINATOR_NOT_AVAILABLE = 15, True
    NOT_COORDINATOR = 16, True
    INVALID_TOPIC_EXCEPTION = 17, False
    TOPIC_AUTHORIZATION_FAILED = 29, False
    GROUP_AUTHORIZATION_FAILED = 30, False
    CLUSTER_AUTHORIZATION_FAILED = 31, False
    UNSUPPORTED_SASL_MECHANISM = 33, False
    ILLEGAL_SASL_STATE = 34, False
    UNSUPPORTED_VERSION = 35, False
    TOPIC_ALREADY_EXISTS = 36, False
    INVALID_PARTITIONS = 37, False
    INVALID_REPLICATION_FACTOR = 38, False
    INVALID_CONFIG = 40, False
    NOT_CONTROLLER = 41, True
    INVALID_REQUEST = 42, False
    POLICY_VIOLATION = 44, False
    SASL_AUTHENTICATION_FAILED = 58, False
    UNSUPPORTED_COMPRESSION_TYPE = 76, False
    INVALID_RECORD = 87, False
    THROTTLING_QUOTA_EXCEEDED = 89, True
    RESOURCE_NOT_FOUND = 91, False
    DUPLICATE_RESOURCE = 92, False
    UNACCEPTABLE_CREDENTIAL = 93, False
    UNKNOWN_SUBSCRIPTION_ID = 117, False
    TELEMETRY_TOO_LARGE = 118, False

    @classmethod
    def for_code(cls, code: int) -> ErrorCode:
        """The enum member for ``code``; unknown codes map to UNKNOWN_SERVER_ERROR."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN_SERVER_ERROR


class ProtocolError(ClientMetricsError):
    """The peer sent bytes that do not follow the Kafka protocol."""


class FrameTooLarge(ProtocolError):
    """A frame's size prefix exceeds the configured maximum request size."""

    def __init__(self, size: int, maximum: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the maximum of {maximum} bytes")
        self.size = size
        self.maximum = maximum


class UnsupportedApi(ClientMetricsError):
    """The request names an api key or version this side does not serve.

    ``header`` is the parsed request header when the error comes from decoding a
    request (so the caller can still answer it), else ``None``.
    """

    def __init__(self, api_key: int, api_version: int, header: RequestHeader | None = None) -> None:
        super().__init__(f"unsupported api key {api_key} version {api_version}")
        self.api_key = api_key
        self.api_version = api_version
        self.header = header
