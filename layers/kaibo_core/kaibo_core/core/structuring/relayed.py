"""A new value passed on from the one it comes from (docs/structuring-rules.md, "Relayed by the
source").

"Accountant needs our receipts and W-2s by Feb 27." … "Deb at the accountant's office says we've got
till Mar 6 for the paperwork."; "Movers booked for 3 October." … "Movers called, they can only do 10
Oct now." Reported speech is a guard: "Tom said the deadline is June 27" is
hearsay, and the rules change nothing on it. But a value is often passed on from the one who sets
it: the accountant's office for the accountant's deadline, the landlord for the rent. This reading
takes the words after "says" (or after "called,", "texted,", "rang,": what the one who got in touch
said) as the statement when:

- the one who says it is named in the earlier memory (a word of theirs, or of its stem:
  "accounting office" and "Accountant needs …"): the source of the value, not a bystander;
- nothing in the message doubts it ("heard", "rumour", "reckons", "apparently", "claims", "nothing
  official", "not sure" …), and what is said is itself no question, hedge, negation or report;
- the cued reading (``cued``) then finds the one memory it gives another value, with its guards.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from kaibo_core.core.structuring.changes import said_by_stem
from kaibo_core.core.structuring.drafts import CandidateMemory
from kaibo_core.core.structuring.statements import Statement, prepare
from kaibo_core.core.text import analyze

#: Someone, then the verb that passes a value on, then what they passed on.
_RELAY: Final = re.compile(
    r"^(?P<who>(?:[\w'’.&-]+\s+){0,5}?[\w'’.&-]+)\s+(?:says|said|confirmed|confirms|tells\s+us|told\s+us"
    r"|wrote|emailed|let\s+us\s+know)\s+(?:that\s+)?(?P<what>\S.*)$",
    re.IGNORECASE,
)
#: Someone who got in touch, then what they said: "Movers called, they can only do 10 Oct now".
_CONTACTED: Final = re.compile(
    r"^(?P<who>(?:[\w'’.&-]+\s+){0,4}?[\w'’.&-]+)\s+(?:just\s+)?(?:called|rang|phoned|texted|emailed|messaged"
    r"|wrote|got\s+back\s+to\s+(?:us|me))(?:\s+(?:back|again|me|us))?\s*[,:;—–-]\s*(?P<what>\S.*)$",
    re.IGNORECASE,
)
#: Words that doubt what is passed on: hearsay, not the source's word.
_DOUBT: Final = re.compile(
    r"\b(?:rumou?rs?|heard|hearing|reckons?|apparently|claims?|claimed|insists?|swears?|doubt|not\s+sure"
    r"|no\s+idea|misheard|mixing|official|hallway|thinks|supposedly|allegedly|gossip)\b",
    re.IGNORECASE,
)
#: Words of a source that name no one in particular.
_NOBODY: Final = frozenset(
    analyze(
        "someone somebody everyone people guy guys lady folks office team desk front line person their our"
    )
)
_CAPITALIZED: Final = re.compile(r"\b[A-Z][\w'’-]*")


@dataclass(frozen=True, slots=True)
class Relayed:
    """A statement read as a value passed on: who passed it on, and what they said."""

    source: frozenset[str]
    #: The words of the source written with a capital: a name, said in full or not at all.
    name: frozenset[str]
    said: Statement


def relayed_value(statement: Statement, message: str) -> Relayed | None:
    """The statement read as a value passed on by someone (see the module docstring), or None."""
    if statement.question or statement.hedged or statement.negated or _DOUBT.search(message):
        return None
    match = (_RELAY.match(statement.core) if statement.reported else None) or _CONTACTED.match(statement.core)
    if match is None:
        return None
    who = match.group("who")
    source = frozenset(analyze(who)) - _NOBODY
    said = prepare(match.group("what"), statement.speaker)
    if not source or said.guarded:
        return None
    name = frozenset(term for word in _CAPITALIZED.findall(who) for term in analyze(word)) & source
    return Relayed(source, name, said)


def naming_source(relayed: Relayed, candidates: Iterable[CandidateMemory]) -> list[CandidateMemory]:
    """The candidates that name the one who passed the value on: every word of their name, or a
    word of what they are ("the accountant's office"; "Tomas Ferreira" is not "Tomas Reyes")."""
    return [candidate for candidate in candidates if _names(relayed, frozenset(analyze(candidate.content)))]


def _names(relayed: Relayed, terms: frozenset[str]) -> bool:
    if relayed.name and all(said_by_stem(term, terms) for term in relayed.name):
        return True
    return any(said_by_stem(term, terms) for term in relayed.source - relayed.name)
