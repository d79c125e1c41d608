"""Instants as Kaibo stores and hashes them: every accepted instant round-trips in the YYYY- form."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kaibo_core.core.clock import format_instant, parse_instant


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (datetime(1, 1, 1, tzinfo=UTC), "0001-01-01T00:00:00.000Z"),
        (datetime(999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC), "0999-12-31T23:59:59.999Z"),
        (datetime(2026, 6, 2, 9, 30, tzinfo=UTC), "2026-06-02T09:30:00.000Z"),
        (datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC), "9999-12-31T23:59:59.000Z"),
    ],
)
def test_given_any_year_then_the_canonical_form_has_four_digits(moment: datetime, text: str) -> None:
    assert format_instant(moment) == text
    assert parse_instant(text) == moment.replace(microsecond=moment.microsecond // 1000 * 1000)


@pytest.mark.parametrize("text", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_given_an_offset_that_leaves_the_years_0001_to_9999_then_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="0001-9999"):
        parse_instant(text)


@given(st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)))
def test_given_any_instant_then_format_and_parse_round_trip(naive: datetime) -> None:
    moment = naive.replace(tzinfo=UTC, microsecond=naive.microsecond // 1000 * 1000)
    assert parse_instant(format_instant(moment)) == moment
    assert format_instant(parse_instant(format_instant(moment))) == format_instant(moment)


@pytest.mark.parametrize(
    ("text", "utc"),
    [
        ("2026-06-01T09:00:00Z", datetime(2026, 6, 1, 9, tzinfo=UTC)),
        ("2026-06-01t09:00:00z", datetime(2026, 6, 1, 9, tzinfo=UTC)),  # RFC 3339 allows either case
        ("2026-06-01T09:00:00.5-05:30", datetime(2026, 6, 1, 14, 30, 0, 500_000, tzinfo=UTC)),
        ("2026-06-01T09:00:00.123456789+02:00", datetime(2026, 6, 1, 7, 0, 0, 123_456, tzinfo=UTC)),
    ],
)
def test_given_rfc_3339_then_the_instant_in_utc(text: str, utc: datetime) -> None:
    assert parse_instant(text) == utc


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("2026-W22-1T09:00:00Z", "not an RFC 3339"),  # ISO 8601 week date
        ("20260601T090000Z", "not an RFC 3339"),  # ISO 8601 basic format
        ("2026-06-01T09:00Z", "not an RFC 3339"),  # no seconds
        ("2026-06-01T09:00:00+05", "not an RFC 3339"),  # offset without minutes
        ("2026-06-01T09:00:00+05:30:15", "not an RFC 3339"),
        ("2026-06-01T09:00:00,5Z", "not an RFC 3339"),
        ("2026-06-01 09:00:00Z", "not an RFC 3339"),
        ("", "not an RFC 3339"),
        ("2026-06-01T09:00:00", "needs a time zone offset"),
        ("2026-06-01T09:00:00+24:00", "out of range"),
        ("2026-02-30T09:00:00Z", "no such date or time"),
    ],
)
def test_given_anything_but_rfc_3339_with_an_offset_then_a_message_a_person_can_act_on(
    text: str, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem) as refused:
        parse_instant(text)
    assert "2026-06-02T09:30:00Z" in str(refused.value) or "0001-9999" in str(refused.value)
    assert "isoformat" not in str(refused.value)
    assert "timedelta" not in str(refused.value)
