"""A memory that only asks is no answer (core/recall/asked_back.py; docs/recall.md, "Questions are no
answers"): the best memory below it about the same thing comes first, and nothing is dropped."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kaibo_core.core.recall.asked_back import MAX_CHECKED, answers_before_questions, only_asks
from kaibo_core.core.recall.selection import Ranked
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.structuring.rules import RuleStructurer
from kaibo_core.core.text import analyze
from kaibo_core.runtime.embedded import EmbeddedKaibo

QUESTION = "When does Mia's flight land?"
WEIGHTS = dict.fromkeys(analyze(QUESTION), 1.0)
ASKING = "Did Mia's flight land on time? Did it land at 9 or so?"
ANSWER = "Mia's flight lands at 8:40pm, Terminal 2."


def memory(memory_id: str, text: str, score: float) -> Ranked:
    return Ranked(memory_id, score, frozenset(analyze(text)), text)


def ids(ranked: list[Ranked]) -> list[str]:
    return [m.memory_id for m in ranked]


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        (ASKING, True),
        ("Is the billing DB migration still on the 13th or did it move to the 20th?", True),
        (ANSWER, False),
        ("Is it Tuesday? Yes, Tuesday at 10.", False),  # asked and answered
        ("", False),
    ],
)
def test_a_memory_only_asks_when_every_statement_is_a_question(text: str, asks: bool) -> None:
    assert only_asks(text) is asks


def test_the_answer_below_a_question_comes_first_at_its_score_and_the_question_stays() -> None:
    order = answers_before_questions([memory("q", ASKING, 9.0), memory("a", ANSWER, 6.5)], WEIGHTS)
    assert ids(order) == ["a", "q"]
    assert order[0].score == pytest.approx(9.0)


def test_a_memory_about_something_else_does_not_answer_in_its_place() -> None:
    other = memory("o", "Terminal 2 parking is on level 4.", 6.5)
    assert ids(answers_before_questions([memory("q", ASKING, 9.0), other], WEIGHTS)) == ["q", "o"]


def test_a_statement_first_and_two_questions_in_a_row_keep_their_places() -> None:
    first = [memory("a", ANSWER, 9.0), memory("q", ASKING, 6.5)]
    assert ids(answers_before_questions(first, WEIGHTS)) == ["a", "q"]
    asked_twice = [memory("q1", ASKING, 9.0), memory("q2", "Has Mia's flight landed?", 8.0)]
    assert ids(answers_before_questions(asked_twice, WEIGHTS)) == ["q1", "q2"]


def test_each_question_gets_the_next_answer_below_it() -> None:
    ranked = [
        memory("q1", ASKING, 9.0),
        memory("a1", ANSWER, 8.0),
        memory("q2", "When does Mia's flight land, 9?", 7.0),
        memory("a2", "Mia's flight lands at 9pm now.", 6.0),
    ]
    assert ids(answers_before_questions(ranked, WEIGHTS)) == ["a1", "q1", "a2", "q2"]


def test_only_the_best_ranked_are_compared() -> None:
    fillers = [memory(f"q{i}", ASKING, 20.0 - i) for i in range(MAX_CHECKED)]
    ranked = [*fillers, memory("a", ANSWER, 1.0)]
    assert ids(answers_before_questions(ranked, WEIGHTS)) == ids(ranked)


def test_through_the_service_the_answer_is_the_top_item_and_the_question_is_still_cited() -> None:
    project = ProjectId("prj_asked")
    kaibo = EmbeddedKaibo(RuleStructurer(), clock=lambda: datetime(2026, 7, 1, tzinfo=UTC))
    notes = [ANSWER, "Leo starts swimming lessons in September.", ASKING]
    for index, text in enumerate(notes):
        event = {
            "idempotencyKey": f"note-{index}",
            "kind": "message",
            "occurredAt": f"2026-06-0{index + 1}T09:00:00Z",
            "payload": {"role": "user", "text": text},
        }
        kaibo.remember(project, {"stream": "s", "events": [event]})
    texts = [item["text"] for item in kaibo.recall(project, {"question": QUESTION})["items"]]
    assert texts[0] == ANSWER
    assert ASKING in texts
