"""A way of doing something replaced by another way: "To request PTO, email your manager …" …
"PTO requests go through Workday." (docs/structuring-rules.md, "Procedures replaced").

A new way of doing a piece of work is rarely said with a change word, nor with a value the
restatement reading (``restated``) could compare. What it says is where the work goes now. A
later statement retires an earlier one when:

- the later one **routes a kind of work**: "<work> go through / run in / are submitted in, via,
  through … <where>" ("Prod deploys go through the GitHub Actions 'release' workflow",
  "Expenses are submitted in Ramp");
- the earlier one **tells how to do it**: a procedure ("To <goal>, <steps>", "How to …", steps,
  "run `…`"), or an instruction under a label ("Expense reports: email the receipts …"); a
  one-off task ("Open item from the security review: rotate the Stripe API keys") tells how to do
  nothing, unless its label names the work;
- the work is the earlier one's: every word of it (stemmed) is in the earlier statement, and one
  is in its goal (the words after "To", or its label), so a narrower kind of work ("Hotfix
  deploys go through …") or another one ("Support tickets go through Zendesk") is not;
- the way is another: the later one routes the work somewhere the earlier one does not name
  ("PTO requests go through your manager" restates "To request PTO, email your manager").

Pure: no I/O. The statement guards (questions, hedges, proposals, reported speech, history,
"also") are checked by the caller before this runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from kaibo_core.core.structuring.classify import (
    classify,
    instruction_label,
    speaker_label,
    statement_of_text,
)
from kaibo_core.core.structuring.drafts import CandidateMemory
from kaibo_core.core.structuring.facts import history
from kaibo_core.core.structuring.restated import past
from kaibo_core.core.structuring.statements import Statement
from kaibo_core.core.text import analyze

#: Participles of work being done somewhere: "are submitted in Ramp", "is handled via the portal".
_ROUTED: Final = (
    r"submitted|handled|done|filed|processed|requested|made|booked|logged|tracked|managed|run|sent|paid"
    r"|reported|raised|opened|created|scheduled|deployed|shipped|released|stored|kept|recorded|approved"
)
#: "<work> go through / run in / are submitted via <where>": the work, then the way.
_ROUTE: Final = re.compile(
    r"^(?:(?:all|the)\s+)?(?P<work>[A-Za-z][\w'’/-]*(?:\s+[A-Za-z][\w'’/-]*){0,3}?)\s+(?:now\s+|all\s+)?"
    rf"(?:go(?:es)?|runs?|happens?|(?:are|is)\s+(?:now\s+)?(?:{_ROUTED}))"
    r"\s+(?:now\s+)?(?:through|via|in|on|using)\s+(?P<way>\S.*)$",
    re.IGNORECASE,
)
#: "To <goal>, <steps>" / "How to <goal>: <steps>".
_GOAL: Final = re.compile(r"^(?:how\s+)?to\s+(?P<goal>[^,:;]{3,80}?)\s*[,:]\s", re.IGNORECASE)
#: Words too common to tell two pieces of work apart.
_GENERIC: Final = frozenset(
    analyze("new now all process way work thing stuff everyone everything someone something nothing people")
)


@dataclass(frozen=True, slots=True)
class Route:
    """A statement read as a route: the work it names and the words of the way it goes."""

    work: frozenset[str]
    way: frozenset[str]


def read_route(statement: Statement) -> Route | None:
    """The work the statement routes and its way, if it routes one ("PTO requests go through
    Workday"); None otherwise."""
    if past(statement.text):
        return None
    match = _ROUTE.match(statement.core)
    if match is None:
        return None
    work = frozenset(analyze(match.group("work"))) - _GENERIC
    way = frozenset(analyze(match.group("way")))
    if not work or not way:
        return None
    return Route(work, way)


def _goal(statement: Statement) -> frozenset[str] | None:
    """The words of the work an earlier statement tells how to do, if it tells one: a procedure's
    goal ("To deploy the API, …"), an instruction's label ("Expense reports: email …"), or a
    procedure's whole text ("After each deploy, run `alembic upgrade head` …")."""
    core = statement.core
    goal = _GOAL.match(core)
    if goal is not None:
        return frozenset(analyze(goal.group("goal")))
    label = instruction_label(core)
    if label is not None:
        return frozenset(analyze(label))
    speaker_as_label = speaker_label(statement)
    if speaker_as_label is not None:
        return frozenset(analyze(speaker_as_label))
    classification = classify(statement)
    if classification is not None and classification.type == "procedure":
        return frozenset(analyze(core))
    return None


def _earlier_way(candidate: CandidateMemory) -> Statement | None:
    """The candidate's statement, if it still tells how to do something: never a question, hedge,
    proposal, reported speech, negation, history or a story of the past. A preference is a choice,
    not a way of doing something (``preferred`` reads those)."""
    if candidate.type == "preference":
        return None
    statement = statement_of_text(candidate.content)
    if statement.guarded or history(statement) or past(statement.text):
        return None
    return statement


def reroutes(route: Route, old: Statement) -> bool:
    """True when ``route`` sends ``old``'s work another way (see the module docstring)."""
    goal = _goal(old)
    if goal is None:
        return False
    said = frozenset(analyze(f"{old.speaker or ''} {old.text}"))
    if not route.work <= said or not route.work & goal:
        return False  # another piece of work, or a narrower one
    return bool(route.way - said - _GENERIC)


def rerouted_candidates(route: Route, candidates: Iterable[CandidateMemory]) -> list[CandidateMemory]:
    """The candidates whose work a statement read as ``route`` (``read_route``) sends another way."""
    found = []
    for candidate in candidates:
        old = _earlier_way(candidate)
        if old is not None and reroutes(route, old):
            found.append(candidate)
    return found
