"""A thing given another place (docs/structuring-rules.md, "Relocated").

"Kids' swim class is at the YMCA pool on Wednesdays at 5" … "Wednesday swim class is at the Aquatic
Center on Lakeshore Rd, same time." A place is no value of a kind the other readings compare (a
date, a number, a name): people name places in their own words, and a new place shares no word
with the old one. What the two statements do share is the thing placed, said outside the places
("swim class"). This reading links a statement that puts a thing somewhere to the one earlier
memory that puts the same thing somewhere else:

- two subject words in common outside the places, the newer adding none of its own (or, with a
  word that says the place changed, "relocating", "now lives", "starting this week", none that is
  a name);
- or one, when the message names the old place as no longer the place ("… at Lakeview Pavilion
  from 5, the hotel ballroom flooded last week");
- or none, when the message says the old place fell through ("Lupa lost our booking 🙄 we're going
  to Kin Thai on Brewer St, same time" after "Team dinner booked at Osteria Lupa, 7:30").

Guards: the caller's (questions, hedges, proposals, reported speech, history, additions); here, a
place clause told in the past ("we went to the museum"), another speaker's place, a name the
earlier statement does not say (another person's lessons), the same place restated, an earlier
memory of another stream, and two earlier memories as close (which one moved?).

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from kaibo_core.core.structuring.dates import MONTHS, WEEKDAYS
from kaibo_core.core.structuring.drafts import CandidateMemory, clear_best
from kaibo_core.core.structuring.restated import NOT_NAMES, clauses, current_value
from kaibo_core.core.text import analyze

#: Prepositions that put a thing somewhere ("to" only after a verb of moving: "going to Kin Thai").
_PLACE_PREPS: Final = frozenset(
    {"at", "in", "into", "inside", "under", "behind", "beside", "near", "on", "by"}
)
_TO_PLACE: Final = re.compile(
    r"\b(?:mov(?:e|es|ed|ing)|relocat(?:e|es|ed|ing)|go|goes|going|head(?:s|ed|ing)?|transferr?(?:ed|ing)?|"
    r"publish(?:es|ed|ing)?|point(?:s|ed|ing)?|redirect(?:s|ed|ing)?|ship(?:s|ped|ping)?)\s+"
    r"(?:\w+\s+){0,4}?to\s*$",
    re.IGNORECASE,
)
_DETERMINERS: Final = frozenset({"the", "a", "an", "our", "my", "your", "their", "his", "her", "its"})
#: What follows a preposition without being a place ("at least", "in time", "on track", "by then").
_NOT_PLACES_WORDS: Final = (
    "least all once first last moment time times touch person charge case advance total full "
    "general progress stock order turn fact mind short particular addition favour favor line lieu "
    "review schedule budget track hold board demand call duty leave mind then now noon midnight "
    "night morning afternoon evening weekend weekends weekdays week weeks month months year years "
    "day days today tomorrow tonight hour hours minute minutes end beginning middle meantime "
    "future past me you him her us them it this that these those which what who whom whose there "
    "here"
)
_NOT_PLACES: Final = frozenset(_NOT_PLACES_WORDS.split())
#: Where a place phrase ends: a word that starts another part of the sentence.
_PHRASE_END_WORDS: Final = (
    "from until till while because since so and but for with instead now this next same starting "
    "today tomorrow tonight every each when where which who that than if as or is are was were "
    "will would be been has have had gets get got"
)
_PHRASE_END: Final = frozenset(_PHRASE_END_WORDS.split())
#: Words that say where, or that something happens there: no subject of their own.
_GENERIC: Final = frozenset(
    analyze(
        "is are be been will get gets got go going goes do doing done have has had held hold holds "
        "host hosted happens happening take takes place lives live living sits sit runs run stays stay "
        "moved moves moving relocated relocating relocate put keep kept store stored set up dropped "
        "drop located venue location spot where new now instead starting effective from today "
        "tomorrow tonight week weeks month time same still just also really please thanks ok okay "
        "anymore longer heads up fyi update note reminder all everyone we us our i my you they them "
        "it this that there here then next day days at in into inside under behind beside "
        "near on by to"
    )
)
#: Words that say the place changed: the newer statement may then name its subject more fully.
_MOVED: Final = re.compile(
    r"\b(?:relocat\w*|mov(?:ed|ing)|put|now|instead|starting|from (?:next|this) \w+|"
    r"this (?:week|time|year|season|summer|term)|from now on|going forward|any ?more|these days)\b",
    re.IGNORECASE,
)
#: Words that say the old place fell through ("Alma double-booked us", "the lodge fell through").
_FELL_THROUGH: Final = re.compile(
    r"\b(?:double[- ]?booked|over-?booked|fell through|lost (?:our|the) (?:booking|reservation)|flooded|"
    r"closed|shut|outgrown|unavailable|no longer available|can['’]?t (?:host|have|take) us|"
    r"cancell?ed on us|(?:is|are|being|gets?|getting) (?:re-?\w+ed|renovated|repaired|resurfaced|"
    r"repainted|demolished)|under (?:renovation|repair|construction))\b",
    re.IGNORECASE,
)
#: A verb in the past that tells what happened there ("we went to the museum", "met at Lupa").
_TOLD: Final = re.compile(
    r"\b(?:went|visited|met|was|were|had|stayed|spent|saw|ate|did|came|took|got back|left)\b", re.IGNORECASE
)
#: Where a clause of a statement meets the next ("… double-booked us so Ava's party will be …").
_JOINS: Final = re.compile(r"\s+(?:so|because|while|since|but|as)\s+", re.IGNORECASE)
_ADVERB: Final = r"(?:(?:now|still|currently|actually|officially|temporarily|instead)\s+)?"
#: A verb that puts a thing at the place after it: a copula, a verb of being somewhere, or one of
#: putting something there ("put the spare key in", "we're doing the retreat at").
_PLACING: Final = re.compile(
    rf"\b(?:(?:is|are|['’]s|['’]re|will\s+be|['’]ll\s+be|be)\s+{_ADVERB}(?:(?:held|based|located|hosted|kept|"
    rf"stored|parked|set\s+up|running|happening|staying|meeting|relocating|moving)\s+)?"
    rf"|{_ADVERB}(?:lives?|living|sits?|sitting|stays?|runs?|happens?|takes?\s+place|meets?|rehearses?|"
    rf"parked|located|based|held|hosted|kept|stored|set\s+up|dropped(?:\s+off)?|mov(?:ed|es|ing)|"
    rf"relocat(?:ed|es|ing)|going|head(?:ed|ing))\s+"
    rf"|\b(?:put|keep|store|stored|mov(?:e|ed|ing)|relocat(?:e|ed|ing)|drop(?:ped)?|publish(?:es|ed)?|doing|"
    rf"having|hosting|holding)\s+(?:[\w'’-]+\s+){{1,5}}?)(?:{_ADVERB})(?:at|in|into|inside|under|behind|on|to|by)\s",
    re.IGNORECASE,
)
#: The speaker or the one spoken to is where a place is ("I'm going to a conference", "you're in").
_SPEAKER_PLACED: Final = re.compile(r"^\s*(?:i|i['’]m|i['’]ll|i['’]ve|you|you['’]re|me)\b", re.IGNORECASE)
_CAPTION: Final = re.compile(r"\[(?:attachment|image|file)\b[^\]]*\]?", re.IGNORECASE)
_TOKEN: Final = re.compile(r"[^\s,;()!?\"“”]+|[,;()!?\"“”]")
_TIME: Final = re.compile(
    r"^\d+(?:st|nd|rd|th)?$|^\d{1,2}(?::\d\d)?(?:am|pm)?$|^(?:noon|midnight)$", re.IGNORECASE
)
#: A number that begins a place's name ("5th Ave", "221B Baker St"), not a time ("5 PM").
_STREET_NUMBER: Final = re.compile(r"^\d+\w*\s+(?!(?:AM|PM|am|pm)\b)[A-Z]")
#: A label before a colon and its value ("Offsite venue: Casa Bonay", "Spare key: lockbox by …").
_LABEL: Final = re.compile(r"^\s*([A-Za-z][\w'’ -]{0,40}?):\s+(\S.*)$")
#: Where a label's value ends: "Casa Bonay, Barcelona (Alma double-booked us)" is "Casa Bonay".
_VALUE_END: Final = re.compile(r"[,;(]|\s[-–—]\s")
_PLACE_LABEL: Final = frozenset(analyze("venue location place where spot room site"))
#: A capitalized word; at the start of a sentence only before another or a possessive ("Jonas Reyes
#: moved …", "Emma's lessons …"; not "Facilities relocated …").
_NAME: Final = re.compile(
    r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z][\w'’-]*|^\s*[A-Z][a-z][\w-]*(?=['’]s\b|\s+[A-Z][a-z])"
)
#: Subject words in common for a place to replace another (fewer when the old place is named).
MIN_SHARED: Final = 2


@dataclass(frozen=True, slots=True)
class Placed:
    """A clause that puts something somewhere: the stems of its places and of the rest."""

    place: frozenset[str]
    subject: frozenset[str]
    names: frozenset[str]


def places(text: str) -> list[Placed]:
    """The clauses of ``text`` that put something somewhere, read (none: no place phrase). An
    attachment's caption places nothing ("[attachment: a photo of a game in a large arena]")."""
    read = (_read_placed(clause) for clause in _clauses(_CAPTION.sub(" ", text)))
    return [placed for placed in read if placed is not None]


