"""API keys: random, shown once, stored only as a salted hash.

A key reads ``kb_<keyId>_<secret>``. The key id is public (it names the stored
record, so the authorizer finds it with one GetItem); the secret is 32 random
bytes. Stored: ``salt`` and ``sha256(salt || secret)``. A fast hash is enough
here: the secret has 256 bits of entropy, so there is nothing to brute-force;
the salt keeps equal secrets (there are none) and precomputed tables useless.

The admin key is the same shape with key id ``admin``; the deployment stores
``sha256(admin key)`` as a parameter (AdminKeyHash).

A project's *usage key* is the value of its API Gateway API key, which the usage plan meters
(per-project throttles, docs/deploy.md). It is not a credential: clients never send it, only the
authorizer hands it to API Gateway after checking the bearer key. Still, it is never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

_KEY_PATTERN = re.compile(r"^kb_([a-z0-9]{16})_([A-Za-z0-9_-]{43})$")
_ADMIN_PATTERN = re.compile(r"^kb_admin_([A-Za-z0-9_-]{43})$")


@dataclass(frozen=True)
class IssuedKey:
    key_id: str
    api_key: str
    salt: str
    secret_hash: str


def issue_key() -> IssuedKey:
    key_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    salt = secrets.token_hex(16)
    return IssuedKey(key_id, f"kb_{key_id}_{secret}", salt, hash_secret(salt, secret))


def issue_usage_key() -> str:
    """A new project's usage key: 40 random hex characters (API Gateway takes 20 to 128)."""
    return secrets.token_hex(20)


def issue_admin_key() -> tuple[str, str]:
    """A new admin key and the hash to deploy with it (``AdminKeyHash``)."""
    key = f"kb_admin_{secrets.token_urlsafe(32)}"
    return key, admin_key_hash(key)


def hash_secret(salt: str, secret: str) -> str:
    return hashlib.sha256(bytes.fromhex(salt) + secret.encode()).hexdigest()


def admin_key_hash(admin_key: str) -> str:
    return hashlib.sha256(admin_key.encode()).hexdigest()


def parse_key(api_key: str) -> tuple[str, str] | None:
    """``(key_id, secret)`` of a well-formed project key, else None."""
    match = _KEY_PATTERN.match(api_key)
    return (match.group(1), match.group(2)) if match else None


def is_admin_key(api_key: str, expected_hash: str) -> bool:
    if not expected_hash or not _ADMIN_PATTERN.match(api_key):
        return False
    return hmac.compare_digest(admin_key_hash(api_key), expected_hash.lower())


def secret_matches(secret: str, salt: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_secret(salt, secret), stored_hash)


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None
