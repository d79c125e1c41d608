"""Updates told in other words, with a cue that something changed (docs/structuring-rules.md,
"Cued, in other words").

People rarely restate a value with the words they first used: "SOC 2 evidence needs to be uploaded
to Vanta by April 17" is followed a week later by "Heads up — the audit firm asked for more time.
Evidence upload cutoff is now May 1." The restatement reading (``restated``) asks most of the
earlier statement's words to come back; here they do not. What the later statement does carry is a
cue that a value changed ("now", "instead", "anymore", "pushed", "switched", "from now on") and a
value of the kind the earlier one holds. This reading links such a statement to the one earlier
memory that holds another value of that kind and shares the most subject words with the whole
message (its other sentences name the subject too: "Greenline can't do the 8th anymore. They've put
us down for August 15 instead."), and only when that memory is the clear best.

Guards: the statement's own (questions, hedges, proposals, reported speech, history, additions)
are checked by the caller; here, another speaker's value, a subject named with a name the earlier
statement does not say, an owner of the earlier value the message does not name ("Acme's contract
…"), another period, a value for another thing, another attribute named first, a role's scope, a
new thing opened beside the old, and a tie between two memories (which one changed?) link nothing.

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import pairwise
from typing import Final

from kaibo_core.core.structuring.dates import MONTHS, WEEKDAYS
from kaibo_core.core.structuring.drafts import CandidateMemory, Meaning
from kaibo_core.core.structuring.restated import (
    _POSSESSIVE_END,
    _SOLE_ROLES,
    NOT_NAMES,
    Reading,
    _code_words,
    _normal,
    clauses,
    current_value,
    has_value,
    past,
    read,
    settle_openings,
)
from kaibo_core.core.structuring.statements import split_statements
from kaibo_core.core.text import analyze

#: Words that say a value changed, and a delay ("isn't due till May 15").
CUE: Final = re.compile(
    r"\b(now|instead|any ?more|no longer|from now on|going forward|from (?:today|monday|next week)|"
    r"as of|starting|effective|from here(?: on)?|moved|moving|pushed|bumped|slipp(?:ed|ing)|slips|"
    r"postponed|deferred|brought forward|put back|delayed (?:till|until)|"
    r"shifted|switched|switching|changed|changing|rescheduled|replaced|replacing|"
    r"(?<!\ba )(?<!another )new|updated|correction|actually|scratch that|after all|took over|taking over|"
    r"takes over|handed (?:over|off)|reassigned|rebranded|renamed|these days|rais(?:ed|ing)|lowered|"
    r"increas(?:ed|ing)|decreas(?:ed|ing)|went (?:up|down)|relocat(?:ed|ing)|revised|trimmed|slashed|hiked|"
    r"upped|reduced|cut (?:it )?(?:to|down|back)|works fine|(?:is|are) fine|as late as|"
    r"(?:got|gave us|give us|giving us|have|has) (?:till|until)|(?:one|a) more week|an extra week|"
    r"looking at|can come in|push(?:es|ing)?\s+(?:[\w'’-]+\s+){0,4}?(?:back\s+|out\s+)?to)\b"
    r"|(?:\bnot|n['’]t)\b[^.;]*?\b(?:until|till|til)\b",  # "won't wrap up until May 22"
    re.IGNORECASE,
)
#: Words that name no subject: what is said of any value, of time, of talk.
_GENERIC: Final = frozenset(
    analyze(
        "is are be been get got go going goes need needs make do done will can have has use used come "
        "coming want thing things time times day days week weeks month months morning afternoon "
        "evening tonight today tomorrow yesterday next last this that same still just also really please "
        "thanks okay ok all one two new now instead anymore longer starting effective moved pushed "
        "switched changed updated correction actually after final heads up fyi reminder update note "
        "until from before later soon"
    )
)
#: Roles one person holds, and here, where another speaker's value is apart, a job someone has, covers
#: or picks up ("Thursday swim pickup is Aunt Rosa's job starting next week"); not in the restatement
#: reading, which reads chat across speakers ("you're doing an awesome job" is praise).
_HELD_ROLES: Final = _SOLE_ROLES | frozenset(
    analyze("job cover covers covering pick picks picking associate")
)
#: Subject words the message and the earlier memory must share, with a change cue and without.
MIN_SHARED_WORDS: Final = 2
MIN_SHARED_UNCUED: Final = 3
#: With a cue, for a value passed on by the one the candidates name (``relayed``).
MIN_SHARED_FROM_SOURCE: Final = 1
#: Share of an earlier role's words ("tech lead for search") a message giving it to someone else repeats.
MIN_ROLE_SHARE: Final = 0.5
#: What a role is for ("tech lead for search", "point of contact for Globex"): each must be repeated.
_SCOPE: Final = re.compile(r"\b(?:for|on)\s+(?:the\s+)?([\w'’-]+(?:\s+[\w'’-]+)?)", re.IGNORECASE)
#: What a value is for, a thing named in common words ("for the mortgage", "on the billing cluster"),
#: not a person ("ask for Dr. Ferreira") nor a value ("on 0171 552 7410").
_THING_SCOPE: Final = re.compile(
    r"\b(?i:for|on)\s+(?:(?i:the|our|my|your|their)\s+)?(?!time\b)([a-z][\w'’-]*(?:\s+[a-z][\w'’-]*)?)"
)
#: A verb in the past where a statement's first word names its subject in others (stems).
_TOLD_VERB: Final = re.compile(r"\w+ed|went|got|came|made|took|gave|left|sent|put|set|ran|becam|bought|sold")
_DURATION: Final = re.compile(
    r"\bfor\s+(?:about\s+|almost\s+|nearly\s+|over\s+|around\s+)?(\w+)\s+(?:hour|day|week|month|year)s?\b",
    re.IGNORECASE,
)
#: What names a period: a year, a quarter, a fiscal year, a season, a term, this or next year.
_PERIOD: Final = re.compile(
    r"\b(?:(?:fy|h[12])?\s?'?(?:19|20)\d\d|q[1-4]|fy\d\d|spring|summer|autumn|fall|winter|"
    r"(?:this|next|last)\s+(?:year|term|semester|season|quarter)|semester|term)\b",
    re.IGNORECASE,
)
_CHANGE_FROM: Final = re.compile(
    r"\b(?:from|starting(?:\s+(?:in|with))?|as\s+of|beginning|effective)\s+(?:the\s+)?(?:next\s+)?\S+(?:\s+term)?",
    re.IGNORECASE,
)
_DATE_WITH_YEAR: Final = re.compile(
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?,?\s+(?:19|20)\d\d\b"
    r"|\b(?:19|20)\d\d-\d\d-\d\d\b|\b\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|"
    r"nov|dec)[a-z]*,?\s+(?:19|20)\d\d\b",
    re.IGNORECASE,
)
#: A new thing opened or added beside the earlier one ("is opening a new satellite clinic at …").
_NEW_THING: Final = re.compile(
    r"\b(?:open|add|launch|start|hir|set(?:ting)?\s+up)(?:s|ed|ing|e|es)?\s+(?:a|an|another)\s+(?:new\s+|second\s+)?",
    re.IGNORECASE,
)
#: Words that say a value did not change ("The 4.x line is unaffected", "checkout is untouched").
_UNCHANGED: Final = re.compile(r"\b(?:unaffected|unchanged|untouched|stays|remains)\b", re.IGNORECASE)
#: A name that opens a statement of its state ("Idris now gets picked up at 2:40"): its subject.
_STATE_AFTER_NAME: Final = re.compile(r"^\s*([A-Z][\w'’-]*)\s+(?:is|are|now|gets|has|will\s+be)\b")
_ORDINAL: Final = re.compile(r"(?:[1-9]|[12]\d|3[01])(?:st|nd|rd|th)")
#: A thing named by a word and its number or code ("flat 3", "Line 2", "invoice 3318", "Ledgerly 3.x",
#: "room 4B", "Vantora X2"); not a value's preposition ("to 90"), a month's day ("March 4") nor a
#: value told by a verb ("is 140").
_LABELLED: Final = re.compile(
    r"\b([A-Za-z][\w-]*)\s+#?(\d[\d.]*[A-Za-z]?|[A-Za-z]\d+[A-Za-z]?)(?![\d.,:]*\s*(?:%|am|pm|[ap]\.m))\b"
)
_NOT_LABEL_WORDS: Final = (
    "a an the at to by on in of for from until till is are was were be been about around over under "
    "up down and or than after before every per each only just now starting through this next last "
    "mon tue wed thu fri sat sun"
)
_NOT_LABELS: Final = frozenset(_NOT_LABEL_WORDS.split()) | MONTHS.keys() | frozenset(WEEKDAYS)
#: A word, or a run of what is no letter (digits, punctuation): words next to each other are adjacent.
_WORD: Final = re.compile(r"[A-Za-z][\w'’-]*|[^\sA-Za-z]+")
_VERSION: Final = re.compile(r"v\d+(?: \d+)*")
_OPENING: Final = re.compile(r"\s*([A-Z][\w'’-]*)\s+([\w'’-]+)")


#: A change done, told in the past with its new value: "We raised the upload cap to 100 MB".
_DONE_CHANGE: Final = re.compile(
    r"\b(?:raised|lowered|increased|decreased|cut|reduced|bumped|pushed|moved|shifted|switched|changed|"
    r"extended|tightened|upped|swapped|rescheduled|postponed|trimmed|slashed|hiked|relocated)\b[^.;]*?\b(?:to|until)\b",
    re.IGNORECASE,
)


def tells_change_done(text: str) -> bool:
    """The statement tells, in the past, a change made to a value ("we cut the budget to $40k"):
    history in form, the current value in fact."""
    return _DONE_CHANGE.search(text) is not None


def cues_change(text: str) -> bool:
    """The statement says that a value changed ("now", "instead", "pushed", …)."""
    return CUE.search(text) is not None


def _subject_words(text: str, reading: Reading) -> frozenset[str]:
    values = frozenset(analyze(" ".join(value for kind, value in reading.values if kind != "name")))
    return frozenset(analyze(text)) - _GENERIC - values


@lru_cache(maxsize=16)
def _message_terms(message: str) -> tuple[frozenset[str], frozenset[str]]:
    """A message's terms and its subject words, read once for all its statements."""
    return frozenset(analyze(message)), _subject_words(message, read(message))