def puts_somewhere(text: str) -> bool:
    """A clause of ``text`` puts a thing somewhere, now or from now on ("Reception will be at
    Lakeview Pavilion", "the spare key lives in a lockbox", "Offsite venue: Casa Bonay"): not a
    place told in passing ("a photo of my family camping at the beach"), in the past, or of the
    speaker ("I'm going to a conference")."""
    return bool(_placements(text))


def _placements(text: str) -> list[Placed]:
    found = []
    for clause in _clauses(_CAPTION.sub(" ", text)):
        if _TOLD.search(clause) or _SPEAKER_PLACED.match(clause):
            continue
        if _LABEL.match(clause) is None and _PLACING.search(clause) is None:
            continue
        placed = _read_placed(clause)
        if placed is not None:
            found.append(placed)
    return found


def relocated_candidates(
    text: str,
    message: str,
    speaker: str | None,
    stream: str,
    candidates: Iterable[CandidateMemory],
) -> list[CandidateMemory]:
    """The one earlier memory ``text`` (a statement of ``message``) puts somewhere else; [] when
    none, or several are as close."""
    ours = _placements(text)
    if not ours:
        return []
    said_here = _Said(
        frozenset(analyze(message)),
        _MOVED.search(text) is not None,
        _FELL_THROUGH.search(message) is not None,
    )
    scored: list[tuple[int, CandidateMemory]] = []
    for candidate in candidates:
        statement = current_value(candidate) if candidate.stream == stream else None
        if statement is None or (speaker and statement.speaker and statement.speaker != speaker):
            continue
        theirs = places(statement.text)
        if not theirs:
            continue
        old = Placed(
            frozenset().union(*(placed.place for placed in theirs)),
            frozenset().union(*(placed.subject for placed in theirs)),
            frozenset().union(*(placed.names for placed in theirs)),
        )
        said = frozenset(analyze(statement.text))
        score = max(_score(new, old, said, said_here) for new in ours)
        if score > 0:
            scored.append((score, candidate))
    return clear_best(scored)


