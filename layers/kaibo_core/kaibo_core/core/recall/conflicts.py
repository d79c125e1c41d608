"""Recall's safety net for updates the structurer did not link (docs/structuring-rules.md, "Recall").

Two **active** memories may still disagree: "The launch is on March 3" and, a week later, "Launch
date: March 10", when the structurer did not recognise the second as an update. Recall must not
present both as current. ``outdated`` reads each of the best-ranked memories as a fact (subject,
attribute, value: ``kaibo_core.core.structuring.facts``) and, for two that give one subject's
attribute different values, names the older one (by ``validFrom``) outdated by the newer one. The
memory items already carry everything needed (text, ``validFrom``): no extra read. Recall applies
it to the candidates left after near-duplicates are collapsed, before the smallest set is chosen,
so the older memory is neither ranked nor packed.

The test is the structurer's own conflict test, so the net is as careful as the links are: guarded
statements (questions, hedges, reported speech, history, additions) state no fact, two holders'
or two speakers' general remarks do not compete, opinions are no values. Pure and bounded: at most
``MAX_CHECKED`` memories are read, each text once per container (cached).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Final

from kaibo_core.core.recall.answer_slots import asked_kinds, question_topic
from kaibo_core.core.recall.selection import Ranked
from kaibo_core.core.structuring.classify import statement_of_text
from kaibo_core.core.structuring.facts import (
    Fact,
    across_speakers,
    conflicts,
    history,
    parse_fact,
    unresolved,
)
from kaibo_core.core.structuring.restated import (
    VALUE_TYPES,
    Reading,
    is_attachment,
    past,
    read,
    replaces_value,
    settle_openings,
)
from kaibo_core.core.structuring.statements import split_statements
from kaibo_core.core.text import analyze

#: Only the best-ranked memories are compared (a question's answer is among the first few).
MAX_CHECKED: Final = 12
#: Texts longer than this are not read as facts (a fact is one short statement).
MAX_FACT_CHARS: Final = 400
#: Share of the question's topic words each of two competing answers must hold.
MIN_QUESTION_SHARE: Final = 0.5


@lru_cache(maxsize=2048)
def memory_fact(text: str) -> tuple[Fact, str] | None:
    """The fact a one-statement memory states, with its speaker ("" if none); None otherwise."""
    if len(text) > MAX_FACT_CHARS:
        return None
    statements = split_statements(unresolved(text)).statements
    if len(statements) != 1:
        return None
    fact = parse_fact(statements[0])
    return None if fact is None else (fact, (statements[0].speaker or "").lower())


def _retires(newer: tuple[Fact, str], older: tuple[Fact, str]) -> bool:
    (new, new_speaker), (old, old_speaker) = newer, older
    if new_speaker and old_speaker and new_speaker != old_speaker and not across_speakers(new, old):
        return False
    return conflicts(new, old, new.cued)


@lru_cache(maxsize=2048)
def memory_value(text: str) -> tuple[Reading, str] | None:
    """A one-statement memory read as topic words and values, with its speaker ("" if none);
    None for a statement that states no current value (question, hedge, history, past tense)."""
    if len(text) > MAX_FACT_CHARS:
        return None
    statement = statement_of_text(unresolved(text))
    if statement.guarded or history(statement) or past(statement.text) or is_attachment(statement.text):
        return None
    if len(split_statements(statement.text).statements) != 1:
        return None
    return read(statement.text), (statement.speaker or "").lower()


def _answers_otherwise(
    newer: tuple[Reading, str], older: tuple[Reading, str], kinds: frozenset[str], topic: frozenset[str]
) -> bool:
    """Two memories that answer the question (half of its topic words or more, a value of the
    kind it asks for) with different values, said by the same speaker."""
    (new, new_speaker), (old, old_speaker) = newer, older
    new, old = settle_openings(new, old)
    if new_speaker != old_speaker or (new.holders and old.holders and not new.holders & old.holders):
        return False
    new_answers, old_answers = _answers(new, kinds, topic), _answers(old, kinds, topic)
    if not new_answers or not old_answers or new_answers & old_answers:
        return False
    # The newer must say every question word the older says: "Acme's renewal" is not outdated
    # by "Globex's renewal" for a question about Acme.
    new_words, old_words = topic & new.words(), topic & old.words()
    if not old_words <= new_words or len(old_words) < MIN_QUESTION_SHARE * len(topic):
        return False
    # "The demo prep" does not outdate "the demo": a word of its own next to a question word.
    gained = new.topic - old.topic
    return not any(
        (first in gained and second in topic) or (first in topic and second in gained)
        for first, second in new.pairs
    )


def _answers(reading: Reading, kinds: frozenset[str], topic: frozenset[str]) -> frozenset[str]:
    """The values of the kinds asked for that the question does not name itself ("Globex" in
    "Who is the contact for Globex?" is what the question is about, not an answer)."""
    return frozenset(v for k, v in reading.values if k in kinds and not frozenset(analyze(v)) & topic)


def without_outdated(ranked: Sequence[Ranked], question: str = "") -> tuple[list[Ranked], dict[str, str]]:
    """``ranked`` without the memories ``outdated`` names, in order, and {dropped id: newer id}."""
    newer = outdated(ranked, question)
    return [memory for memory in ranked if memory.memory_id not in newer], newer


def outdated(ranked: Sequence[Ranked], question: str = "") -> dict[str, str]:
    """{older memory id: the newer memory id that gives its subject's attribute another value},
    among the first ``MAX_CHECKED`` of ``ranked`` that carry ``valid_from_ms``. Memories valid from
    the same instant are never judged (neither is newer).

    Three readings, most careful first: the structurer's fact conflict; a restatement with one
    value replaced (``structuring.restated``); and, for a question about a current value ("When
    is …?", "Who owns …?"), two memories of a value-holding type that both answer it with
    different values of the kind it asks for."""
    kinds, topic = asked_kinds(question), question_topic(question)
    checked = [m for m in ranked[:MAX_CHECKED] if m.valid_from_ms is not None]
    dropped: dict[str, str] = {}
    for index, first in enumerate(checked):
        for second in checked[index + 1 :]:
            if first.memory_id in dropped or second.memory_id in dropped:
                continue
            if first.valid_from_ms == second.valid_from_ms:
                continue
            newer, older = (
                (first, second)
                if (first.valid_from_ms or 0) > (second.valid_from_ms or 0)
                else (second, first)
            )
            if _outdates(newer, older, kinds, topic):
                dropped[older.memory_id] = newer.memory_id
    return dropped


def _outdates(newer: Ranked, older: Ranked, kinds: frozenset[str], topic: frozenset[str]) -> bool:
    new_fact, old_fact = memory_fact(newer.text), memory_fact(older.text)
    if new_fact is not None and old_fact is not None and _retires(new_fact, old_fact):
        return True
    if newer.memory_type not in VALUE_TYPES or older.memory_type not in VALUE_TYPES:
        return False
    new_value, old_value = memory_value(newer.text), memory_value(older.text)
    if new_value is None or old_value is None:
        return False
    if new_value[1] == old_value[1] and replaces_value(new_value[0], old_value[0]):
        return True
    return bool(kinds and topic) and _answers_otherwise(new_value, old_value, kinds, topic)
