"""A piece of work handed to someone else (docs/structuring-rules.md, "Reassigned").

"Legal review of the Corvane vendor contract sits with Daniel Okafor." … "Heather Lindqvist owns the
Corvane agreement review going forward, please route redlines to her." People hand work over in
words of every kind ("is point", "owns it from here on", "is on it now", "I'll cover", "offered to
do"), and the work is named again in other words. What a handover does say is who has the work
now: one person the earlier statement does not name, with a word that says it changed ("instead",
"taking over", "from now on", "going forward", "now", "swapped"), or beside the earlier holder
named as away ("Carla's on parental leave", "Sam got pulled onto the incident"). This reading links
such a statement to the one earlier memory that gives the same work to another person:

- the statement names exactly one person the earlier memory does not (the new holder: a name, or
  the speaker saying "I'll", "I'm"), and no other name it does not say;
- the earlier memory names a person the statement does not (the old holder);
- the message and the earlier memory share a subject word besides the names when the message names
  the old holder, two when it only says that something changed.

Guards: the caller's (questions, hedges, proposals, reported speech, history, additions); here, an
earlier memory of another stream, two new names (another person's work: "Aisha Bellamy's mentor
switched to Nadia" after "Aisha Bello's mentor is Greg"), and two earlier memories as close.

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

#: Words that say who has a piece of work changed.
_HANDED: Final = re.compile(
    r"\b(?:instead|tak(?:e|es|ing)\s+over|took\s+over|from\s+now\s+on|going\s+forward|from\s+here\s+on|now|"
    r"swapped|volunteered|offered\s+to|stepping\s+(?:back|down)|(?:change|swap)\s+of\s+plan|quick\s+change|"
    r"staffing\s+update|reassigned|handed\s+(?:over|off)|from\s+(?:monday|next\s+week|today)|this\s+time"
    r"|as\s+of\s+today|new\s+owner)\b",
    re.IGNORECASE,
)
#: The speaker taking a piece of work ("I'll cover Thursday soccer pickups").
_I_TAKE: Final = re.compile(
    r"\b(?:i['’]ll|i\s+will)\s+(?:now\s+)?(?:cover|take|do|handle|run|drive|lead|own|be\s+(?:doing|covering|point))\b"
    r"|\b(?:i['’]m|i\s+am)\s+(?:now\s+)?(?:taking\s+over|covering|doing|handling|running|driving|on\s+it|point|"
    r"the\s+new\s+\w+)\b",
    re.IGNORECASE,
)
#: A person's name: capitalized words inside a sentence, or opening it before a verb or possessive.
_NAME: Final = re.compile(
    r"(?<![.!?:—–-]\s)(?<!^)\b[A-Z][a-z][\w'’-]*(?:\s+[A-Z][a-z][\w'’-]*)?"
    r"|(?:^|(?<=:\s)|(?<=[—–]\s))\s*[A-Z][a-z][\w-]*(?:\s+[A-Z][a-z][\w-]*)?"
    r"(?=['’]s\b|\s+(?:is|will|owns|leads|has|offered|volunteered)\b)"
)
#: What follows the name of someone who holds a piece of work ("Devon is point", "Ines Carvalho owns
#: it", "Renata's going to be Aiko's buddy", "Wes Okonkwo will run fieldwork", "Jess is on it now").
_HOLDS: Final = re.compile(
    r"^\s*(?:(?:['’]s|is|will\s+be|['’]s\s+going\s+to\s+be|is\s+going\s+to\s+be)\s+(?:now\s+)?"
    r"(?:point|lead|primary|secondary|on\b|doing|taking|running|handling|covering|driving|picking\s+up|in\s+charge|"
    r"the\s+(?:new\s+)?(?:lead|owner|point|contact|buddy|mentor|associate|manager|driver)|[A-Z][\w-]*['’]s\s+\w+)"
    r"|(?:now\s+)?(?:owns|leads|runs|handles|covers|drives|has\s+the|takes\s+over|took\s+over|offered\s+to|"
    r"volunteered|will\s+(?:run|do|handle|cover|take|lead|own|drive)))",
)
#: Words that tell no piece of work apart in a handover.
_GENERIC: Final = frozenset(
    analyze(
        "instead take takes taking took over now from on going forward here swapped volunteered offered "
        "change plan quick staffing update reassigned handed stepping back down is are be will going "
        "doing do does owns own leads lead run runs running has have had point it this that the all "
        "please route send him her his she he they them their i ill im me my we our you your rest term "
        "week month quarter monday tuesday wednesday thursday friday saturday sunday"
    )
)
#: Subject words in common when the message names the old holder, and when it only says "now".
MIN_SHARED_NAMED: Final = 1
MIN_SHARED_CUED: Final = 2


def hands_over(text: str) -> bool:
    """The statement names someone with a word that says who has a piece of work changed."""
    return _HANDED.search(text) is not None and (bool(_names(text)) or _I_TAKE.search(text) is not None)


def reassigned_candidates(
    text: str, message: str, speaker: str | None, stream: str, candidates: Iterable[CandidateMemory]
) -> list[CandidateMemory]:
    """The one earlier memory that gives the work ``text`` (a statement of ``message``) hands to
    someone else to another person; [] when none, or several are as close."""
    named = _names(text)
    ours: list[str] = []
    works: list[frozenset[str]] = []
    for match in _NAME.finditer(text):
        holds = _HOLDS.match(text[match.end() :])
        if holds is not None and match.group(0) in named:
            ours.append(match.group(0))
            works.append(_work(text[match.end() + holds.end() :]))
    takings = list(_I_TAKE.finditer(text)) if speaker else []
    works += [_work(text[taking.end() :]) for taking in takings]
    takers = [speaker] if speaker and takings else []
    told = frozenset(analyze(message))
    scored: list[tuple[int, CandidateMemory]] = []
    for candidate in candidates:
        statement = current_value(candidate) if candidate.stream == stream else None
        if statement is None:
            continue
        said = frozenset(analyze(f"{statement.speaker or ''} {statement.text}"))
        new_people = [name for name in ours + takers if not _words(name) & said]
        if len(new_people) != 1:
            continue  # nobody new, or two
        if any(not _words(name) <= said for name in named if name not in new_people):
            continue  # another name the earlier memory does not say: another person's work
        if any(work and not work <= said for work in works):
            continue  # another piece of work: "owns the Hanley plant budget" after "the Hanley … review"
        theirs = [name for name in _names(statement.text) if not _words(name) & _words(new_people[0])]
        away = [name for name in theirs if _away(name, message)]
        gone = [name for name in theirs if name in away or not _words(name) <= told]
        if not gone:
            continue  # nobody else held it, or the earlier holder still does
        holders = frozenset().union(*(_words(name) for name in new_people + gone))
        shared = (said & told) - holders - _GENERIC
        named_away = bool(away)
        if len(shared) >= (MIN_SHARED_NAMED if named_away else MIN_SHARED_CUED):
            scored.append((len(shared), candidate))
    return clear_best(scored)


#: What says someone can no longer do a piece of work ("out sick", "on parental leave", "got pulled onto").
_AWAY: Final = (
    r"(?:['’]s)?\W+(?:[\w'’]+\W+){0,3}?(?:out|off|away|sick|leave|pulled|stepping|can['’]?t|cannot|busy|"
    r"unavailable|left|leaving)\b"
)


def _away(name: str, message: str) -> bool:
    """The message says the person ``name`` can no longer do it ("Carla's on parental leave")."""
    first = re.escape(re.sub(r"['’]s$", "", name.split(maxsplit=1)[0]))
    return re.search(rf"\b{first}{_AWAY}", message, re.IGNORECASE) is not None


#: Where the work a holder takes ends: a preposition, a time, a clause.
_WORK_END: Final = re.compile(
    r"[,.;:!?()—–]|\s-\s|\b(?:now|instead|going|from|this|until|till|for|at|on|in|with|since|so|and|but|"
    r"starting|while|because|as|after|before|to|by|of)\b",
    re.IGNORECASE,
)
_PRONOUNS: Final = frozenset({"it", "them", "this", "that", "these", "those", "one"})


def _work(rest: str) -> frozenset[str]:
    """The head word of the work named right after a holder ("the Hanley plant budget" → budget),
    or nothing when a pronoun or no noun follows ("owns it from here on")."""
    words = _WORK_END.split(rest, maxsplit=1)[0].split()
    if not words or words[-1].lower() in _PRONOUNS:
        return frozenset()
    return frozenset(analyze(words[-1]))


def _names(text: str) -> list[str]:
    """The names ``text`` says: not a weekday, a month or a word that opens any sentence."""
    return [
        name
        for name in _NAME.findall(text)
        if name.split()[0].lower().strip("'’") not in NOT_NAMES
        and name.split()[0].lower().rstrip("s") not in TIME_NAMES
    ]


def _words(name: str) -> frozenset[str]:
    return frozenset(analyze(name)) - _GENERIC