def _valued(reading: Reading, text: str) -> Reading:
    """``reading`` without the numbers that are no value of a thing: a number in words ("my favorite
    one", "two blocks from the school"), and how long something went on ("I've been playing for
    about four months now")."""
    durations = {match.lower() for match in _DURATION.findall(text)}
    values = frozenset(
        (kind, value)
        for kind, value in reading.values
        if kind != "number" or (value not in durations and any(char.isdigit() for char in value))
    )
    return replace(reading, values=values) if values != reading.values else reading


def _periods(text: str) -> frozenset[str]:
    """The periods a statement is about: a year, a quarter, a season or term, this or next year
    ("Q3 OKR", "FY2027 budget", "summer hours", "next year's calendar"); not one a change starts
    from ("from the summer term school dinners cost £2.85": when the new value holds)."""
    undated = _DATE_WITH_YEAR.sub(" ", _CHANGE_FROM.sub(" ", text))  # "June 2, 2026" is a day, not a period
    return frozenset(match.lower() for match in _PERIOD.findall(undated))


def _kinds(values: Iterable[tuple[str, str]]) -> set[str]:
    """The kinds of ``values``, a day of the month ("the 31st") a date and a version ("v3.2") a number."""
    kinds = set()
    for kind, value in values:
        if kind == "number" and _ORDINAL.fullmatch(value):
            kinds.add("date")
        elif kind == "code" and _VERSION.fullmatch(value):
            kinds.add("number")
        else:
            kinds.add(kind)
    return kinds


