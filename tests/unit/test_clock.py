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
