"""A stored memory read back as a structuring candidate is read up to MAX_CANDIDATE_CHARS: a long
episode (a 16 KB message of dates, a 250 KB file) cost seconds per statement of every later event,
and one remember could hold a structuring slot for minutes (a security audit's finding)."""

from __future__ import annotations

from kaibo_core.core.structuring.classify import MAX_CANDIDATE_CHARS, candidate_subject, statement_of_text
from kaibo_core.core.structuring.restated import read
from kaibo_core.core.structuring.statements import MAX_PARSED_CHARS


def test_given_a_long_stored_memory_then_only_its_opening_is_read_and_it_stays_unparseable() -> None:
    long = "\n".join(["1/" * 197] * 400)  # 158 KB of dates
    statement = statement_of_text(long)
    assert len(statement.text) <= MAX_CANDIDATE_CHARS
    assert MAX_CANDIDATE_CHARS > MAX_PARSED_CHARS
    assert not statement.parseable  # as the whole text: too long to parse either way


def test_given_the_same_candidate_again_then_it_is_read_once() -> None:
    text = "Mia's flight lands at 8:40pm on Saturday."
    assert statement_of_text(text) is statement_of_text(text)
    assert read(text) is read(text)
    assert candidate_subject(text, None) == candidate_subject(text, None)
