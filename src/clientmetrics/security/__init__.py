"""clientmetrics.security: sans-IO authentication and authorization.

SASL mechanisms, credential storage, certificate principals and the ACL
authorizer for the client-metrics config operations. No I/O, no wall clock.
"""

from clientmetrics.security.authorizer import (
    Acl,
    AclAuthorizer,
    AuthorizationConfig,
    Permission,
    parse_authorization,
)
from clientmetrics.security.base import (
    ANONYMOUS,
    MAX_RECEIVE_BYTES,
    Authenticated,
    AuthenticationFailed,
    Authorizer,
    DeferringExchange,
    Derivation,
    Operation,
    SaslExchange,
    SaslServer,
    UnsupportedMechanism,
    max_message_bytes,
)
from clientmetrics.security.credentials import (
    SCRAM_MECHANISMS,
    CredentialError,
    CredentialLookup,
    ScramCredential,
    derive,
)
from clientmetrics.security.sasl import (
    MECHANISMS,
    MechanismServer,
    OAuthBearerConfig,
    SaslConfig,
    build_sasl_server,
    identity_of,
    parse_sasl,
)
from clientmetrics.security.throttle import FailureThrottle

__all__ = [
    "ANONYMOUS",
    "MAX_RECEIVE_BYTES",
    "MECHANISMS",
    "SCRAM_MECHANISMS",
    "Acl",
    "AclAuthorizer",
    "Authenticated",
    "AuthenticationFailed",
    "AuthorizationConfig",
    "Authorizer",
    "CredentialError",
    "CredentialLookup",
    "DeferringExchange",
    "Derivation",
    "FailureThrottle",
    "MechanismServer",
    "OAuthBearerConfig",
    "Operation",
    "Permission",
    "SaslConfig",
    "SaslExchange",
    "SaslServer",
    "ScramCredential",
    "UnsupportedMechanism",
    "build_sasl_server",
    "derive",
    "identity_of",
    "max_message_bytes",
    "parse_authorization",
    "parse_sasl",
]