def _leads(new: Reading, old: Reading) -> frozenset[str]:
    """The first topic words both statements share, their opening words settled (``Reading.lead``):
    where both name their subject."""
    settled_new, settled_old = settle_openings(new, old)
    return settled_new.lead & settled_old.lead


#: Words after a statement's first word that say it is its whole subject ("Offsite pushed to …",
#: "Market's set up …"): a verb, not a second noun ("Launch party moved …").
_AFTER_SUBJECT: Final = re.compile(
    r"(?:is|are|was|were|has|have|had|will|won't|can|can't|could|should|must|needs?|got|gets|just|"
    r"also|finally|officially)$|\w+(?:ed|ing)$",
    re.IGNORECASE,
)


def _opens_with(text: str, old_text: str, old: Reading) -> frozenset[str]:
    """The statement's first word, when it is all its subject and the earlier statement names its
    subject with it before its first value ("Offsite pushed to May 21" and "Team offsite is set for
    May 14"; not "Launch party moved to August 14" and "Ridgeline app launch is set for August 12")."""
    words = [word for word in _WORD.findall(text) if word[0].isalpha()]
    if len(words) < 2:
        return frozenset()
    first, after = words[0], words[1]
    possessive = _POSSESSIVE_END.search(first) is not None
    stems = frozenset(analyze(_POSSESSIVE_END.sub("", first)))
    if not stems or not stems <= frozenset(stem for stem in _head(old_text, old) if stem):
        return frozenset()
    if not possessive and not (_AFTER_SUBJECT.match(after) or CUE.fullmatch(after)):
        return frozenset()
    return stems


