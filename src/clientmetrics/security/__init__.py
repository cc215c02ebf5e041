"""clientmetrics.security: sans-IO authentication and authorization.

SASL mechanisms, credential storage, certificate principals and the ACL
authorizer for the client-metrics config operations. No I/O, no wall clock.
"""

from clientmetrics.security.base import (
    ANONYMOUS,
    Authenticated,
    AuthenticationFailed,
    Authorizer,
    Operation,
    SaslExchange,
    SaslServer,
    UnsupportedMechanism,
)

__all__ = [
    "ANONYMOUS",
    "Authenticated",
    "AuthenticationFailed",
    "Authorizer",
    "Operation",
    "SaslExchange",
    "SaslServer",
    "UnsupportedMechanism",
]
