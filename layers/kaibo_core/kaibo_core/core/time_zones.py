"""IANA time zones (zoneinfo with the tzdata package, so every host resolves the same names)."""

from __future__ import annotations

from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


@lru_cache(maxsize=256)
def zone(name: str) -> ZoneInfo:
    """The zone named ``name``; raises ValueError for an unknown or malformed name."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValueError(f"unknown time zone {name!r}") from exc


def is_time_zone(name: str) -> bool:
    try:
        zone(name)
    except ValueError:
        return False
    return True