def _opens_with_subject(text: str, shared: frozenset[str], old_text: str) -> bool:
    """The statement's first words are the ``shared`` subject words, it names nothing else before
    its value ("Offsite budget for sales: $55k" names sales), and the earlier statement says them
    before its first value."""
    head = [stem for stem in _head(text, read(text)) if stem]
    if frozenset(head[: len(shared)]) != shared or not frozenset(head) <= frozenset(analyze(old_text)):
        return False
    return shared <= frozenset(stem for stem in _head(old_text, read(old_text)) if stem)


def _names(reading: Reading) -> frozenset[str]:
    return frozenset(value for kind, value in reading.values if kind == "name")


def _owners(reading: Reading) -> frozenset[str]:
    """Whose value the statement says it is ("Acme's contract value …", "… for Acme's renewal")."""
    opening = reading.opening or ""
    owner = {_POSSESSIVE_END.sub("", opening.lower())} if _POSSESSIVE_END.search(opening) else set()
    return reading.owners | owner


def _opens_with_their_name(update: _Update, old: Reading) -> bool:
    """The update opens with a name the earlier statement gives its thing besides its owner, and
    names no owner of its own: "Greenway relocated to 1180 Harbor Rd" after "Pepper's vet, Greenway
    Animal Clinic, is at 42 Linden Ave" (the clinic moved, whoever's vet it is, whatever word each
    says first)."""
    opening = update.reading.opening
    if opening is None or _owners(update.reading):
        return False
    stems = frozenset(analyze(opening))
    names = _names(old) - _owners(old)
    return bool(stems) and any(stems <= frozenset(analyze(name)) for name in names)


def _named_subject(text: str, said: frozenset[str]) -> frozenset[str]:
    """A capitalized first word that names the subject: followed by a word the earlier statement
    says ("Android release target …" after "The iOS app release …"), not a remark's first word
    ("Small correction from the SDK team: …")."""
    opening = _OPENING.match(text)
    if opening is None or opening.group(1).lower() in NOT_NAMES:
        return frozenset()
    if not frozenset(analyze(opening.group(2))) & said:
        return frozenset()
    return frozenset({_POSSESSIVE_END.sub("", opening.group(1).lower())})


@dataclass(frozen=True, slots=True)
class _Update:
    """The statement read for this reading, with its message."""

    text: str
    reading: Reading
    message: str
    #: The kinds of value it can give an earlier memory.
    kinds: frozenset[str]
    #: The periods its message names (``_periods``).
    periods: frozenset[str]


