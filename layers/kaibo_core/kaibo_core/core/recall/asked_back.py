"""A memory that only asks is no answer (docs/recall.md, "Questions are no answers").

"Did Mia's flight land on time? Did it land at 9 or so?" repeats every word of "When does Mia's
flight land?" and so outranks "Mia's flight lands at 8:40pm, Terminal 2." by its words alone. A
memory whose every statement is a question states nothing: the best memory below it that holds most
of the question weight it holds is placed before it (lifted to its score, as ``recency`` lifts a
newer memory). Nothing is dropped: the question stays citable, second. Pure: the candidates' text
and terms are already held.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace
from functools import lru_cache
from typing import Final

from kaibo_core.core.recall.selection import Ranked
from kaibo_core.core.structuring.facts import unresolved
from kaibo_core.core.structuring.statements import split_statements

#: Only the best-ranked memories are compared (a question's answer is among the first few).
MAX_CHECKED: Final = 12
#: The share of the question weight a question memory holds that a memory must hold to answer in
#: its place: about the same thing, not any memory further down.
ANSWER_SHARE: Final = 0.5


@lru_cache(maxsize=2048)
def only_asks(text: str) -> bool:
    """Every statement of ``text`` is a question (and it has one)."""
    statements = split_statements(unresolved(text)).statements
    return bool(statements) and all(statement.question for statement in statements)


def answers_before_questions(ranked: Sequence[Ranked], weights: Mapping[str, float]) -> list[Ranked]:
    """``ranked`` (best first) with, before each memory that only asks, the best memory below it
    that states something and holds at least ``ANSWER_SHARE`` of the question weight it holds."""
    order = list(ranked)
    checked = min(len(order), MAX_CHECKED)
    at = 0
    while at < checked:
        asking = order[at]
        if not only_asks(asking.text):
            at += 1
            continue
        floor = ANSWER_SHARE * _weight(asking.terms, weights)
        answer = next(
            (
                below
                for below in range(at + 1, checked)
                if floor > 0.0
                and not only_asks(order[below].text)
                and _weight(order[below].terms, weights) >= floor
            ),
            None,
        )
        if answer is None:
            at += 1
            continue
        lifted = replace(order[answer], score=max(order[answer].score, asking.score))
        del order[answer]
        order.insert(at, lifted)
        at += 2  # the answer, then the question it now stands before
    return order


def _weight(terms: AbstractSet[str], weights: Mapping[str, float]) -> float:
    return math.fsum(weight for term, weight in weights.items() if term in terms and weight > 0.0)
