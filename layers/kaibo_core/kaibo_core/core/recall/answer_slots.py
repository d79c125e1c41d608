"""The kind of value a question asks for ("When is …?" a date or a time, "Who owns …?" a name),
so that recall can tell two memories that give the same question two different answers
(``kaibo_core.core.recall.conflicts``). Pure: no I/O.

Only questions about the *current* value have a slot: "When did we ship?" asks about an event
(every past shipment is an answer), "When is the launch?" asks for the one current date.
"""

from __future__ import annotations

import re
from typing import Final

from kaibo_core.core.structuring.restated import ValueKind, read
from kaibo_core.core.text import analyze

_WHEN: Final[frozenset[ValueKind]] = frozenset({"date", "time"})
_SLOTS: Final[tuple[tuple[re.Pattern[str], frozenset[ValueKind]], ...]] = (
    (re.compile(r"\b(e-?mail|inbox)\b", re.IGNORECASE), frozenset({"email"})),
    (re.compile(r"^\s*(who|whom|whose|which person)\b", re.IGNORECASE), frozenset({"name"})),
    # "call" as a verb, not "on-call" (a role: "Who is on-call?")
    (re.compile(r"\b(phone|mobile|pager|hotline)\b|(?<![-\w])call\b", re.IGNORECASE), frozenset({"phone"})),
    (re.compile(r"\bnumber\b", re.IGNORECASE), frozenset({"phone", "number"})),
    (re.compile(r"\b(url|link|website|site)\b", re.IGNORECASE), frozenset({"url"})),
    (re.compile(r"^\s*(when|by when|until when|what time|what date|which day)\b", re.IGNORECASE), _WHEN),
    (re.compile(r"\b(deadline|due date|start date|what day)\b", re.IGNORECASE), _WHEN),
    (
        re.compile(
            r"^\s*how (much|many|long|big|often)\b|\b(price|cost|budget|headcount|limit)\b", re.IGNORECASE
        ),
        frozenset({"number", "amount"}),
    ),
)
#: Questions about a past event, not a current value.
_PAST_QUESTION: Final = re.compile(
    r"\b(did|was|were|had|used to|last (?:year|month|week|time)|ago|originally|before)\b", re.IGNORECASE
)
#: Question words and fillers: not part of what the question is about.
_QUESTION_WORDS: Final = frozenset(
    analyze(
        "when who whom whose what which where how much many long time date day deadline due "
        "current currently now"
    )
)


def asks_about_now(question: str) -> bool:
    """False for a question about the past ("When did …", "What was …"): every version answers it."""
    return _PAST_QUESTION.search(question) is None


def asked_kinds(question: str) -> frozenset[ValueKind]:
    """The kinds of value that answer ``question`` about a current value; empty when it asks none."""
    if not asks_about_now(question):
        return frozenset()
    for pattern, kinds in _SLOTS:
        if pattern.search(question):
            return kinds
    return frozenset()


def question_topic(question: str) -> frozenset[str]:
    """What the question is about: its stemmed terms without question words."""
    return frozenset(analyze(question)) - _QUESTION_WORDS


#: The words of a question that name the kind of value it asks for ("phone number", "email").
_KIND_NOUNS: Final = re.compile(
    r"\b(?:e-?mail|inbox|phone|mobile|cell|pager|hotline|number|url|link|website|deadline|due date|price"
    r"|cost)\b",
    re.IGNORECASE,
)


def kind_words(question: str) -> frozenset[str]:
    """The terms of ``question`` that name the kind of value it asks for about now ("What is Lena's
    phone number?": phone, number); empty when it asks for none."""
    if not asked_kinds(question):
        return frozenset()
    return frozenset(analyze(" ".join(_KIND_NOUNS.findall(question))))


def holds_value_of(text: str, kinds: frozenset[ValueKind]) -> bool:
    """``text`` holds a value of one of ``kinds`` (``asked_kinds``): "Lena: I'm on 0151 4409 2276
    from today" answers "What is Lena's phone number?" without the words "phone" or "number"."""
    return any(kind in kinds for kind, _ in read(text).values)