def _other_subject(update: _Update, old: Reading, old_text: str, slot_is_name: bool) -> bool:
    """The two statements are about two things, whatever words they share: the earlier one's
    owner is not in the message ("Acme's contract value …" and "Globex closed! Contract value …");
    the later one names its subject, a name the earlier one does not say ("Android release target is
    June 11" after "The iOS app release is … June 4"); for a person replaced in a role, the earlier
    role is not repeated ("tech lead for search" and "tech lead for billing")."""
    said, told = frozenset(analyze(old_text)), _message_terms(update.message)[0]
    named = _opens_with_their_name(update, old)
    if not named and any(not frozenset(analyze(owner)) <= told for owner in _owners(old)):
        return True
    if slot_is_name:
        role = _subject_words(old_text, old) - frozenset(analyze(" ".join(_names(old))))
        if len(role & told) < MIN_ROLE_SHARE * len(role):
            return True
        return any(not frozenset(analyze(scope)) & told for scope in _SCOPE.findall(old_text))
    subject = (
        _subject_names(update.text, update.reading)
        | _named_subject(update.text, said)
        | _state_subject(update.text)
    )
    if any(not frozenset(analyze(_name_proper(name))) <= said for name in subject):
        return True
    if _other_label(update, old, old_text) or _other_modifier(update, old, old_text, said, told):
        return True
    if _other_scope(update.text, old_text, told):
        return True
    labelled = _same_label(old, update.reading) and not _names_beside_label(update.text, said)
    return not named and not labelled and _other_lead(update, old, said, told)


def _names_beside_label(text: str, said: frozenset[str]) -> bool:
    """A clause that holds a version-like number also names something the earlier statement does
    not say ("the 4.2 release for Orbit moved to March 19" after "Ledgerline 4.2 goes out …")."""
    for clause in clauses(text):
        if _VERSION_LIKE.search(clause) and any(
            not frozenset(analyze(name)) <= said for name in _names(read(clause))
        ):
            return True
    return False


def _other_scope(text: str, old_text: str, told: frozenset[str]) -> bool:
    """Each says what its value is for, and they differ: "Autopay for the mortgage … on the 3rd" and
    "New autopay date for the savings transfer is the 10th"."""
    theirs = [frozenset(analyze(scope)) for scope in _THING_SCOPE.findall(old_text)]
    ours = [frozenset(analyze(scope)) for scope in _THING_SCOPE.findall(text)]
    return bool(theirs and ours) and any(scope and not scope & told for scope in theirs)


def _other_lead(update: _Update, old: Reading, said: frozenset[str], told: frozenset[str]) -> bool:
    """Each names first a thing the other never says: "Rent on the Elm Street flat is £1,150" and
    "Updated: the Elm Street deposit is now £1,725" (the rent and the deposit of one flat)."""
    new_lead, old_lead = settle_openings(update.reading, old)
    if any(_TOLD_VERB.fullmatch(word) for word in new_lead.lead):
        return False  # "Paws & Whiskers went to a new phone system": a verb, no thing named
    return bool(new_lead.lead and old_lead.lead) and not new_lead.lead & said and not old_lead.lead & told


def labels(text: str) -> dict[str, str]:
    """The things a statement names by a word and a number ("flat 7's boiler service": flat → 7)."""
    return {
        label.lower(): _normal(number)
        for label, number in _LABELLED.findall(text)
        if label.lower() not in _NOT_LABELS
    }


def _other_label(update: _Update, old: Reading, old_text: str) -> bool:
    """Both name their thing by the same word with another number, and another value is replaced
    besides: "Boiler service for flat 3 … March 4" and "they've moved flat 7's boiler service to
    March 11" (two flats; "boards at gate 12" and "now boards at gate 14" is the gate changed)."""
    ours, theirs = labels(update.text), labels(old_text)
    other = {label for label in ours.keys() & theirs.keys() if ours[label] != theirs[label]}
    return any(_replaced_besides({ours[label], theirs[label]}, update, old) for label in other)


