"""A fact corrected in words of its own: a message that says an earlier statement was wrong
(docs/structuring-rules.md, "Corrected").

"Zoe is allergic to peanuts" … "Zoe's mom clarified the allergy is tree nuts (cashews, walnuts).
Peanut butter is fine for her." holds no value of a kind for the other readings to compare, and no
change word; what it does hold is an explicit word that something said before was wrong
("misread", "got that wrong", "correction", "clarified", "I typed the wrong drug"). This reading
links a statement of such a message to the one earlier memory that shares its subject with the
message: a name both say and another subject word ("allergic" and "allergy" count as one word),
when each says something the other does not.

Guards: the caller's (questions, hedges, reported speech, history); here, no explicit correction in
the message, no name or no other subject word in common, nothing different (a restatement), an
earlier memory of another stream, and two earlier memories as close (which one was wrong?).

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from kaibo_core.core.structuring.cued import labels
from kaibo_core.core.structuring.drafts import CandidateMemory, clear_best
from kaibo_core.core.structuring.restated import NOT_NAMES, current_value, read
from kaibo_core.core.text import analyze

#: Words that say something said before was wrong.
_CORRECTS: Final = re.compile(
    r"\b(?:correction|misread|mis-?typed|typo|mixed up|(?:digits|numbers) (?:got )?swapped|"
    r"swapped the (?:digits|numbers)|walk(?:ing)? back|clarified|my (?:mistake|bad)|i meant|"
    r"(?:was|were) wrong|got (?:it|that) wrong|had (?:it|that) wrong|remembered it wrong|"
    r"wrong (?:drug|number|date|time|day|name|figure|digits?))\b",
    re.IGNORECASE,
)
#: Words that name no subject: what is said of any correction, of time, of talk.
_GENERIC: Final = frozenset(
    analyze(
        "is are was were be been got get had have has it that this the a an wrong correction correct "
        "sorry actually earlier note misread mixed up typo clarified mistake meant remembered fine ok "
        "okay really just also now still today yesterday please thanks"
    )
)
#: Stems this long or longer that begin alike are one word ("allergic" and "allergy").
_PREFIX: Final = 5
#: Subject words in common, a name among them, for a correction to name what it corrects.
MIN_SHARED: Final = 2


def corrects(text: str) -> bool:
    """The text says that something said before was wrong (its caller keeps out questions and
    hedges: "Are we paying $6,800 starting July, or is that a typo?" asks)."""
    return _CORRECTS.search(text) is not None


def corrected_candidates(
    text: str, message: str, stream: str, candidates: Iterable[CandidateMemory]
) -> list[CandidateMemory]:
    """The one earlier memory ``text`` (a statement of a ``message`` that corrects: ``corrects``)
    corrects: a name of the message and another subject word in common, each saying something the
    other does not; [] when none, or several are as close."""
    told = _words(message)
    names = _names(message)
    ours = _words(text)
    scored: list[tuple[int, CandidateMemory]] = []
    for candidate in candidates:
        statement = current_value(candidate) if candidate.stream == stream else None
        if statement is None or corrects(statement.text):
            continue
        if _other_numbered(statement.text, message):
            continue  # "Quillpad 3.x …" and "Quillpad 2.x …": two things
        theirs = _words(statement.text)
        shared = theirs & told
        if not shared & names or len(shared) < MIN_SHARED or not ours & theirs:
            continue
        if not ours - theirs or not theirs - told:
            continue  # nothing said otherwise: a restatement, not a correction
        scored.append((len(shared), candidate))
    return clear_best(scored)


def _other_numbered(old_text: str, message: str) -> bool:
    """Both name a thing by one word with another number ("Quillpad 3.x" and "Quillpad 2.x")."""
    ours, theirs = labels(message), labels(old_text)
    return any(ours[label] != theirs[label] for label in ours.keys() & theirs.keys())


def _words(text: str) -> frozenset[str]:
    """The subject words of ``text``: stems, generic words left out, long stems cut to a prefix."""
    return frozenset(_cut(stem) for stem in analyze(text) if stem not in _GENERIC)


def _names(text: str) -> frozenset[str]:
    """The words of the names ``text`` says (its opening word too), as ``_words`` writes them."""
    reading = read(text)
    said = " ".join(value for kind, value in reading.values if kind == "name")
    opening = reading.opening if reading.opening and reading.opening.lower() not in NOT_NAMES else ""
    return _words(f"{said} {opening}")


def _cut(stem: str) -> str:
    return stem[:_PREFIX] if len(stem) >= _PREFIX else stem
