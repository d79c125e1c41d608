"""Identifiers: a prefix naming the kind of thing, then a time-ordered random part.

``evt_01JZ...``: 10 characters of milliseconds since the epoch and 16 of
randomness, Crockford base32 (the ULID layout), so ids sort by creation time.
"""

from __future__ import annotations

import secrets
import time
from datetime import UTC, datetime

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _base32(number: int, length: int) -> str:
    chars = []
    for _ in range(length):
        number, digit = divmod(number, 32)
        chars.append(_CROCKFORD[digit])
    return "".join(reversed(chars))


def new_id(prefix: str) -> str:
    millis = time.time_ns() // 1_000_000
    return f"{prefix}_{_base32(millis, 10)}{_base32(secrets.randbits(80), 16)}"


def issued_at(identifier: str) -> datetime:
    """When ``new_id`` made ``identifier`` (to the millisecond), from its time part."""
    _, _, body = identifier.rpartition("_")
    if len(body) != 26:
        raise ValueError(f"not a Kaibo id: {identifier!r}")
    millis = 0
    for char in body[:10]:
        digit = _CROCKFORD.find(char)
        if digit < 0:
            raise ValueError(f"not a Kaibo id: {identifier!r}")
        millis = millis * 32 + digit
    seconds, remainder = divmod(millis, 1000)
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=remainder * 1000)


def event_id() -> str:
    return new_id("evt")


def project_id() -> str:
    return new_id("prj")


def job_id() -> str:
    return new_id("job")