def _replaced_besides(ids: set[str], update: _Update, old: Reading) -> bool:
    """A value of the update's kinds is replaced besides the numbers ``ids`` ("seats 20" after
    "seats 12" in "Room 4C … now seats 20"; a verb before a number reads as a label too)."""
    new_values = {value for value in update.reading.values if value[1] not in ids}
    old_values = {value for value in old.values if value[1] not in ids}
    return bool(_kinds(old_values - new_values) & _kinds(new_values - old_values) & update.kinds)


def _before_first_value(text: str, reading: Reading) -> str:
    """The statement, lowered, up to its first value of a kind other than a name, where it names its
    subject; a place it goes to ("to the Maple room") cut out."""
    lowered = text.lower()
    first = min(
        (lowered.find(value.split()[0]) for kind, value in reading.values if kind != "name" and value),
        default=-1,
    )
    return _DESTINATION.sub(" , ", lowered[: first if first >= 0 else len(text)])


def _head(text: str, reading: Reading) -> list[str | None]:
    """The stems of the words before the statement's first value, where it names its subject (names
    too: "Pro tier"; not a place it goes to: "relocating to the Maple room"); None for a word that
    names no subject (a value's, a period's: ``_periods``, a stop word, a generic word)."""
    values = " ".join(value for kind, value in reading.values if kind != "name").lower()
    stems: list[str | None] = []
    for match in _WORD.finditer(_before_first_value(text, reading)):
        word = match.group(0)
        named = word[0].isalpha() and word.lower() not in values and not _PERIOD.fullmatch(word)
        terms = analyze(word) if named else []
        stems.append(terms[0] if len(terms) == 1 and terms[0] not in _GENERIC else None)
    return stems


def _head_pairs(text: str, reading: Reading) -> set[tuple[str, str]]:
    """Two subject words written one after the other before the statement's first value ("car
    insurance", "junior membership"): a modifier and the word it qualifies (stems)."""
    return {(a, b) for a, b in pairwise(_head(text, reading)) if a is not None and b is not None}


def _other_modifier(
    update: _Update, old: Reading, old_text: str, said: frozenset[str], told: frozenset[str]
) -> bool:
    """Both name their subject by one word qualified by another, which the other message never says:
    "Car insurance with Bramblegate renews March 14" and "the home insurance renewal moved to April
    2"; "Junior membership … £85" and "adult membership … went up to £140"."""
    ours, theirs = _head_pairs(update.text, update.reading), _head_pairs(old_text, old)
    return any(
        head == their_head
        and modifier != their_modifier
        and modifier not in said
        and their_modifier not in told
        for modifier, head in ours
        for their_modifier, their_head in theirs
    )


#: A place a thing goes to, with its name ("to the maple room"; text lowered).
_DESTINATION: Final = re.compile(r"\b(?:to|into|onto)\s+(?:the\s+)?[\w'’-]+")


#: Capitalized words that open a statement and name nothing: a verb in the past ("Fixed Petrov's DOB",
#: "Found Nana's recipe card"), a day of the week ("Wednesdays at 3").
_NOT_NAMED: Final = re.compile(
    rf"^(?:\w+ed|found|took|got|made|sent|gave|came|went|put|ran|left|bought|sold|heard|told|"
    rf"(?:{'|'.join(WEEKDAYS)})s?)\b\s*"
)


def _state_subject(text: str) -> frozenset[str]:
    """The capitalized first word of a statement of its state ("Idris now gets picked up at 2:40 on
    Tuesdays"), not a sentence opener ("This is now …")."""
    match = _STATE_AFTER_NAME.match(text)
    if match is None or match.group(1).lower() in NOT_NAMES:
        return frozenset()
    return frozenset({_POSSESSIVE_END.sub("", match.group(1).lower())})


def _name_proper(name: str) -> str:
    """A name read from a statement without the capitalized verb or day written before it."""
    return _NOT_NAMED.sub("", name)


