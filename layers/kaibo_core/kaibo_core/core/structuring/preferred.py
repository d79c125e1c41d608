"""A preference or standing instruction given again with another choice, in words of its own:
"I take my coffee with oat milk, no sugar." … "Black coffee for me these days, no milk at all."
(docs/structuring-rules.md, "Choices restated").

Such statements hold no value (no date, number or name) for the restatement reading
(``restated``) to compare, and no change word for the change rules. What they share is the thing
the choice is about ("coffee"), and what differs is the choice itself ("oat milk" → "black"). A
later statement retires an earlier one when:

- the later one **states a choice**, not a liking: "prefer", "rather", "instead", "please",
  "… only", "from here on", "whenever possible", "anymore", two of "for me", "these days",
  "nowadays" (one is common in chat: "Writing has been such a blessing for me"), or an
  instruction about the speaker's own things ("Put my meetings after lunch", "Reply to me in …").
  Liking is not exclusive: "I love hiking" and, later, "I love climbing" are both true;
- the earlier one **holds a choice**: a preference, a choice as above, an instruction about the
  speaker's own things, or a habit ("I take my coffee with …", "Ops team wants …"); not a plain
  fact or a remark in passing;
- both are **one holder's**: the speaker's own (first person, an instruction, a bare label such
  as "Deploy notifications: Slack DM only"), or one named person's ("Aria prefers window seats"
  and "Aria: aisle seats from here on please, my knee …"); a statement about its listener
  ("Thanks for sharing your love for …") is no one's;
- they **share a topic word** (what the choice is about), each has a word the other lacks (the
  choice replaced), and the later one does not narrow the topic: a word of its own before a
  shared one ("the design review meetings" is a narrower thing than "my meetings").

Pure: no I/O. The statement guards (questions, hedges, proposals, reported speech, history,
"also") are checked by the caller before this runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from kaibo_core.core.structuring.classify import classify
from kaibo_core.core.structuring.drafts import CandidateMemory
from kaibo_core.core.structuring.restated import NOT_NAMES, Reading, current_value, past, read
from kaibo_core.core.structuring.statements import Statement
from kaibo_core.core.text import analyze

#: Words that state a choice rather than a liking, or that it holds from now on.
_CHOICE: Final = re.compile(
    r"\b(?:prefers?|preferred|rather|instead(?!\s+of)|from\s+(?:here|now)\s+on|going\s+forward|whenever\s+possible"
    r"|any\s?more)\b|\bplease\b(?!\s+(?:let|tell|keep)\b)|\bonly\s*[.!]?$",
    re.IGNORECASE,
)
#: Words that may say so, but two are needed: "Black coffee for me these days" (one is common in chat:
#: "Writing has been such a blessing for me").
_WEAK_CHOICE: Final = re.compile(r"\bfor\s+(?:me|us)\b|\bthese\s+days\b|\bnowadays\b", re.IGNORECASE)
#: An instruction about the speaker's own things: "Put my meetings after lunch", "Reply to me in …".
_OWN_INSTRUCTION: Final = re.compile(
    r"^(?:please\s+)?(?:send|put|book|reply|answer|notify|email|call|text|schedule|give|keep|use|set|order"
    r"|bring|serve|seat|cc|ping|write|route|forward|address)\s+(?:(?:me|us|my|our)\b|[^,.;]{0,40}?\b(?:to|for)"
    r"\s+(?:me|us)\b)",
    re.IGNORECASE,
)
#: A standing habit told in the first person: "I take my coffee with oat milk".
_HABIT: Final = re.compile(
    r"^(?:[Ii]|[Ww]e|[A-Z][\w'’-]*(?:\s+[a-zA-Z][\w'’-]*)?)\s+(?:always\s+|usually\s+|normally\s+|only\s+)?"
    r"(?:takes?|drinks?|eats?|uses?|wears?|sits?|wants?|goes\s+with|go\s+with)\b"
)
_APOSTROPHE: Final = re.compile(r"['’]")
#: What a note is for, before a colon ("For the team dinner: Arjun is vegetarian"): not its holder.
_SCENE: Final = re.compile(
    r"^[^:]{1,40}:\s+(?=[A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)?\s+(?:is|are|eats|drinks|takes|prefers|wants|likes)\b)"
)
_SECOND_PERSON: Final = re.compile(r"\b(?:you|your|yours)\b", re.IGNORECASE)
_FIRST_PERSON: Final = re.compile(r"\b(?:i|i'm|i’m|i'd|i’d|my|me|we|our|us)\b", re.IGNORECASE)
#: A name at the start of a statement, before a word in lower case: "Aria prefers", "Ops team wants".
_LEADING_NAME: Final = re.compile(r"^([A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*)\s+[a-z]")
#: Words about the choosing, not about what is chosen.
_STANCE_WORDS: Final = frozenset(
    analyze(
        "prefer prefers preferred like likes love loves enjoy want wants rather please pls only instead "
        "days nowadays forward going whenever possible anymore again now no not ideally really actually "
        "sorry update fyi currently new"
    )
)
#: Verbs too common to tell what two statements are about.
_GENERIC: Final = frozenset(
    analyze("get gets put puts make makes use uses go goes need needs take takes keep")
)

#: Kinds of choice a person keeps, by the words that name one choice of each: two statements with
#: words of one kind are about the same choice ("Ben is vegetarian" and "Ben eats fish again, he's
#: pescatarian these days"; "Sam takes his coffee black" and "Sam's on oat flat whites these days").
_KINDS: Final[dict[str, re.Pattern[str]]] = {
    "diet": re.compile(
        r"\b(?:vegetarian|veggie|vegan|pescatarian|pescetarian|plant[- ]based|gluten[- ]free|dairy[- ]free"
        r"|keto|paleo|halal|kosher|eats\s+(?:everything|meat|fish|anything)|no\s+(?:dietary\s+)?restrictions)\b",
        re.IGNORECASE,
    ),
    "coffee": re.compile(
        r"\b(?:coffee|decaf|espresso|americano|latte|cappuccino|flat\s+whites?|cortado|macchiato|mocha)\b",
        re.IGNORECASE,
    ),
    "seat": re.compile(r"\b(?:aisle|window|middle)\s+seats?\b", re.IGNORECASE),
}
#: Words that say a kept choice is another one now: "these days", "again", "this time", "is off …",
#: "gone vegan", "switched".
_RENEWED: Final = re.compile(
    r"\b(?:these\s+days|nowadays|again|this\s+time|from\s+now\s+on|going\s+forward|now|switched|gone"
    r"|went|convert(?:ed)?)\b",
    re.IGNORECASE,
)
#: "Sam's on oat flat whites", "Nadia's off oat milk": on or off a choice (its words follow).
_ON_OFF: Final = re.compile(
    r"(?:['’]s|\b(?:is|are))\s+(?:off|on)\s+((?:[\w-]+\s+){0,3}[\w-]+)", re.IGNORECASE
)
#: A kept choice made in the past tense: "Oskar went vegan last month" is his diet now.
_CHOSEN: Final = re.compile(r"\b(?:switched|gone|went|converted)\b", re.IGNORECASE)

Holder = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Choice:
    """A statement read as a choice: whose it is, and its words (stemmed, the choosing left out)."""

    holder: Holder
    words: frozenset[str]
    #: The holder's name, if a name ("aria"): a plain word when the other statement uses it so.
    name: str | None
    speaker: str
    reading: Reading


def states_choice(statement: Statement) -> bool:
    """The statement states a choice (see the module docstring), not a liking or a plain fact."""
    return _chooses(statement.core) or renews_kept_choice(statement)


def _chooses(core: str) -> bool:
    return bool(_CHOICE.search(core) or _OWN_INSTRUCTION.match(core) or len(_WEAK_CHOICE.findall(core)) >= 2)


def choice_kinds(text: str) -> frozenset[str]:
    """The kinds of kept choice ``text`` names (``_KINDS``): "diet", "coffee", "seat"."""
    return frozenset(kind for kind, pattern in _KINDS.items() if pattern.search(text))


def _kind_words(text: str) -> dict[str, frozenset[str]]:
    """{kind: the words of ``text`` that name a choice of that kind}."""
    return {
        kind: frozenset(match.group(0).lower() for match in pattern.finditer(text))
        for kind, pattern in _KINDS.items()
        if pattern.search(text)
    }


def _kind_replaced(new: str, old: str) -> bool:
    """Both name a choice of one kind, and the later one a choice the earlier does not name
    ("vegetarian" → "vegan"; not "dairy-free" said twice)."""
    theirs = _kind_words(old)
    return any(kind in theirs and words - theirs[kind] for kind, words in _kind_words(new).items())


def renews_kept_choice(statement: Statement) -> bool:
    """The statement says a kept choice (a diet, a coffee, a seat) is another one now ("Ben eats
    fish again, he's pescatarian these days"; "Oskar went vegan last month")."""
    core = statement.core
    if not choice_kinds(core):
        return False
    return _RENEWED.search(core) is not None or any(choice_kinds(match) for match in _ON_OFF.findall(core))


#: Someone named, then what they said: "Ed says …", "Ines asked for …", "Mom told me …".
_RELAYED: Final = re.compile(
    r"^(?:[A-Z][\w'’-]*\s+)*?([A-Z][\w'’-]*)\s+(?:says|said|mentioned|asked(?:\s+for)?|told\s+(?:me|us))\b"
)


def relays_own_choice(statement: Statement) -> bool:
    """Someone's own choice, told by another ("Ed says window seats from now on"; "Ines asked for
    the weekly numbers as a live Google Sheet link going forward"): reported speech, yet the
    holder's word on their own choice, not hearsay about a value. Not a question, hedge or negation."""
    if not statement.reported or statement.question or statement.hedged or statement.negated:
        return False
    return _RELAYED.match(statement.core) is not None and states_choice(statement)


def standing(statement: Statement) -> bool:
    """The statement holds a choice that a later one can replace: a preference, a choice, an
    instruction about the speaker's own things or a habit ("I take my coffee with …")."""
    classification = classify(statement)
    if classification is not None and classification.type == "preference":
        return True
    return states_choice(statement) or _HABIT.match(statement.core) is not None


def read_choice(statement: Statement) -> Choice:
    """Whose the statement is, and the words of what it chooses."""
    speaker = (statement.speaker or "").lower()
    text = statement.text
    name = None
    first_person = _FIRST_PERSON.search(text) is not None
    if not first_person:
        leading = _LEADING_NAME.match(_SCENE.sub("", text, count=1))
        if leading is not None:
            named = [
                _APOSTROPHE.split(w.lower())[0]
                for w in leading.group(1).split()
                if _APOSTROPHE.split(w.lower())[0] not in NOT_NAMES
            ]
            name = " ".join(named) or None
    if name:
        holder: Holder = ("name", name)
    elif not first_person and _SECOND_PERSON.search(text):
        holder = ("you", speaker)  # "Thanks for sharing your love for …": the listener's, not the speaker's
    else:
        holder = ("self", speaker)
    reading = read(text)
    words = frozenset(analyze(text)) | reading.topic | {f"~{kind}" for kind in choice_kinds(text)}
    return Choice(holder, frozenset(words - _STANCE_WORDS), name, speaker, reading)


def _one_holder(new: Holder, old: Holder, same_stream: bool) -> bool:
    """The two holders are one: the same speaker's own (in one stream when neither names a
    speaker), one named person's, or a speaker's own and a statement naming that speaker. Whose
    a statement to its listener ("your …") is cannot be told: no one's."""
    if "you" in (new[0], old[0]):
        return False
    if new == old or (new[0] == old[0] == "name" and _one_name(new[1], old[1])):
        return same_stream or new[0] == "name" or bool(new[1])
    names = {who for kind, who in (new, old) if kind == "name"}
    speakers = {who for kind, who in (new, old) if kind == "self" and who}
    return len(names) == 1 and names == speakers


def _one_name(new: str, old: str) -> bool:
    """One person named in full once and in part once: "Grandpa Ed" and "Ed"."""
    new_words, old_words = set(new.split()), set(old.split())
    return new_words <= old_words or old_words <= new_words


def _settled(choice: Choice, other: Choice) -> Holder:
    """The holder of ``choice``, its leading name read as a plain word when the other statement
    has it among its words in lower case ("Deploy notifications: …" and "… production deploys")."""
    if choice.name is not None and frozenset(analyze(choice.name)) & (other.words - _name_words(other)):
        return ("self", choice.speaker)
    return choice.holder


def _name_words(choice: Choice) -> frozenset[str]:
    return frozenset(analyze(choice.name)) if choice.name else frozenset()


def chooses_otherwise(new: Statement, old: Statement, same_stream: bool) -> bool:
    """True when ``new`` gives ``old``'s choice again with another one (see the module docstring)."""
    if not states_choice(new):
        return False
    if not _chooses(new.core) and not _kind_replaced(new.core, old.core):
        return False  # a kept choice renewed replaces one of its kind only
    new_choice, old_choice = read_choice(new), read_choice(old)
    new_holder, old_holder = _settled(new_choice, old_choice), _settled(old_choice, new_choice)
    if not _one_holder(new_holder, old_holder, same_stream):
        return False
    names = " ".join(who for kind, who in (new_holder, old_holder) if kind == "name")
    holder_words = frozenset(analyze(names))
    new_words, old_words = new_choice.words - holder_words, old_choice.words - holder_words
    shared = new_words & old_words
    if not shared - _GENERIC or not new_words - old_words or not old_words - new_words:
        return False
    return not _narrowed(new_choice.reading, old_choice.reading)


def _narrowed(new: Reading, old: Reading) -> bool:
    """``new`` puts a word of its own before a shared one where ``old`` had none ("my meetings" →
    "the design review meetings": a narrower thing); a word swapped for another before a shared one
    is the choice itself ("window seats" → "aisle seats")."""
    shared = old.topic & new.topic - _STANCE_WORDS
    gained = new.topic - old.topic - _GENERIC - _STANCE_WORDS
    modified = {second for first, second in old.pairs if second in shared}
    return any(first in gained and second in shared - modified for first, second in new.pairs)


def preferred_candidates(
    statement: Statement, stream: str, candidates: Iterable[CandidateMemory], *, relayed: bool = False
) -> list[CandidateMemory]:
    """The candidates whose choice ``statement`` gives again with another one; ``relayed``: the
    statement tells someone's own choice (``relays_own_choice``), its holder the one who said it."""
    if not states_choice(statement):
        return []
    if (
        past(statement.text)
        and not relayed
        and not (renews_kept_choice(statement) and _CHOSEN.search(statement.core))
    ):
        return []
    found = []
    for candidate in candidates:
        old = current_value(candidate)
        if old is None:
            continue
        renewed = renews_kept_choice(statement) and _kind_replaced(statement.core, old.core)
        if not (renewed or standing(old)):
            continue
        if chooses_otherwise(statement, old, candidate.stream == stream):
            found.append(candidate)
    return found
