"""clientmetrics.client: the Kafka client side the admin tool and the simulator share.

Kafka client properties (``security.protocol``, ``ssl.*``, ``sasl.*``, read from
a Java ``.properties`` file), the TLS context and SASL credentials they give
(``ClientSecurity``), and the SASL exchange on a connection (``authenticate``).
The framing of a client connection is ``wire.client``'s.
"""

from clientmetrics.client.properties import (
    PROTOCOLS,
    ClientSecurity,
    librdkafka_properties,
    parse_bootstrap,
    parse_properties,
    read_properties,
)
from clientmetrics.client.sasl import (
    SaslAuthenticationError,
    SaslCredentials,
    SaslOAuthBearer,
    SaslPlain,
    SaslRequester,
    SaslScram,
    authenticate,
)

__all__ = [
    "PROTOCOLS",
    "ClientSecurity",
    "SaslAuthenticationError",
    "SaslCredentials",
    "SaslOAuthBearer",
    "SaslPlain",
    "SaslRequester",
    "SaslScram",
    "authenticate",
    "librdkafka_properties",
    "parse_bootstrap",
    "parse_properties",
    "read_properties",
]