def _subject_names(text: str, reading: Reading) -> frozenset[str]:
    """The names written before the statement's first value of another kind: its subject's; not
    a place it goes to ("Standup relocating to the Maple room on 5")."""
    head = _before_first_value(text, reading)
    return frozenset(name for name in _names(reading) if name.split()[0] in head)


def _told_in_the_past(text: str) -> bool:
    """Every clause that holds a value tells how things were: "Mondays were chaos" beside "Finn's
    lesson is Saturdays 9:15am starting this week" is a remark, the value is current."""
    valued = [clause for clause in clauses(text) if has_value(clause)]
    return all(past(clause) for clause in valued) if valued else past(text)


def cued_candidates(
    text: str,
    message: str,
    candidates: Iterable[CandidateMemory],
    *,
    speaker: str | None,
    stream: str,
    meaning: Meaning | None = None,
    from_source: bool = False,
) -> list[CandidateMemory]:
    """The one candidate that ``text`` (a statement with a value, dates resolved) gives another
    value, found by the subject words of the whole ``message`` (two in common with a change cue,
    three without; one with a cue when ``from_source``: the candidates name the one who passed the
    value on, ``relayed``); [] when none is close enough or several are as close."""
    if _told_in_the_past(text) or _NEW_THING.search(text) or _UNCHANGED.search(text):
        return []
    text = _changed_clauses(text)
    reading = _valued(read(text), text)
    kinds = _kinds(reading.values) - {"name"}
    if reading.topic & _HELD_ROLES:
        kinds |= {"name"}  # "Kwame Mensah is primary on payments-api"
    if not kinds:
        return []
    cued = cues_change(text)
    update = _Update(text, reading, message, frozenset(kinds), _periods(message))
    own = _message_terms(text)[1]
    scored: list[tuple[int, float, CandidateMemory, str]] = []
    for candidate in candidates:
        shared, old_text = _shared_subject(update, candidate, speaker, stream)
        if not cued and not shared & own:
            continue  # only a statement that says a value changed may leave its subject to the others
        least = (MIN_SHARED_FROM_SOURCE if from_source else MIN_SHARED_WORDS) if cued else MIN_SHARED_UNCUED
        if len(shared) < least and not _named_enough(shared, cued, update, old_text):
            continue
        cosine = (meaning(text, candidate) if meaning is not None else None) or 0.0
        scored.append((len(shared), cosine, candidate, old_text))
    if not scored:
        return []
    scored.sort(key=lambda item: (item[0], item[1]), reverse=True)
    best = [item for item in scored if item[:2] == scored[0][:2]]
    if len(best) > 1 and len({_values_of(old_text, update.kinds) for *_, old_text in best}) > 1:
        return []  # two memories as close, with other values: which one changed?
    return [candidate for _, _, candidate, _ in best]  # one, or one value said twice


def _changed_clauses(text: str) -> str:
    """The clauses of ``text`` that say a value changed, when others hold values of their own: "Demo's
    pushed to Friday, half the team is out tomorrow" moves the demo to Friday, not to tomorrow."""
    parts = clauses(text)
    changed = [part for part in parts if cues_change(part) and has_value(part)]
    others = [part for part in parts if part not in changed and has_value(part)]
    return ", ".join(changed) if changed and others else text


def _values_of(text: str, kinds: frozenset[str]) -> frozenset[tuple[str, str]]:
    """The values of ``kinds`` a statement holds: two memories as close that hold the same ones say
    one value twice ("Checkout v2 is slipping to March 10" and its fact "Checkout v2 is on March
    10"), and an update retires both."""
    return frozenset(value for value in _valued(read(text), text).values if _kinds([value]) & kinds)


def _shared_subject(
    update: _Update, candidate: CandidateMemory, speaker: str | None, stream: str
) -> tuple[frozenset[str], str]:
    """The subject words ``candidate`` shares with the update's message (none when the update gives
    it no other value or the guards part them), and the text of its current statement."""
    statement = current_value(candidate) if candidate.stream == stream else None
    if statement is None:
        return frozenset(), ""
    return _shared_with(update, statement.text, statement.speaker, speaker), statement.text


