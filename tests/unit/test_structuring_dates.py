"""Date resolution of the rule structurer (docs/structuring-rules.md, "Dates")."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaibo_core.core.structuring.dates import (
    day_of_month,
    format_date,
    infer_year,
    local_date,
    resolve_dates,
    weekday_date,
)
from kaibo_core.core.structuring.drafts import EventToStructure
from kaibo_core.core.structuring.rules import RuleStructurer

PROPERTY = settings(max_examples=200, deadline=None, derandomize=True)
TUESDAY = date(2026, 6, 2)  # the reference event date of the examples in the docs


def resolved(text: str, today: date = TUESDAY) -> str:
    return resolve_dates(text, today).text


# --- the event's local date -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instant", "zone", "expected"),
    [
        ("2026-06-02T23:30:00Z", "Asia/Tokyo", date(2026, 6, 3)),
        ("2026-06-02T23:30:00Z", "UTC", date(2026, 6, 2)),
        ("2026-06-02T03:00:00Z", "America/Los_Angeles", date(2026, 6, 1)),
        ("2026-06-02T22:30:00Z", "Europe/Berlin", date(2026, 6, 3)),
        ("2026-06-02T23:30:00Z", "Not/AZone", date(2026, 6, 2)),  # unknown: the default (UTC)
    ],
)
def test_local_date_is_the_calendar_date_in_the_events_time_zone(
    instant: str, zone: str, expected: date
) -> None:
    assert local_date(instant, zone) == expected


def test_tomorrow_in_tokyo_is_a_day_later_than_in_utc_for_the_same_instant() -> None:
    instant = "2026-06-02T23:30:00Z"
    assert resolved("tomorrow", local_date(instant, "Asia/Tokyo")) == "tomorrow (June 4, 2026)"
    assert resolved("tomorrow", local_date(instant, "UTC")) == "tomorrow (June 3, 2026)"


# --- year inference ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("today", "month", "day", "expected"),
    [
        (date(2026, 6, 2), 7, 17, date(2026, 7, 17)),
        (date(2026, 6, 2), 5, 1, date(2026, 5, 1)),  # a month ago: this year, not next
        (date(2026, 11, 20), 1, 15, date(2027, 1, 15)),  # next January
        (date(2026, 2, 10), 12, 3, date(2025, 12, 3)),  # last December
        (date(2026, 6, 2), 12, 1, date(2026, 12, 1)),  # 182 days ahead: still the future
        (date(2026, 6, 2), 12, 5, date(2025, 12, 5)),  # 186 days ahead: the past is nearer
        (date(2026, 12, 31), 1, 1, date(2027, 1, 1)),
    ],
)
def test_a_month_day_takes_the_year_nearest_the_event_leaning_to_the_future(
    today: date, month: int, day: int, expected: date
) -> None:
    assert infer_year(month, day, today) == expected


def test_february_29_takes_the_nearest_leap_year_or_stays_unresolved() -> None:
    assert infer_year(2, 29, date(2028, 1, 10)) == date(2028, 2, 29)
    assert infer_year(2, 29, date(2026, 6, 2)) is None
    assert resolved("due Feb 29") == "due Feb 29"


@given(
    st.dates(min_value=date(1990, 1, 1), max_value=date(2090, 12, 31)), st.integers(1, 12), st.integers(1, 28)
)
@PROPERTY
def test_the_inferred_date_lies_in_the_window(today: date, month: int, day: int) -> None:
    inferred = infer_year(month, day, today)
    assert inferred is not None
    assert -182 <= (inferred - today).days <= 183
    assert (inferred.month, inferred.day) == (month, day)


# --- each written form --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The release target is July 17.", "The release target is July 17, 2026."),
        ("from July 13 to July 17", "from July 13, 2026 to July 17, 2026"),
        ("on Jul 17th", "on Jul 17th, 2026"),
        ("on 17 July", "on 17 July 2026"),
        ("the 5th of August", "the 5th of August 2026"),
        ("on July 17, 2027", "on July 17, 2027"),  # a year is already there
        ("on 17 July 2027", "on 17 July 2027"),
        ("on 2026-07-17", "on 2026-07-17"),
        ("tomorrow", "tomorrow (June 3, 2026)"),
        ("Tomorrow we ship", "Tomorrow (June 3, 2026) we ship"),
        ("today", "today (June 2, 2026)"),
        ("tonight", "tonight (June 2, 2026)"),
        ("yesterday", "yesterday (June 1, 2026)"),
        ("this morning", "this morning (June 2, 2026)"),
        ("the day after tomorrow", "the day after tomorrow (June 4, 2026)"),
        ("the day before yesterday", "the day before yesterday (May 31, 2026)"),
        ("next Friday", "next Friday (June 12, 2026)"),
        ("on Friday", "on Friday (June 5, 2026)"),
        ("by Friday", "by Friday (June 5, 2026)"),
        ("this Friday", "this Friday (June 5, 2026)"),
        ("last Friday", "last Friday (May 29, 2026)"),
        ("moved to Thursday", "moved to Thursday (June 4, 2026)"),
        ("in 3 days", "in 3 days (June 5, 2026)"),
        ("in three days", "in three days (June 5, 2026)"),
        ("in a week", "in a week (June 9, 2026)"),
        ("in 2 weeks", "in 2 weeks (June 16, 2026)"),
        ("in 1 month", "in 1 month (July 2, 2026)"),
        ("two weeks ago", "two weeks ago (May 19, 2026)"),
        ("next week", "next week (week of June 8, 2026)"),
        ("this week", "this week (week of June 1, 2026)"),
        ("last week", "last week (week of May 25, 2026)"),
        ("next month", "next month (July 2026)"),
        ("next year", "next year (2027)"),
        ("due the 22nd.", "due the 22nd (June 22, 2026)."),
        ("gave us till the 1st for it", "gave us till the 1st (July 1, 2026) for it"),  # June 1 is gone
        ("on Friday the 12th", "on Friday the 12th (June 12, 2026)"),
        ("pushed to Wednesday 3rd, same time", "pushed to Wednesday 3rd (June 3, 2026), same time"),
        ("by Friday 12 June", "by Friday 12 June 2026"),  # one date, not a Friday and a 12 June
        ("on Friday the 12th of June", "on Friday the 12th of June 2026"),
    ],
)
def test_each_date_form_keeps_its_words_and_adds_the_date(text: str, expected: str) -> None:
    assert resolved(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "We may 5 times over",  # "may" is a verb unless capitalized
        "We march 3 abreast",
        "tomorrow's standup",  # a possessive stays as written
        "on Fridays we deploy",  # a habit, not a date
        "the Friday design review",  # a bare weekday names the meeting, not a date
        "version 2.3 is out",
        "at 10:30",
        "the printer on the 3rd floor",  # an ordinal before a noun counts floors, grades, times
        "it was the 2nd time",
        "Rent is $1,850 a month, due on the 1st.",  # every month's 1st
        "The quarterly newsletter goes out on the 5th.",
        "Fibrenet is €39.90/month, direct debit on the 3rd.",
        "Payroll cutoff for March is the 23rd.",  # March's 23rd, not this month's
    ],
)
def test_words_that_are_not_dates_stay_as_they_are(text: str) -> None:
    assert resolve_dates(text, TUESDAY) == resolve_dates(text, TUESDAY)
    assert resolved(text) == text


@pytest.mark.parametrize(
    ("modifier", "weekday", "expected"),
    [
        ("next", 4, date(2026, 6, 12)),  # the Friday of next week
        ("next", 0, date(2026, 6, 8)),
        ("next", 1, date(2026, 6, 9)),  # next Tuesday, said on a Tuesday
        ("this", 1, date(2026, 6, 2)),  # today counts
        ("on", 1, date(2026, 6, 2)),
        ("on", 0, date(2026, 6, 8)),  # Monday has passed this week
        ("last", 1, date(2026, 5, 26)),
        ("since", 0, date(2026, 6, 1)),
    ],
)
def test_weekday_conventions(modifier: str, weekday: int, expected: date) -> None:
    assert weekday_date(modifier, weekday, TUESDAY) == expected


@pytest.mark.parametrize(
    ("modifier", "weekday", "expected"),
    [
        ("on", 5, date(2026, 5, 30)),  # "I went to a concert on Saturday", said on a Tuesday
        ("on", 1, date(2026, 6, 2)),  # today counts
        ("this", 0, date(2026, 6, 1)),  # "we met this Monday"
        ("next", 4, date(2026, 6, 12)),  # "I booked it for next Friday": still ahead
        ("for", 5, date(2026, 6, 6)),  # "we booked the venue for Saturday": still ahead
        ("last", 1, date(2026, 5, 26)),
    ],
)
def test_in_a_statement_about_the_past_on_and_this_point_back(
    modifier: str, weekday: int, expected: date
) -> None:
    assert weekday_date(modifier, weekday, TUESDAY, past=True) == expected


def test_the_structurer_reads_the_weekday_of_a_story_as_the_one_just_gone() -> None:
    def memory(text: str) -> str:
        event = EventToStructure("evt_1", "s", 1, "h" * 64, "message", text, "2026-06-02T09:00:00.000Z")
        return RuleStructurer().structure(event, lambda _query: [])[0].content

    assert memory("I went to a concert on Saturday.") == "I went to a concert on Saturday (May 30, 2026)."
    assert memory("The concert is on Saturday.") == "The concert is on Saturday (June 6, 2026)."


@pytest.mark.parametrize(
    ("day", "weekday", "past", "expected"),
    [
        (22, None, False, date(2026, 6, 22)),
        (2, None, False, date(2026, 6, 2)),  # today counts
        (1, None, False, date(2026, 7, 1)),
        (31, None, False, date(2026, 7, 31)),  # June has no 31st
        (1, None, True, date(2026, 6, 1)),  # "we met on the 1st": the one gone
        (22, None, True, date(2026, 5, 22)),
        (3, 2, False, date(2026, 6, 3)),  # Wednesday the 3rd
        (1, 2, False, date(2026, 7, 1)),  # Wednesday the 1st: July's
        (12, 3, False, date(2026, 6, 12)),  # Thursday the 12th: no Thursday soon, the nearest 12th
        (32, None, False, None),
    ],
)
def test_a_day_of_the_month_is_the_next_one_on_its_weekday(
    day: int, weekday: int | None, past: bool, expected: date | None
) -> None:
    assert day_of_month(day, weekday, TUESDAY, past) == expected


def test_a_moved_date_said_as_weekday_and_day_is_that_day_not_the_next_weekday() -> None:
    event = EventToStructure(
        "evt_1", "s", 1, "h" * 64, "message",
        "School pushed parents' evening back to Wednesday the 30th, same time.",
        "2026-09-17T09:00:00.000Z",
    )  # fmt: skip
    content = RuleStructurer().structure(event, lambda _query: [])[0].content
    assert "Wednesday the 30th (September 30, 2026)" in content
    assert "September 23" not in content


def test_month_arithmetic_clamps_to_the_last_day() -> None:
    assert resolved("in 1 month", date(2026, 1, 31)) == "in 1 month (February 28, 2026)"
    assert resolved("next month", date(2026, 12, 15)) == "next month (January 2027)"


def test_resolved_dates_are_listed_in_order() -> None:
    result = resolve_dates("Move it from July 13 to July 17, then review tomorrow.", TUESDAY)
    assert result.dates == (date(2026, 7, 13), date(2026, 7, 17), date(2026, 6, 3))
    assert format_date(result.dates[0]) == "July 13, 2026"


_PIECES = st.sampled_from(
    ["July 17", "17 July", "tomorrow", "next Friday", "on Monday", "in 3 days", "next week", "the standup",
     "May 5", "at 9am", "2026-07-01", "yesterday", "last month", ",", ".", "and", "Jul 4th", "this Friday",
     "the 22nd", "Wednesday the 3rd", "by Friday 12 June", "on the 3rd floor"]
)  # fmt: skip


@given(st.lists(_PIECES, max_size=8), st.dates(min_value=date(2000, 1, 1), max_value=date(2080, 1, 1)))
@PROPERTY
def test_resolution_is_idempotent_and_keeps_every_original_word(pieces: list[str], today: date) -> None:
    text = " ".join(pieces)
    once = resolve_dates(text, today).text
    assert resolve_dates(once, today).text == once
    position = 0
    for word in text.split():
        found = once.find(word.rstrip(",."), position)
        assert found >= 0, (text, once)
        position = found
