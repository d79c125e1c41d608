"""Instants as Kaibo stores and hashes them: UTC, millisecond precision, ``Z``.

Every timestamp in a hashed header uses exactly this form
(``2026-06-02T09:30:00.000Z``), so that two implementations agree byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def format_instant(moment: datetime) -> str:
    """Canonical text of an aware datetime: UTC, milliseconds (truncated), ``Z``."""
    if moment.tzinfo is None:
        raise ValueError("instant must carry a time zone")
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def epoch_ms(moment: datetime) -> int:
    """Milliseconds since the epoch (what postings and filters compare)."""
    return int(moment.timestamp() * 1000)


def instant_ms(text: str) -> int:
    """``epoch_ms`` of RFC 3339 text with an offset."""
    return epoch_ms(parse_instant(text))


def parse_instant(text: str) -> datetime:
    """Parse RFC 3339 text with an explicit offset (``Z`` or ``+hh:mm``)."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise ValueError("timestamp needs a time zone offset, e.g. 2026-06-02T09:30:00Z")
    return moment.astimezone(UTC)