@dataclass(frozen=True, slots=True)
class _Said:
    """What the message says: its words, whether the statement says the place changed, whether the
    message says the old place fell through."""

    told: frozenset[str]
    moved: bool
    fell_through: bool


def _score(new: Placed, old: Placed, said: frozenset[str], message: _Said) -> int:
    """How surely ``new`` puts the thing of ``old`` (a statement saying the words ``said``)
    elsewhere: 0 when it does not."""
    if not new.place - said or not old.place - new.place:
        return 0  # the same place restated, or nothing placed anew
    if new.names - said:
        return 0  # "Ben's swim class …" after "Emma's swim class …": another person's
    shared = new.subject & old.subject
    old_named = bool((old.place - new.place) & message.told)
    extra = new.subject - said
    if len(shared) >= MIN_SHARED and (not extra or message.moved):
        return len(shared) + old_named
    if shared and old_named and (message.moved or message.fell_through):
        return len(shared) + 1
    if old_named and message.fell_through:
        return 1
    return 0


def _clauses(text: str) -> list[str]:
    return [part for clause in clauses(text) for part in _JOINS.split(clause) if part.strip()]


def _read_placed(clause: str) -> Placed | None:
    """The clause's places and the rest, or None when it names no place. A label's value is its
    place when the label says so ("Offsite venue: Casa Bonay") or the value names a place ("Spare
    key: lockbox by the garage")."""
    label = _LABEL.match(clause)
    if label is not None:
        subject, value = label.group(1), label.group(2)
        if not frozenset(analyze(subject)) & _PLACE_LABEL and not _place_phrases(value):
            return None
        return _placed(subject, [_VALUE_END.split(value, maxsplit=1)[0]])
    phrases = _place_phrases(clause)
    if not phrases:
        return None
    rest = clause
    for phrase in phrases:
        rest = rest.replace(phrase, " ", 1)
    return _placed(rest, phrases)


