"""Relative and partial dates, resolved against the event's local date (docs/structuring-rules.md).

The rewrite keeps every original word and adds what was implicit, so that recall (lexical)
still finds the words people used and also the absolute date:

    "July 17"        -> "July 17, 2026"          (a year is added)
    "17 July"        -> "17 July 2026"
    "tomorrow"       -> "tomorrow (June 4, 2026)"
    "next Friday"    -> "next Friday (June 12, 2026)"
    "in 3 days"      -> "in 3 days (June 5, 2026)"
    "next week"      -> "next week (week of June 8, 2026)"
    "next month"     -> "next month (July 2026)"
    "the 22nd"       -> "the 22nd (June 22, 2026)"
    "Friday the 12th" -> "Friday the 12th (June 12, 2026)"

Resolving an already resolved text changes nothing (the rewrite is idempotent).
"""

from __future__ import annotations

import re
from contextlib import suppress
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from kaibo_core.core.clock import parse_instant
from kaibo_core.core.structuring.drafts import DEFAULT_TIME_ZONE

MONTHS: Final[dict[str, int]] = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4, "apr": 4,
    "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8,
    "september": 9, "sept": 9, "sep": 9, "october": 10, "oct": 10, "november": 11, "nov": 11,
    "december": 12, "dec": 12,
}  # fmt: skip
MONTH_NAMES: Final = (
    "", "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
WEEKDAYS: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
#: Weekdays and months: capitalized, yet no name of anyone or anything.
TIME_NAMES: Final = frozenset(WEEKDAYS) | MONTHS.keys()
#: Month words that are also ordinary English words count as months only when capitalized.
_AMBIGUOUS_MONTHS: Final = frozenset({"may", "mar", "march"})
_NUMBER_WORDS: Final = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "a couple of": 2, "a few": 3,
}  # fmt: skip
#: Year inference: a month-day without a year takes the year that puts it in the window
#: [event date - PAST_WINDOW_DAYS, event date + FUTURE_WINDOW_DAYS] (nearest, future-leaning).
PAST_WINDOW_DAYS: Final = 182
FUTURE_WINDOW_DAYS: Final = 183

