"""Errors of the admin API: broker error codes, connection failures, timeouts.

    AdminError                  a request failed; ``.error_code`` is the Kafka code
    ├── AdminConnectionError    no connection to any bootstrap address (NETWORK_EXCEPTION)
    ├── AdminTimeoutError       a connect or a response took too long (REQUEST_TIMED_OUT)
    └── AdminAuthenticationError  SASL mechanism or credentials refused (client.sasl)

Bad client properties (``--command-config``) raise ``clientmetrics.ConfigurationError``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType

from clientmetrics.errors import ClientMetricsError
from clientmetrics.wire import ErrorCode

__all__ = [
    "AdminAuthenticationError",
    "AdminConnectionError",
    "AdminError",
    "AdminTimeoutError",
    "default_message",
]

# Errors.java's default exception messages, used when a broker sends no message.
_DEFAULT_MESSAGES: Mapping[ErrorCode, str] = MappingProxyType(
    {
        ErrorCode.UNKNOWN_SERVER_ERROR: (
            "The server experienced an unexpected error when processing the request."
        ),
        ErrorCode.REQUEST_TIMED_OUT: "The request timed out.",
        ErrorCode.NETWORK_EXCEPTION: ("The server disconnected before a response was received."),
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
        ErrorCode.UNSUPPORTED_SASL_MECHANISM: (
            "The broker does not support the requested SASL mechanism."
        ),
        ErrorCode.ILLEGAL_SASL_STATE: "Request is not valid given the current SASL state.",
        ErrorCode.UNSUPPORTED_VERSION: "The version of API is not supported.",
        ErrorCode.INVALID_CONFIG: "Configuration is invalid.",
        ErrorCode.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
        ErrorCode.INVALID_REQUEST: (
            "This most likely occurs because of a request being malformed by the client "
            "library or the message was sent to an incompatible broker. See the broker logs "
            "for more details."
        ),
        ErrorCode.POLICY_VIOLATION: "Request parameters do not satisfy the configured policy.",
        ErrorCode.SASL_AUTHENTICATION_FAILED: "SASL Authentication failed.",
        ErrorCode.THROTTLING_QUOTA_EXCEEDED: "The throttling quota has been exceeded.",
        ErrorCode.RESOURCE_NOT_FOUND: (
            "A request illegally referred to a resource that does not exist."
        ),
    }
)


def default_message(code: ErrorCode) -> str:
    """Kafka's default message for ``code`` (what the Java admin shows without a broker message)."""
    return _DEFAULT_MESSAGES.get(code, f"The broker returned error {code.name} ({int(code)}).")


class AdminError(ClientMetricsError):
    """An admin request failed. ``str()`` is Kafka's message, as the Java tool prints it."""

    def __init__(
        self, error_code: ErrorCode, message: str | None = None, *, reason: str | None = None
    ) -> None:
        self.error_code = error_code
        self.message = message if message else default_message(error_code)
        self.reason = reason or self.message
        """The cause without the broker address (used when listing failed addresses)."""
        super().__init__(self.message)


class AdminConnectionError(AdminError):
    """No bootstrap address could be connected to; ``failures`` is (address, reason) pairs."""

    def __init__(self, failures: tuple[tuple[str, str], ...]) -> None:
        self.failures = failures
        detail = "; ".join(f"{address} ({reason})" for address, reason in failures)
        noun = "server" if len(failures) == 1 else "servers"
        super().__init__(
            ErrorCode.NETWORK_EXCEPTION, f"Could not connect to bootstrap {noun} {detail}"
        )


class AdminTimeoutError(AdminError):
    """A connection attempt or a request did not finish within the timeout."""

    def __init__(self, address: str, what: str, timeout_s: float) -> None:
        self.address = address
        self.what = what
        # Rounded up: a budget of 999.98 ms left from a 1000 ms deadline reads as 1000.
        reason = f"timed out after {math.ceil(timeout_s * 1000)} ms waiting for {what}"
        super().__init__(
            ErrorCode.REQUEST_TIMED_OUT,
            f"{reason[0].upper()}{reason[1:]} from {address}",
            reason=reason,
        )


class AdminAuthenticationError(AdminError):
    """The broker refused the SASL mechanism or the credentials."""
