"""Webhook signatures: the Standard Webhooks scheme (https://www.standardwebhooks.com/).

Every delivery carries three headers::

    webhook-id:        msg_…                      (the same on every retry of one message)
    webhook-timestamp: 1614265330                 (Unix seconds, when this attempt was signed)
    webhook-signature: v1,<base64 mac> [v1,<…>]   (one per active secret, space-separated)

    mac = HMAC-SHA256(key = base64decode(secret without "whsec_"),
                      msg = f"{webhook-id}.{webhook-timestamp}.".encode() + body)

A receiver recomputes the mac over the raw body it received with its secret, accepts the
message if any ``v1`` signature matches (compared in constant time) and refuses timestamps
further than a few minutes from its clock (replay). During a secret rotation the sender signs
with the old and the new secret, so receivers holding either keep verifying. ``verify`` is that
receiver side, in a few lines a subscriber can copy.

Pure: standard library only, no I/O (the clock is the caller's ``now``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets as _random
from collections.abc import Mapping, Sequence

SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix, not a secret
SECRET_BYTES = 32
SIGNATURE_VERSION = "v1"
DEFAULT_TOLERANCE_SECONDS = 300

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"

# Ids go into a header and into the signed content: printable ASCII without spaces.
_MSG_ID = re.compile(r"[!-~]{1,256}")
_TIMESTAMP = re.compile(r"[0-9]{1,12}")


def new_secret() -> str:
    """A fresh signing secret: ``whsec_`` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(_random.token_bytes(SECRET_BYTES)).decode("ascii")


def _key(secret: str) -> bytes:
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"a webhook secret starts with {SECRET_PREFIX!r}")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except (binascii.Error, ValueError) as error:
        raise ValueError("a webhook secret is whsec_ followed by base64") from error
    if not key:
        raise ValueError("a webhook secret has an empty key")
    return key


def _mac(key: bytes, msg_id: str, timestamp: int, body: bytes) -> bytes:
    return hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()


def _check_message(msg_id: str, timestamp: int) -> None:
    if not _MSG_ID.fullmatch(msg_id):
        raise ValueError("a webhook message id is 1-256 printable ASCII characters, no spaces")
    if isinstance(timestamp, bool) or not isinstance(timestamp, int) or timestamp < 0:
        raise ValueError("a webhook timestamp is a non-negative integer (Unix seconds)")


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<base64 HMAC-SHA256>`` of ``{msg_id}.{timestamp}.{body}``; ValueError on a bad secret."""
    _check_message(msg_id, timestamp)
    mac = _mac(_key(secret), msg_id, timestamp, body)
    return f"{SIGNATURE_VERSION},{base64.b64encode(mac).decode('ascii')}"


def signature_header(secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value: one signature per secret, space-separated."""
    if isinstance(secrets, str) or not secrets:
        raise ValueError("sign with a sequence of at least one secret")
    return " ".join(sign(secret, msg_id, timestamp, body) for secret in secrets)


def headers(secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """Every header a delivery sends besides what HTTP adds (Host, Content-Length)."""
    return {
        ID_HEADER: msg_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature_header(secrets, msg_id, timestamp, body),
        "content-type": "application/json",
    }


def verify(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: int,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
) -> bool:
    """True if any ``v1`` signature in ``headers`` is ``secret``'s over ``body``, signed within
    ``tolerance_seconds`` of ``now``. Header names are matched case-insensitively; ``body`` must be
    the raw bytes received. ValueError only for a malformed ``secret``."""
    key = _key(secret)
    lowered = {name.lower(): value for name, value in headers.items()}
    msg_id = lowered.get(ID_HEADER, "")
    raw_timestamp = lowered.get(TIMESTAMP_HEADER, "").strip()
    if not _MSG_ID.fullmatch(msg_id) or not _TIMESTAMP.fullmatch(raw_timestamp):
        return False
    timestamp = int(raw_timestamp)
    if abs(now - timestamp) > tolerance_seconds:
        return False
    expected = _mac(key, msg_id, timestamp, body)
    matched = False
    for candidate in lowered.get(SIGNATURE_HEADER, "").split():
        version, _, encoded = candidate.partition(",")
        if version != SIGNATURE_VERSION:
            continue
        try:
            given = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):  # also non-ASCII text
            continue
        # No early exit: the time taken does not tell which candidate matched.
        matched |= hmac.compare_digest(given, expected)
    return matched
