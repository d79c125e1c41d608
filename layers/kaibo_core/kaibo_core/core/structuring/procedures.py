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

A second reading (``renewed_candidates``) takes a new way **announced** in words of its own ("New
process for prod log access — request it yourself in Opal … No more IT tickets for this"): a
message that says a way is new (a new process, plan, routine, rules or system; gone live; no more,
no longer, no need to, nobody needs; please stop doing; stopped taking; don't … anymore) retires the
one earlier memory of the same stream and speaker that shares the most subject words with it, at
least two, one with the statement itself and one no name ("Juniper Court" alone is another thing of
theirs), when the message says something it does not.

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
from kaibo_core.core.structuring.drafts import CandidateMemory, clear_best
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


#: Words that announce a new way of doing something ("New process for prod log access —", "we've
#: switched to Ramp cards", "no more monthly submission", "from today").
_NEW_WAY: Final = re.compile(
    r"\b(?:new\s+(?:process|procedure|plan|routine|rules?|system|setup|policy|workflow|flow|playbook)|"
    r"playbook\s+v\d|(?:gone|went|going)\s+live|no\s+more|no\s+longer|no\s+need\s+to|nobody\s+needs|"
    r"(?:please|so)\s+stop\s+\w+ing|stopped\s+(?:taking|accepting|offering|doing|issuing)|"
    r"(?:don['’]t|do\s+not|nobody|no\s+one|nothing)\b[^.;!?]{0,60}?\bany\s?more)\b",
    re.IGNORECASE,
)
#: Words that tell no piece of work apart: the announcement's own, and what any way says.
_WAY_GENERIC: Final = _GENERIC | frozenset(
    analyze(
        "procedure plan routine rule rules system setup policy workflow flow playbook switched switch "
        "live more longer anymore need needs stop stopped today month week monday from starting effective "
        "immediately is are be get gets got go goes going do does done have has had use used using just "
        "please only still also then every each day days time any one two make makes take takes put "
        "here there this that these those we us our you your they them it its"
    )
)
#: Subject words a message announcing a new way must share with the way it replaces.
MIN_SHARED_WAY: Final = 2


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


def announces_new_way(text: str) -> bool:
    """The statement announces a new way of doing something ("New process for prod log access",
    "we've switched to Ramp cards", "no more monthly submission", "from today")."""
    return _NEW_WAY.search(text) is not None


def renewed_candidates(
    text: str, message: str, speaker: str | None, stream: str, candidates: Iterable[CandidateMemory]
) -> list[CandidateMemory]:
    """The one earlier way of doing something that ``text``, a statement of a ``message`` that
    announces a new way (``announces_new_way``), replaces: the one sharing the most subject words
    with the message, at least two, one of them with the statement itself; [] when none, or
    several are as close."""
    ours = _way_words(text)
    told = _way_words(message)
    scored: list[tuple[int, CandidateMemory]] = []
    for candidate in candidates:
        old = _earlier_way(candidate) if candidate.stream == stream else None
        if old is None or (speaker and old.speaker and old.speaker != speaker):
            continue
        theirs = _way_words(f"{old.speaker or ''} {old.text}")
        shared = theirs & told
        if len(shared) < MIN_SHARED_WAY or not shared & ours or not told - theirs:
            continue
        if not shared - _name_words(old.text):
            continue  # only names in common ("Juniper Court"): another thing of theirs (rent, deposit)
        scored.append((len(shared), candidate))
    return clear_best(scored)


#: A capitalized word inside a sentence: a name.
_NAME_INSIDE: Final = re.compile(r"(?<![.!?:]\s)(?<!^)\b[A-Z][\w'’-]*")


def _name_words(text: str) -> frozenset[str]:
    return frozenset(analyze(" ".join(_NAME_INSIDE.findall(text))))


def _way_words(text: str) -> frozenset[str]:
    return frozenset(analyze(text)) - _WAY_GENERIC