_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
#: A date written in full, as ``format_date`` writes it ("September 12, 2026").
_WRITTEN_DATE: Final = re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}}),\s+(\d{{4}})\b", re.IGNORECASE)
_WEEKDAY = "|".join(WEEKDAYS)
_YEAR_AFTER = r"(?!(?:,\s*|\s+)\d{4}\b)"
_ALREADY_RESOLVED = r"(?!\s*\()"
_COUNT = r"\d{1,3}|a couple of|a few|an|a|one|two|three|four|five|six|seven|eight|nine|ten"
#: A day of the month after a weekday, or after "the" ("Wednesday 30th", "the 22nd"), is a date; the
#: weekday alone is not resolved before it, nor before a day and its month ("Friday 25 September").
_DAY_AFTER = rf"(?:,?\s+(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)\b|,?\s+\d{{1,2}}\s+(?:of\s+)?(?:{_MONTH})\b)"
#: What may follow "the 22nd" for it to be a day: an end or a small word, not a noun ("the 3rd floor").
_AFTER_DAY = (
    r"(?=\s*$|\s*[^\w\s(]|\s+(?:at|by|for|instead|so|but|because|then|if|from|to|until|"
    r"till|with|when|as|same|now|this|next|please|latest|is|was|will)\b)"
)
#: A text that says something recurs each month: its "on the 1st" is every month's, not one date.
_MONTHLY: Final = re.compile(
    r"\b(?:every|each|a|per)\s+(?:month|quarter)\b|/\s?mo(?:nth)?\b|\bmonthly\b|\bquarterly\b"
    r"|\bof\s+(?:the|each|every)\s+month\b",
    re.IGNORECASE,
)
#: A month named by its full name ("Payroll cutoff for March is the 23rd": March's 23rd).
_MONTH_NAMED: Final = re.compile(
    r"\b(?:January|February|March|April|May|June|July|August|September|October|November|December)\b"
    r"|\b(?i:january|february|april|june|july|august|september|october|november|december)\b"
)
_DATE_PATTERN: Final = re.compile(
    rf"""
    \b(?P<md_month>{_MONTH})\.?\s+(?P<md_day>\d{{1,2}})(?P<md_suffix>st|nd|rd|th)?\b(?!:\d){_YEAR_AFTER}
  | \b(?P<dm_day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<dm_month>{_MONTH})\b\.?{_YEAR_AFTER}
  | \b(?:(?P<od_wd>{_WEEKDAY}),?\s+(?:the\s+)?|the\s+)(?P<od_day>\d{{1,2}})(?:st|nd|rd|th)\b
        (?!\s+(?:of\s+)?(?:{_MONTH})\b){_AFTER_DAY}{_ALREADY_RESOLVED}
  | \b(?P<rel>the\s+day\s+after\s+tomorrow|the\s+day\s+before\s+yesterday|today|tonight|tomorrow
        |yesterday|this\s+morning|this\s+afternoon|this\s+evening)\b(?!'){_ALREADY_RESOLVED}
  | \b(?P<wd_mod>this\s+coming|next|this|coming|last|past|on|by|until|till|before|after|from|since
        |to|for)
        \s+(?P<wd>{_WEEKDAY})\b(?!')(?!,?\s+(?:{_MONTH})\b)(?!{_DAY_AFTER}){_ALREADY_RESOLVED}
  | \bin\s+(?P<in_n>{_COUNT})\s+(?P<in_unit>days?|weeks?|months?)\b{_ALREADY_RESOLVED}
  | \b(?P<ago_n>{_COUNT})\s+(?P<ago_unit>days?|weeks?)\s+ago\b{_ALREADY_RESOLVED}
  | \b(?P<span_mod>next|this|last)\s+(?P<span_unit>week|month|year)\b{_ALREADY_RESOLVED}
    """,
    re.IGNORECASE | re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class ResolvedText:
    """A text with its dates made absolute, and the dates it names (in order of mention)."""

    text: str
    dates: tuple[date, ...]


def local_date(occurred_at: str, time_zone: str) -> date:
    """The calendar date of an instant in an IANA time zone (DEFAULT_TIME_ZONE if unknown)."""
    try:
        zone = ZoneInfo(time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        zone = ZoneInfo(DEFAULT_TIME_ZONE)
    return parse_instant(occurred_at).astimezone(zone).date()


def format_date(day: date) -> str:
    return f"{MONTH_NAMES[day.month]} {day.day}, {day.year}"


def dates_named(text: str, today: date) -> tuple[date, ...]:
    """Every date ``text`` names: those written in full ("September 12, 2026", as ``format_date``
    writes them) and those ``resolve_dates`` resolves against ``today``."""
    written = []
    for match in _WRITTEN_DATE.finditer(text):
        with suppress(ValueError):
            written.append(date(int(match.group(3)), MONTHS[match.group(1).lower()], int(match.group(2))))
    return (*written, *resolve_dates(text, today).dates)


def infer_year(month: int, day: int, today: date) -> date | None:
    """The date of ``month``/``day`` nearest to ``today``, leaning to the future (see module doc)."""
    options: list[date] = []
    for year in (today.year - 1, today.year, today.year + 1):
        try:
            options.append(date(year, month, day))
        except ValueError:
            continue
    for option in options:
        if -PAST_WINDOW_DAYS <= (option - today).days <= FUTURE_WINDOW_DAYS:
            return option
    return min(options, key=lambda option: abs((option - today).days), default=None)


def _count(word: str) -> int:
    lowered = " ".join(word.lower().split())
    return int(lowered) if lowered.isdigit() else _NUMBER_WORDS[lowered]


def _add_months(day: date, months: int) -> date:
    index = day.month - 1 + months
    year, month = day.year + index // 12, index % 12 + 1
    for last_day in (day.day, 30, 29, 28):
        try:
            return date(year, month, min(day.day, last_day))
        except ValueError:
            continue
    raise AssertionError("unreachable: every month has 28 days")


#: In a statement that tells the past, "on Saturday" and "this Monday" are the ones just gone
#: ("I went to a concert on Saturday"); "next", "for", "by", "until" … still point ahead ("I
#: booked the venue for Saturday").
_BACK_IN_THE_PAST: Final = frozenset({"on", "this"})


def weekday_date(modifier: str, weekday: int, today: date, past: bool = False) -> date:
    """``next``: that weekday in the next calendar week (weeks start on Monday);
    ``last``/``past``/``since``: the latest one before today; ``this``, ``coming`` and the
    prepositions (on, by, until...): the first one on or after today; but ``on`` and ``this`` in a
    statement that tells the past (``past``: "I went to a concert on Saturday"): the latest one on
    or before today."""
    modifier = " ".join(modifier.lower().split())
    if modifier == "next":
        next_monday = today + timedelta(days=7 - today.weekday())
        return next_monday + timedelta(days=weekday)
    if modifier in {"last", "past", "since"}:
        back = (today.weekday() - weekday) % 7 or 7
        return today - timedelta(days=back)
    if past and modifier in _BACK_IN_THE_PAST:
        return today - timedelta(days=(today.weekday() - weekday) % 7)
    return today + timedelta(days=(weekday - today.weekday()) % 7)


#: How many months ahead (or back) a day of the month is looked for on the weekday it is said with.
_WEEKDAY_MONTHS: Final = 2


def day_of_month(day: int, weekday: int | None, today: date, past: bool = False) -> date | None:
    """The date of "the ``day``th": the first one on or after today (this month or the next), or in a
    statement that tells the past the latest one on or before today; said with a weekday
    ("Wednesday the 30th"), the nearest such day that falls on it, within two months, else the
    nearest day (the weekday may be wrong, the number rarely is). None for a day no month has."""
    if not 1 <= day <= 31:
        return None
    step = -1 if past else 1
    options: list[date] = []
    month = today.replace(day=1)
    for _ in range(12):
        with suppress(ValueError):
            option = month.replace(day=day)
            if (option <= today) if past else (option >= today):
                options.append(option)
        month = _add_months(month, step)
    matching = [option for option in options[:_WEEKDAY_MONTHS] if option.weekday() == weekday]
    return next(iter(matching or options), None)


def _month_day(month_word: str, day_text: str, today: date) -> date | None:
    if month_word.lower() in _AMBIGUOUS_MONTHS and not month_word[0].isupper():
        return None
    return infer_year(MONTHS[month_word.lower().rstrip(".")], int(day_text), today)


def _relative_day(phrase: str, today: date) -> date:
    phrase = " ".join(phrase.lower().split())
    offsets = {"the day after tomorrow": 2, "tomorrow": 1, "the day before yesterday": -2, "yesterday": -1}
    return today + timedelta(days=offsets.get(phrase, 0))


def _span(modifier: str, unit: str, today: date) -> tuple[date, str]:
    step = {"next": 1, "this": 0, "last": -1}[modifier.lower()]
    unit = unit.lower()
    if unit == "week":
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
        return monday, f"week of {MONTH_NAMES[monday.month]} {monday.day}, {monday.year}"
    if unit == "month":
        first = _add_months(today.replace(day=1), step)
        return first, f"{MONTH_NAMES[first.month]} {first.year}"
    first_of_year = date(today.year + step, 1, 1)
    return first_of_year, str(first_of_year.year)


def _resolve_match(match: re.Match[str], today: date, past: bool) -> tuple[str, date] | None:
    """The replacement text of one date mention and the date it names, or None to keep it."""
    groups = match.groupdict()
    words = match.group(0)
    if groups["md_month"]:
        day = _month_day(groups["md_month"], groups["md_day"], today)
        return (f"{words}, {day.year}", day) if day else None
    if groups["dm_month"]:
        day = _month_day(groups["dm_month"], groups["dm_day"], today)
        return (f"{words.rstrip('.')} {day.year}", day) if day else None
    if groups["od_day"]:
        weekday = WEEKDAYS.index(groups["od_wd"].lower()) if groups["od_wd"] else None
        day = day_of_month(int(groups["od_day"]), weekday, today, past)
        if day is None:
            return None
    elif groups["rel"]:
        day = _relative_day(groups["rel"], today)
    elif groups["wd"]:
        day = weekday_date(groups["wd_mod"], WEEKDAYS.index(groups["wd"].lower()), today, past)
    elif groups["in_unit"]:
        count, unit = _count(groups["in_n"]), groups["in_unit"].lower()
        if unit.startswith("month"):
            day = _add_months(today, count)
        else:
            day = today + timedelta(days=count * (7 if unit.startswith("week") else 1))
    elif groups["ago_unit"]:
        count = _count(groups["ago_n"])
        day = today - timedelta(days=count * (7 if groups["ago_unit"].lower().startswith("week") else 1))
    else:
        day, label = _span(groups["span_mod"], groups["span_unit"], today)
        return f"{words} ({label})", day
    return f"{words} ({format_date(day)})", day


def resolve_dates(text: str, today: date, past: bool = False) -> ResolvedText:
    """Rewrite the dates in ``text`` against ``today`` (the event's local date); ``past``: the
    text tells what happened, so "on Saturday" is the Saturday just gone."""
    pieces: list[str] = []
    dates: list[date] = []
    position = 0
    own_month = _MONTHLY.search(text) is not None or _MONTH_NAMED.search(text) is not None
    for match in _DATE_PATTERN.finditer(text):
        if own_month and match.group("od_day") and not match.group("od_wd"):
            continue  # "due on the 1st" of "$1,850 a month", "the 23rd" of "Payroll cutoff for March"
        resolved = _resolve_match(match, today, past)
        if resolved is None:
            continue
        replacement, day = resolved
        pieces.append(text[position : match.start()])
        pieces.append(replacement)
        dates.append(day)
        position = match.end()
    if not dates:
        return ResolvedText(text, ())
    pieces.append(text[position:])
    return ResolvedText("".join(pieces), tuple(dates))
