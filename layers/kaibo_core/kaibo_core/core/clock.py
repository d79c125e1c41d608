"""Instants as Kaibo stores and hashes them: UTC, millisecond precision, ``Z``.

Every timestamp in a hashed header uses exactly this form
(``2026-06-02T09:30:00.000Z``), so that two implementations agree byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final

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


#: RFC 3339's date-time (section 5.6): a full date, ``T``, a time with seconds and an optional
#: fraction, then ``Z`` or ``±hh:mm``. ``T`` and ``Z`` in either case, as its grammar allows.
_RFC3339: Final = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt](?P<time>\d{2}:\d{2}:\d{2})(?:\.(?P<fraction>\d{1,9}))?"
    r"(?P<offset>[Zz]|[+-](?P<oh>\d{2}):(?P<om>\d{2}))"
)
_EXAMPLE: Final = "e.g. 2026-06-02T09:30:00Z or 2026-06-02T11:30:00+02:00"


def parse_instant(text: str) -> datetime:
    """Parse RFC 3339 text with an explicit offset (``Z`` or ``±hh:mm``), in UTC.

    ValueError, with a message a person can act on, for anything else (ISO 8601's other forms:
    week dates, no separators, no seconds, ``+05``, a comma before the fraction), and for an
    instant outside the years 0001-9999 once in UTC (``0001-01-01T00:00:00+14:00`` is in year 0)."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        missing = re.fullmatch(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?", text)
        if missing is not None:
            raise ValueError(f"timestamp needs a time zone offset ({_EXAMPLE})")
        raise ValueError(f"not an RFC 3339 date-time with seconds and an offset ({_EXAMPLE})")
    if match["oh"] is not None and (int(match["oh"]) > 23 or int(match["om"]) > 59):
        raise ValueError(f"offset {match['offset']} is out of range: -23:59 to +23:59 ({_EXAMPLE})")
    fraction = (match["fraction"] or "")[:6]  # microseconds; Kaibo keeps milliseconds
    offset = "+00:00" if match["offset"] in {"Z", "z"} else match["offset"]
    try:
        moment = datetime.fromisoformat(
            f"{match['date']}T{match['time']}{'.' + fraction.ljust(6, '0') if fraction else ''}{offset}"
        )
    except ValueError as exc:
        raise ValueError(f"no such date or time: {text} ({_EXAMPLE})") from exc
    try:
        return moment.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError("timestamp lies outside the years 0001-9999 in UTC") from exc
