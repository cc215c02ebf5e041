"""A signing key made in the test, its JWKS, and tokens signed with it."""

from __future__ import annotations

import json
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

ISSUER = "https://issuer.test"
AUDIENCE = "clientmetrics"


class Signer:
    def __init__(self, kid: str = "k1") -> None:
        self.kid = kid
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwks(self) -> dict[str, Any]:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        jwk.update({"kid": self.kid, "use": "sig", "alg": "RS256"})
        return {"keys": [jwk]}

    def token(self, now_s: int, **claims: Any) -> str:
        body = {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": now_s + 600, "iat": now_s}
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, self.key, algorithm="RS256", headers={"kid": self.kid})


def client_first(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()