def _placed(rest: str, phrases: list[str]) -> Placed:
    place = frozenset(stem for phrase in phrases for stem in analyze(phrase) if not _timely(stem))
    subject = frozenset(stem for stem in analyze(rest) if stem not in _GENERIC and not _timely(stem))
    names = frozenset(
        stem
        for word in _NAME.findall(rest)
        if word.lower().strip("'’s") not in NOT_NAMES and not _timely(word.lower())
        for stem in analyze(word)
    )
    return Placed(place - _GENERIC, subject - place, names - place)


def _place_phrases(clause: str) -> list[str]:
    """Each phrase of ``clause`` after a preposition of place that names a place ("the YMCA pool",
    "Lakeshore Rd", "a lockbox"), not a time ("at 5", "on Wednesdays", "in March") nor an idiom
    ("at least", "in time", "on track")."""
    tokens = _TOKEN.findall(clause)
    phrases = []
    for index, token in enumerate(tokens):
        prep = token.lower()
        if prep == "to":
            if not _TO_PLACE.search(" ".join(tokens[: index + 1])):
                continue
        elif prep not in _PLACE_PREPS:
            continue
        words = _phrase(tokens[index + 1 :])
        if words and _is_place(prep, words):
            phrases.append(" ".join(words))
    return phrases


def _phrase(tokens: list[str]) -> list[str]:
    words: list[str] = []
    for token in tokens:
        bare = token.lower().rstrip(".:")
        if not re.match(r"[\w'’]", token) or bare in _PHRASE_END or bare in _PLACE_PREPS or bare == "to":
            break
        words.append(token.rstrip(".:"))
        if token.endswith((".", ":")) and bare not in {"mrs", "mr", "dr", "st"}:
            break
    return words


def _is_place(prep: str, words: list[str]) -> bool:
    rest = [word for word in words if word.lower() not in _DETERMINERS]
    if not rest:
        return False
    first = rest[0].lower().strip("'’")
    if first in _NOT_PLACES or first in NOT_NAMES:
        return False
    if _timely(first) and not _STREET_NUMBER.match(" ".join(rest[:2])):
        return False
    # "on track", "by hand", "under review": these prepositions place only before a determiner, a
    # name or a number.
    return not (
        prep in {"on", "by", "under", "behind"}
        and words[0].lower() not in _DETERMINERS
        and not words[0][0].isupper()
        and not words[0][0].isdigit()
    )


def _timely(word: str) -> bool:
    """A word of time: a number or time of day, a weekday, a month."""
    word = word.lower().rstrip(".")
    bare = word[:-1] if word.endswith("s") else word
    return _TIME.match(word) is not None or bare in _DAYS or word in MONTHS or bare in MONTHS


_DAYS: Final = frozenset(WEEKDAYS) | frozenset(
    {"mon", "tue", "tues", "wed", "thu", "thur", "thurs", "fri", "sat", "sun"}
)