def _named_enough(shared: frozenset[str], cued: bool, update: _Update, old_text: str) -> bool:
    """Fewer subject words in common than the rule asks are enough where both statements name their
    subject with them: one with a cue ("Rent's $1,975 starting July" and "Rent for the Maple St
    apartment is $1,850": ``_named_by``), two without, when the statement opens with them
    ("Passport photos: June 2 at the Walgreens on Elm" and "Passport photos appointment on May 28 at
    the CVS on Main": ``_opens_with_subject``); with a cue, a word of the earlier one's code said
    plainly ("the firefighting channel is now called …" and "#ops-firefighting")."""
    if not shared:
        return False
    if cued:
        old = read(old_text)
        return bool(shared & _code_words(old)) or _named_by(shared, update, old_text)
    return len(shared) >= MIN_SHARED_WORDS and _opens_with_subject(update.text, shared, old_text)


def _named_by(shared: frozenset[str], update: _Update, old_text: str) -> bool:
    """Both statements name their subject with the ``shared`` word: the first topic word of each
    (``_leads``), or the later one's first word (``_opens_with``), or, for a statement that opens
    with a pronoun, the first word of its message's first sentence ("Plumber just texted, he's
    stuck on a job. He'll come Thursday morning instead")."""
    old = read(old_text)
    if shared <= _leads(update.reading, old) or shared <= _opens_with(update.text, old_text, old):
        return True
    antecedent = _antecedent(update)
    return antecedent is not None and shared <= _opens_with(antecedent, old_text, old)


#: A statement opening with a pronoun: its subject is named before it.
_PRONOUN_OPENING: Final = re.compile(r"\s*(?:he|she|they|it)\b", re.IGNORECASE)


def _antecedent(update: _Update) -> str | None:
    """The sentence a statement that opens with a pronoun takes its subject from: the first of its
    message, when that is another."""
    if not _PRONOUN_OPENING.match(update.text):
        return None
    first = _first_sentence(update.message)
    return None if first == update.text else first


@lru_cache(maxsize=256)
def _first_sentence(message: str) -> str:
    """The first statement of ``message`` (asked once per candidate: split once)."""
    return split_statements(message).statements[0].text


def _shared_with(
    update: _Update, old_text: str, old_speaker: str | None, speaker: str | None
) -> frozenset[str]:
    """The subject words of ``old_text`` in the update's message, unless a guard parts them."""
    if speaker and old_speaker and speaker.lower() != old_speaker.lower():
        return frozenset()  # another speaker's value: a disagreement, not an update
    old = _valued(read(old_text), old_text)
    new = update.reading
    replaced = _kinds(old.values - new.values) & _kinds(new.values - old.values) & update.kinds
    if not replaced or _other_subject(update, old, old_text, replaced == {"name"}):
        return frozenset()
    periods = _periods(old_text)
    if periods and update.periods - periods:
        return frozenset()  # "FY2026 marketing budget …" and "the FY2027 marketing budget …": two periods
    # a word of the earlier one's code said as a plain word names it: "the firefighting channel"
    # and "#ops-firefighting"; a message's heading names its subject too ("Northfield Paper: new rep
    # for our account is …"), though the guards above read the message without it
    heading = speaker if speaker and not old_speaker else ""
    told = _message_terms(update.message)[1] | frozenset(analyze(heading))
    return (_subject_words(old_text, old) | _code_words(old)) & told | _same_label(old, new)


#: A number with parts ("3.4", read as "3 4"; "v2.1"): a version or a label, not a quantity.
_VERSION_LIKE: Final = re.compile(r"\d[ .]\d")


def _same_label(old: Reading, new: Reading) -> frozenset[str]:
    """A number both statements name their thing by, kept while another value is replaced ("Mobile
    release 3.4 is targeting May 5" and "3.4 slips a week to May 12"): a subject word."""
    kept = {
        value
        for kind, value in old.values & new.values
        if kind in ("number", "code") and _VERSION_LIKE.search(value)
    }
    return frozenset(term for value in kept for term in analyze(value))
