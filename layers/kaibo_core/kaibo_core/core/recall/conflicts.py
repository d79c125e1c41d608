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

from kaibo_core.core.recall.selection import Ranked
from kaibo_core.core.structuring.facts import Fact, across_speakers, conflicts, parse_fact, unresolved
from kaibo_core.core.structuring.statements import split_statements

#: Only the best-ranked memories are compared (a question's answer is among the first few).
MAX_CHECKED: Final = 12
#: Texts longer than this are not read as facts (a fact is one short statement).
MAX_FACT_CHARS: Final = 400


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


def without_outdated(ranked: Sequence[Ranked]) -> tuple[list[Ranked], dict[str, str]]:
    """``ranked`` without the memories ``outdated`` names, in order, and {dropped id: newer id}."""
    newer = outdated(ranked)
    return [memory for memory in ranked if memory.memory_id not in newer], newer


def outdated(ranked: Sequence[Ranked]) -> dict[str, str]:
    """{older memory id: the newer memory id that gives its subject's attribute another value},
    among the first ``MAX_CHECKED`` of ``ranked`` that carry ``valid_from_ms``. Memories valid from
    the same instant are never judged (neither is newer)."""
    read: list[tuple[str, int, tuple[Fact, str]]] = []
    for memory in ranked[:MAX_CHECKED]:
        if memory.valid_from_ms is None:
            continue
        fact = memory_fact(memory.text)
        if fact is not None:
            read.append((memory.memory_id, memory.valid_from_ms, fact))
    dropped: dict[str, str] = {}
    for index, first in enumerate(read):
        for second in read[index + 1 :]:
            if first[0] in dropped or second[0] in dropped or first[1] == second[1]:
                continue
            newer, older = (first, second) if first[1] > second[1] else (second, first)
            if _retires(newer[2], older[2]):
                dropped[older[0]] = newer[0]
    return dropped
