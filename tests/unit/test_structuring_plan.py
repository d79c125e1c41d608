"""The stored plan of an event (``core/structuring/plan.py``): what a redelivered job reads back
to make the same memories, stored small enough to sit beside the event's text."""

from __future__ import annotations

import json

from kaibo_core.core.structuring.drafts import Link, MemoryDraft
from kaibo_core.core.structuring.plan import MIN_SPAN_CHARS, decode_plan, encode_plan
from kaibo_core.core.structuring.statements import MAX_STATEMENTS, split_statements

TEXT = "Standup moves to 10:00. " + "The archive holds last year's reports for the finance team. " * 50


def test_a_plan_reads_back_as_the_same_drafts() -> None:
    drafts = [
        MemoryDraft(
            "fact",
            "Standup is at 10:00.",
            "2026-06-01T09:00:00.000Z",
            0.8,
            subject="standup",
            links=(Link("supersedes", "mem_old"),),
        ),
        MemoryDraft("episode", TEXT[24:].strip(), "2026-06-01T09:00:00.000Z", 0.6),
        MemoryDraft(
            "episode",
            "Not in the text, and long enough to be a span if it were. " * 3,
            "2026-06-01T09:00:00.000Z",
            0.5,
        ),
    ]

    assert decode_plan(encode_plan(drafts, TEXT), TEXT) == drafts


def test_a_long_piece_of_the_text_is_stored_as_where_it_is_not_again() -> None:
    piece = TEXT[24:].strip()
    assert len(piece) >= MIN_SPAN_CHARS
    stored = encode_plan([MemoryDraft("episode", piece, "2026-06-01T09:00:00.000Z", 0.6)], TEXT)

    assert piece not in stored
    assert len(stored) < 200
    assert json.loads(stored)[0]["span"] == [24, 24 + len(piece)]


def test_what_is_left_over_past_the_statement_limit_is_a_piece_of_the_text() -> None:
    text = "\n".join(f"Fact  number {n} is true.   Another one  here." for n in range(MAX_STATEMENTS))
    overflow = split_statements(text).overflow

    assert overflow
    assert overflow in text  # as written, spacing and lines kept: storable as a span


def test_a_long_text_is_split_between_words_and_loses_nothing() -> None:
    sentence = ("The archive holds report number 1234 for finance " * 20).strip() + ". "  # ~1,000 chars
    text = "So. " + sentence * 25  # fewer statements than the limit: the split ends at MAX_SPLIT_CHARS
    split = split_statements(text)
    pieces = [*(s.text for s in split.statements), split.overflow]

    assert len(split.statements) < MAX_STATEMENTS
    words = {"So.", "The", "archive", "holds", "report", "number", "1234", "for", "finance", "finance."}
    assert {word for piece in pieces for word in piece.split()} <= words  # no word cut in two
    assert sum(len(piece.split()) for piece in pieces) == len(text.split())
