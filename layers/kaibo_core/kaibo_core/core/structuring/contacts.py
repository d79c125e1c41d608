"""New contact details: a phone, an email or an address given again to the same holder
(docs/structuring-rules.md, "New contact details").

Someone has one mobile, one email, one home at a time. "Ray's got a new number, 0152 448 1170 —
the old one's disconnected" after "Plumber Ray Duval: 0176 5523 9081" shares no subject word but
the holder's name; the other readings ask for subject words the two statements rarely share here
("number" and "mobile", "cell" and "phone"). This reading links a statement that gives a contact
value, in a message that says it is new or changed, to the one earlier memory that gives the
same holder one other value of that kind.

Guards: the caller's (questions, hedges, reported speech, history, additions: "also", "a second
number"); here, a holder the two do not share ("Dana's phone" and "Dave's new phone"), a person
named before the new value whom the earlier statement does not name, a qualifier only one of them
says ("work email" and "personal email"), an earlier statement holding several values of the kind
(whose changed?), and two earlier holders' values as close (a tie).

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from kaibo_core.core.structuring.cued import cues_change
from kaibo_core.core.structuring.drafts import CandidateMemory
from kaibo_core.core.structuring.restated import (
    _POSSESSIVE_END,
    _VALUE_PATTERNS,
    NOT_NAMES,
    Reading,
    current_value,
    read,
)
from kaibo_core.core.text import analyze

#: The kinds of value a holder has one of at a time.
CONTACT_KINDS: Final = frozenset({"phone", "email", "address"})
#: What says a contact is new: "a new number", "new email btw", "moved in", "relocated".
_NEW_CONTACT: Final = re.compile(
    r"\bnew\s+(?:[\w-]+\s+)?(?:number|mobile|cell|phone|email|e-mail|address|inbox|place|flat|home)\b"
    r"|\bmov(?:ed|ing)\b|\brelocat(?:ed|ing)\b",
    re.IGNORECASE,
)
#: Words that tell two contacts of one holder apart ("work email" and "personal email").
_QUALIFIERS: Final = frozenset(
    analyze(
        "work personal home office private school business billing support backup emergency landline fax "
        "weekend shop warehouse press sales"
    )
)
_WORD: Final = re.compile(r"[A-Za-zÀ-ÿ][\w'’-]*")
#: Words before a name that say what the person is, not who ("Coach Dylan", "Dr. Haas").
_TITLES: Final = frozenset(
    {"coach", "dr", "mr", "mrs", "ms", "miss", "prof", "professor", "nurse", "uncle", "aunt", "cousin"}
)
_CONTACT_PATTERNS: Final = tuple(pattern for kind, pattern in _VALUE_PATTERNS if kind in CONTACT_KINDS)


def recontacted_candidates(
    text: str, message: str, speaker: str | None, stream: str, candidates: Iterable[CandidateMemory]
) -> list[CandidateMemory]:
    """The one earlier memory whose holder ``text`` (a statement with a contact value, dates
    resolved) gives another value of that kind; [] when none or several holders' values are as
    close."""
    new = read(text)
    kinds = {kind for kind, _ in new.values if kind in CONTACT_KINDS}
    if not kinds or not (cues_change(message) or _NEW_CONTACT.search(message)):
        return []
    holders = _holders(read(message), speaker) | _holders(new, speaker)
    subject = _names_before_value(text)
    found: list[tuple[CandidateMemory, frozenset[tuple[str, str]]]] = []
    for candidate in candidates:
        statement = current_value(candidate) if candidate.stream == stream else None
        if statement is None:
            continue
        old = read(statement.text)
        theirs = _holders(old, statement.speaker)
        if not theirs & holders or not subject <= theirs or _qualified_apart(statement.text, text):
            continue
        replaced = frozenset(value for kind in kinds for value in _one_other(old, new, kind))
        if replaced:
            found.append((candidate, replaced))
    if len({replaced for _, replaced in found}) != 1:
        return []  # none, or two holders' values as close: which one changed?
    return [candidate for candidate, _ in found]


def gives_new_contact(text: str, message: str) -> bool:
    """The statement gives a contact value and its message says one is new ("Grandma's all moved
    in! 220 Birch Ave, …"): the whole message is searched for its holder."""
    return _NEW_CONTACT.search(message) is not None and any(
        kind in CONTACT_KINDS for kind, _ in read(text).values
    )


def _one_other(old: Reading, new: Reading, kind: str) -> frozenset[tuple[str, str]]:
    """The earlier statement's value of ``kind`` when it holds exactly one and the later one does
    not say it."""
    olds = frozenset(value for value in old.values if value[0] == kind)
    if len(olds) != 1 or olds & new.values:
        return frozenset()
    return olds


def _holders(reading: Reading, speaker: str | None) -> frozenset[str]:
    """Whose contact a statement may give: the first word of each name it says (after a title), its
    opening word ("Grandma's address", "Plumber (Gus Kowal) cell"), its speaker's words; lowered."""
    words = {_first_name(value) for kind, value in reading.values if kind == "name" and value}
    if reading.opening and reading.opening.lower() not in NOT_NAMES:
        words.add(_POSSESSIVE_END.sub("", reading.opening.lower()))
    if speaker:  # "Plumber Ray Duval: 0176 …": a role and a name, each a holder's word
        words |= {word.lower() for word in speaker.split()} - _TITLES
    return frozenset(word for word in words if word not in NOT_NAMES)


def _first_name(name: str) -> str:
    """A name's first word after its title ("coach dylan" → "dylan"; "grandma" stays)."""
    words = name.split()
    while len(words) > 1 and words[0] in _TITLES:
        words = words[1:]
    return words[0]


def _names_before_value(text: str) -> frozenset[str]:
    """The capitalized words before the statement's first contact value, lowered, titles left out:
    whom it names as the holder ("Ray's got a new number, 0152 …", "Coach Dylan switched to …")."""
    starts = [match.start() for pattern in _CONTACT_PATTERNS for match in pattern.finditer(text)]
    head = text[: min(starts, default=0)]
    words = (_POSSESSIVE_END.sub("", word).lower() for word in _WORD.findall(head) if word[0].isupper())
    return frozenset(word for word in words if word not in NOT_NAMES and word not in _TITLES)


def _qualified_apart(old_text: str, new_text: str) -> bool:
    """One of them says a qualifier the other does not ("work email" and "personal email")."""
    theirs = frozenset(analyze(old_text)) & _QUALIFIERS
    ours = frozenset(analyze(new_text)) & _QUALIFIERS
    return theirs != ours
