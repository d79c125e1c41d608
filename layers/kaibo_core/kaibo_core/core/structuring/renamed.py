"""A thing given a new name (docs/structuring-rules.md, "Renamed").

"The Saturday 9am spin class at Riverside Fitness is called Cycle Blast." … "Riverside renamed
their Saturday morning spin session, it's RideFlow on the app now." A name is the one kind of value
the other readings leave alone in chat (people are named in every turn), and a new name shares no
word with the old one. What a rename does say is that a name is new ("renamed", "rebranded", "is
called", "new name", "becomes", "going out as"), or, for a name no chat turn uses (a `#channel`,
an `org/repo` path, a `'quoted name'`, a `CamelCase` or an `UPPER-CASE` code), that it is the
name "now". This reading links a statement that gives such a name to the one earlier memory that
names the same thing otherwise:

- a name of the statement the earlier memory does not say, and one of the earlier memory the
  message does not say (the old name, gone);
- a word in common with the message ("spin", "repo", "billing"; the rename's own words left out),
  two when the name is a made one said to be the one "now" or is only given ("is called" without
  "now": "The Thursday 7pm yoga class … is called Flow Basics" shares only "class" with "Wednesday
  swim class is at the Aquatic Center").

Guards: the caller's (questions, hedges, proposals, reported speech, history, additions); here, a
rename asked for ("Rename the Falcon dashboard to …"), an earlier memory of another stream or
speaker, and two earlier memories as close.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from kaibo_core.core.structuring.dates import TIME_NAMES
from kaibo_core.core.structuring.drafts import CandidateMemory, clear_best
from kaibo_core.core.structuring.restated import NOT_NAMES, current_value
from kaibo_core.core.text import analyze

#: Words that say a name is new.
_RENAMING: Final = re.compile(
    r"\b(?:renam(?:e|ed|ing)|rebrand(?:ed|ing|s)?|new\s+name|(?:is|are|['’]s|be)\s+(?:now\s+|officially\s+)?"
    r"(?:called|named|known\s+as)|becomes|final\s+name|(?:listed|sold|going\s+out|marketed)\s+as|goes\s+by)\b",
    re.IGNORECASE,
)
#: A name given, not said to be new ("The yoga class is called Flow Basics"): two words in common.
_NAMED_ONLY: Final = re.compile(r"^(?:(?:is|are|['’]s|be)\s+(?:called|named|known\s+as))$", re.IGNORECASE)
#: A rename asked for.
_ASKED: Final = re.compile(r"^\s*(?:please\s+|can\s+you\s+|let['’]s\s+)?(?:rename|rebrand)\b", re.IGNORECASE)
_NOW: Final = re.compile(r"\b(?:now|from\s+today|as\s+of\s+today|going\s+forward)\b", re.IGNORECASE)
#: Names no chat turn uses: a channel, a path, a quoted name, a CamelCase word, an upper-case code.
_MADE_NAME: Final = (
    r"#[A-Za-z][\w-]*|\b[A-Za-z][\w.-]*/[\w.-]*[A-Za-z][\w.-]*|(?<!\w)['‘“\"][^'’”\"]{2,40}['’”\"](?!\w)"
    r"|\b[A-Z][a-z]+[A-Z][A-Za-z]*\b|\b[A-Z][A-Z0-9]*-?[A-Z0-9]{2,}\b"
)
_MADE: Final = re.compile(_MADE_NAME)
#: A name: a made one, or capitalized words inside a sentence ("Cycle Blast", "Pulse 45").
_NAME: Final = re.compile(rf"{_MADE_NAME}|(?<![.!?:]\s)(?<!^)\b[A-Z][\w'’-]*(?:\s+(?:[A-Z][\w'’-]*|\d+\w*))*")
#: Words that tell nothing apart in a rename.
_GENERIC: Final = frozenset(
    analyze(
        "renamed rename rebranded rebrand new name called named known final becomes listed sold going "
        "out marketed goes now today forward officially same still old update heads up is are be was "
        "it its their our we they this that the all please use"
    )
)
#: Subject words in common with a word that says the name is new, and without one.
MIN_SHARED_CUED: Final = 1
MIN_SHARED_NOW: Final = 2


def gives_new_name(text: str) -> bool:
    """The statement says a name is new ("renamed", "is called", "new name"), or gives a made name
    as the one now ("Billing repo is acme/billing-core now")."""
    if _ASKED.match(text):
        return False  # "Rename the Falcon dashboard to Falcon Insights": a task, not done yet
    if _RENAMING.search(text):
        return bool(_names(text))
    return _NOW.search(text) is not None and _MADE.search(text) is not None


def renamed_candidates(
    text: str, message: str, speaker: str | None, stream: str, candidates: Iterable[CandidateMemory]
) -> list[CandidateMemory]:
    """The one earlier memory that names otherwise the thing ``text`` (a statement of ``message``
    that ``gives_new_name``) names anew; [] when none, or several are as close."""
    cues = [match.group(0) for match in _RENAMING.finditer(text)]
    cued = bool(cues) and not (all(_NAMED_ONLY.match(cue) for cue in cues) and _NOW.search(text) is None)
    ours = _names(text)
    told = frozenset(analyze(message)) - _GENERIC
    scored: list[tuple[int, CandidateMemory]] = []
    for candidate in candidates:
        statement = current_value(candidate) if candidate.stream == stream else None
        if statement is None or (speaker and statement.speaker and statement.speaker != speaker):
            continue
        said = frozenset(analyze(statement.text))
        new_names = [name for name in ours if not _words(name) <= said]
        old_names = [name for name in _names(statement.text) if not _words(name) <= told]
        if not new_names or not old_names:
            continue
        shared = said & told
        if len(shared) >= (MIN_SHARED_CUED if cued else MIN_SHARED_NOW):
            scored.append((len(shared), candidate))
    return clear_best(scored)


def _names(text: str) -> list[str]:
    """The names ``text`` says, not a weekday or a date ("by Friday", "(June 5, 2026)")."""
    return [
        name
        for name in _NAME.findall(text)
        if name.lower().strip("'’\"“”‘") not in NOT_NAMES
        and name.split()[0].lower().rstrip("s") not in TIME_NAMES
    ]


def _words(name: str) -> frozenset[str]:
    return frozenset(analyze(name))
