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
    # The year always in four digits: strftime's %Y drops the zeros of years before 1000 on
    # some platforms, and the hashed header promises the YYYY- form (docs/verify.md).
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:"
        f"{utc.second:02d}.{utc.microsecond // 1000:03d}Z"
    )


def epoch_ms(moment: datetime) -> int:
    """Milliseconds since the epoch (what postings and filters compare)."""
    return int(moment.timestamp() * 1000)


def instant_ms(text: str) -> int:
    """``epoch_ms`` of RFC 3339 text with an offset."""
    return epoch_ms(parse_instant(text))


def parse_instant(text: str) -> datetime:
    """Parse RFC 3339 text with an explicit offset (``Z`` or ``+hh:mm``), in UTC.

    ValueError for anything else, including an instant outside the years 0001-9999 once in UTC
    (``0001-01-01T00:00:00+14:00`` is in year 0)."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise ValueError("timestamp needs a time zone offset, e.g. 2026-06-02T09:30:00Z")
    try:
        return moment.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("timestamp lies outside the years 0001-9999 in UTC") from exc
