"""Recall's recency rule: of two memories that answer a question about the present about equally
well, the newer ranks first (docs/recall.md, "Newer first").

The safety net of ``kaibo_core.core.recall.conflicts`` drops an older memory when it can read both
as one subject's attribute with two values. Most updates people write are not that regular
("Grandma's all moved in! 220 Birch Ave …" after "Grandma's address: 14 Elm Street"), so when the
structurer did not link them either, two active memories answer "What is Grandma's address?" and
the older often scores a little higher (it repeats the question's words). This rule does not judge
what either says; it only orders: when the newer holds at least ``tie_share`` of the question
weight the older holds (``asked_word_share`` when it says what the question asks about: "buddy"
in "Who is Aiko's onboarding buddy?"), every name or number of the question the older holds, and
states something now (no question, hedge, proposal, reported speech, negation, or story of the
past), it is lifted to the older's score and placed before it. Nothing is dropped: both stay
citable, the older second.

With recall by meaning, a newer typed value close in meaning to the older one (``alike``: the
cosine of their vectors, at least ``same_meaning``) ties even when it says the question's words less
("Mia gets in at 8:40pm Saturday" for "When does Mia's flight land?"), unless the structurer's word
guards show another subject; and an older typed value close in meaning to the question (at least
``answer_cosine``) answers it even in other words ("Team offsite is at …" for "Where is the team
retreat being held?").

Not applied to questions about the past ("When did …", "What was …"): every version answers them.
Pure: the candidates' text, terms and ``validFrom`` are already held.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import pairwise
from typing import Final

from kaibo_core.core.recall.answer_slots import asked_kinds, asks_about_now, question_topic
from kaibo_core.core.recall.selection import Ranked
from kaibo_core.core.structuring.facts import additive, history, unresolved
from kaibo_core.core.structuring.restated import (
    VALUE_TYPES,
    is_attachment,
    past,
    read,
    settle_openings,
    swapped_word,
    topic_verdict,
)
from kaibo_core.core.structuring.statements import Statement, split_speaker, split_statements
from kaibo_core.core.text import analyze

#: Only the best-ranked memories are compared (a question's answer is among the first few).
MAX_CHECKED: Final = 12
#: And only their first characters: where a memory says what it is about. Reading a whole 250 KB
#: file memory's statements took seconds of a recall's CPU for nothing a reader would weigh.
MAX_COMPARED_CHARS: Final = 2_000
#: Capitalized words after the first, words with a capital inside ("iOS") and words with a digit:
#: what names the subject.
_NAMING: Final = re.compile(r"(?<!^)(?<![.?!]\s)\b[A-Z][\w.'’-]*|\b[a-z]+[A-Z][\w.'’-]*|\b\w*\d[\w.:-]*")
#: "Would Caroline pursue writing?", "What would … likely be?": an inference, not a current value.
_HYPOTHETICAL: Final = re.compile(r"^\s*(?:would|could|might)\b|\b(?:would|likely)\b", re.IGNORECASE)
#: A run of word characters and inner punctuation; a word is the run without its trailing
#: punctuation (found so, in one pass: "word, then backtrack to a letter" is quadratic on a long
#: run of dashes or dots, which stored text can hold).
_WORD_RUN: Final = re.compile(r"[\w'’.-]+")
_TRAILING: Final = "'’.-"
#: Two words then a verb or a colon: the second is the subject's head ("the demo prep is").
#: Tried only where a run of word characters begins, and possessively: a run is followed by a
#: space or it is no first word, wherever in it one starts, so trying each of its letters (as
#: ``\b`` did) only made a long hyphenated run quadratic.
_SUBJECT_HEAD: Final = re.compile(
    r"(?<![\w'’-])['’-]*+\b([\w'’-]++) ([A-Za-z][\w'’-]*+)(?: (?:is|are|was|were|will|has|have)\b|:)",
    re.IGNORECASE,
)
#: Prepositions whose object says which one a question asks about ("on call for payments").
_SCOPING: Final = frozenset({"for", "at", "in", "on", "of"})
#: A verb told in the past ("Mia lived in Lisbon"), or a form that is no noun ("freeze slipped").
_PAST_FORM: Final = re.compile(r"(?:ed|ing)$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class RecencyParams:
    """``tie_share``: the newer memory's share of the older's question weight (idf of the
    question's topic terms each holds) at which the two count as answering equally well."""

    tie_share: float = 0.7
    #: The older memory's share of the whole question weight for it to count as an answer at all.
    min_answer_share: float = 0.5
    #: With recall by meaning: a newer memory at least this close in meaning to the older one
    #: (the cosine of their vectors) is a rival even when it says the question's words less.
    same_meaning: float = 0.6
    #: A newer memory holding less than ``tie_share`` of the older's question weight, down to this
    #: share, still ties when one of its statements says what the question asks about: a word ending
    #: one of the question's phrases that the older memory says too ("buddy" in "Who is Aiko's
    #: onboarding buddy?" for "Renata's going to be Aiko's buddy instead").
    asked_word_share: float = 0.5
    #: With recall by meaning: an older typed value this close to the question (recall by meaning's
    #: confident cosine) answers it even when its words hold less than ``min_answer_share`` of it
    #: ("Team offsite is at Lakeview Lodge" for "Where is the team retreat being held?"); chat
    #: turns about one topic are a conversation, not values replaced.
    answer_cosine: float = 0.5

    def __post_init__(self) -> None:
        if not 0.0 < self.tie_share <= 1.0:
            raise ValueError(f"tie_share must lie in (0, 1], got {self.tie_share!r}")
        if not 0.0 <= self.min_answer_share <= 1.0:
            raise ValueError(f"min_answer_share must lie in [0, 1], got {self.min_answer_share!r}")
        if not 0.0 < self.asked_word_share <= self.tie_share:
            raise ValueError(f"asked_word_share must lie in (0, tie_share], got {self.asked_word_share!r}")
        if not 0.0 < self.answer_cosine <= 1.0:
            raise ValueError(f"answer_cosine must lie in (0, 1], got {self.answer_cosine!r}")
        if not 0.0 < self.same_meaning <= 1.0:
            raise ValueError(f"same_meaning must lie in (0, 1], got {self.same_meaning!r}")


DEFAULT_RECENCY = RecencyParams()

#: The cosine of two memories' vectors (recall by meaning), or None when either has none.
Alike = Callable[[str, str], float | None]


def naming_terms(question: str) -> frozenset[str]:
    """The question's terms that name its subject: capitalized words after the first, words with a
    capital inside, numbers."""
    return frozenset(term for match in _NAMING.finditer(question) for term in analyze(match.group(0)))


@lru_cache(maxsize=2048)
def _now_statements(text: str) -> tuple[Statement, ...]:
    """The statements of ``text`` that are no question, hedge, proposal, reported speech,
    negation, history or past tense."""
    return tuple(
        statement
        for statement in split_statements(unresolved(text)).statements
        if not (statement.guarded or history(statement) or past(statement.text))
    )


@lru_cache(maxsize=2048)
def _states_now(text: str) -> tuple[tuple[frozenset[str], frozenset[str]], ...]:
    """The statements of ``text`` that state something now, each as (terms, kinds of its values)."""
    found = []
    for statement in _now_statements(text):
        if is_attachment(statement.text) or additive(statement):
            continue  # "We now ship to Mexico too": a value added, none replaced
        reading = read(statement.text)
        kinds = frozenset(kind for kind, _ in reading.values)
        if reading.opening is not None:
            kinds |= {"name"}  # "Ingrid will take minutes …": a capitalized first word may be a name
        found.append((frozenset(analyze(statement.text)), kinds))
    return tuple(found)


def _weight(terms: AbstractSet[str], weights: Mapping[str, float]) -> float:
    return math.fsum(weights[term] for term in terms)


def _answers_now(memory: Ranked, topic: frozenset[str], kinds: frozenset[str]) -> bool:
    """One of the memory's statements says a question word now, with a value of an asked kind."""
    return any(
        terms & topic and (not kinds or value_kinds & kinds)
        for terms, value_kinds in _states_now(memory.text)
    )


def newer_first(
    ranked: Sequence[Ranked],
    question: str,
    weights: Mapping[str, float],
    params: RecencyParams = DEFAULT_RECENCY,
    alike: Alike | None = None,
) -> tuple[list[Ranked], dict[str, str]]:
    """``ranked`` (best first) with each memory's newest rival placed before it (lifted to its
    score) when it ranked below, and {older memory id: its newest rival's id}: the older memories,
    which recall marks ``olderThan`` when both are packed. Memories without ``valid_from_ms`` or
    valid from the same instant are never rivals."""
    if not asks_about_now(question) or _HYPOTHETICAL.search(question):
        return list(ranked), {}
    topic = question_topic(question)
    topic_weights = {term: weight for term, weight in weights.items() if term in topic and weight > 0.0}
    if not topic_weights:
        return list(ranked), {}
    asked = _Asked(
        question,
        topic,
        naming_terms(question) & topic,
        asked_kinds(question),
        topic_weights,
        _phrase_ends(_words(question)) & topic,
    )
    checked = [_opening(memory) for memory in ranked[:MAX_CHECKED]]
    rivals: dict[str, str] = {}
    for older in checked:
        newer = _newest_rival(checked, older, asked, params, alike)
        if newer is not None:
            rivals[older.memory_id] = newer.memory_id
    order = list(ranked)
    for older_id, newer_id in rivals.items():
        at = next(i for i, memory in enumerate(order) if memory.memory_id == older_id)
        now = next(i for i, memory in enumerate(order) if memory.memory_id == newer_id)
        if now > at:
            lifted = replace(order[now], score=max(order[now].score, order[at].score))
            del order[now]
            order.insert(at, lifted)
    return order, rivals


def _opening(memory: Ranked) -> Ranked:
    """``memory`` as compared: its text cut to MAX_COMPARED_CHARS, between words."""
    if len(memory.text) <= MAX_COMPARED_CHARS:
        return memory
    cut = memory.text[:MAX_COMPARED_CHARS]
    return replace(memory, text=cut.rsplit(None, 1)[0] if " " in cut else cut)


@dataclass(frozen=True, slots=True)
class _Asked:
    """What the question asks: its words, topic terms, naming terms, kinds of value, weights."""

    question: str
    topic: frozenset[str]
    naming: frozenset[str]
    kinds: frozenset[str]
    weights: Mapping[str, float]
    #: The topic terms that end one of its phrases: what it asks about (``_phrase_ends``).
    ends: frozenset[str]

    @property
    def total(self) -> float:
        return _weight(frozenset(self.weights), self.weights)


def _newest_rival(
    checked: Sequence[Ranked], older: Ranked, asked: _Asked, params: RecencyParams, alike: Alike | None
) -> Ranked | None:
    """The newest memory, newer than ``older``, that answers the question about as well (one of its
    statements: ``_answers_as_well``) with no sign of another subject. The newest, so that the last
    of three versions comes first."""
    if older.valid_from_ms is None:
        return None
    held = older.terms & asked.weights.keys()
    held_weight = _weight(held, asked.weights)
    if held_weight < params.min_answer_share * asked.total and not _answers_by_meaning(older, params):
        return None
    if not held or not asked.naming <= older.terms or not _answers_now(older, asked.topic, frozenset()):
        return None  # no answer: it lacks a name the question asks about, or states nothing now
    floor = params.tie_share * held_weight
    asked_words = asked.ends & older.terms
    newest: Ranked | None = None
    for candidate in checked:
        valid_from = candidate.valid_from_ms
        if valid_from is None or valid_from <= older.valid_from_ms:
            continue
        if newest is not None and valid_from <= (newest.valid_from_ms or 0):
            continue
        answers = (
            _answers_as_well(candidate, asked.naming, floor, asked)
            or (
                bool(asked_words)
                and _answers_as_well(
                    candidate, asked.naming, params.asked_word_share * held_weight, asked, asked_words
                )
            )
            or _close_in_meaning(candidate, older, asked, params, alike)
        )
        if answers and not _other_subject(asked.question, older.text, candidate.text):
            newest = candidate
    return newest


def _answers_by_meaning(older: Ranked, params: RecencyParams) -> bool:
    """With recall by meaning: a typed value close enough to the question answers it in any words
    (chat turns about one topic are a conversation, not values replaced)."""
    return older.memory_type in VALUE_TYPES and (older.cosine or 0.0) >= params.answer_cosine


def _close_in_meaning(
    candidate: Ranked, older: Ranked, asked: _Asked, params: RecencyParams, alike: Alike | None
) -> bool:
    """With recall by meaning: two typed values close in meaning, the newer answering the question
    (at any share of its weight) and its words showing no other thing."""
    return (
        alike is not None
        and older.memory_type in VALUE_TYPES
        and candidate.memory_type in VALUE_TYPES
        and (alike(older.memory_id, candidate.memory_id) or 0.0) >= params.same_meaning
        and _answers_as_well(candidate, asked.naming, 0.0, asked)
        and _same_thing(older.text, candidate.text)
    )


def _same_thing(older: str, newer: str) -> bool:
    """Close in meaning is not the same subject: both said by one speaker (another speaker's turn
    is a reply or a disagreement, not an update), and some statement of each must not show another
    thing by its words (the structurer's verdict: "release target" → "release party", "on call for
    payments" → "on call for infra")."""
    old_speaker, new_speaker = split_speaker(older.lstrip())[0], split_speaker(newer.lstrip())[0]
    if old_speaker and new_speaker and old_speaker.lower() != new_speaker.lower():
        return False
    for old_statement in _now_statements(older):
        for new_statement in _now_statements(newer):
            new, old = settle_openings(read(new_statement.text), read(old_statement.text))
            if topic_verdict(new, old) != "other" and not swapped_word(new, old):
                return True
    return False


def _answers_as_well(
    candidate: Ranked,
    naming: frozenset[str],
    floor: float,
    asked: _Asked,
    saying: frozenset[str] = frozenset(),
) -> bool:
    """One statement of ``candidate`` answers on its own: it states something now, holds
    ``naming``, one of ``saying`` (when given) and at least ``floor`` of the question weight, and
    a value of an asked kind (when the question asks one). One statement, not the whole memory:
    a chat turn whose sentences each hold a question word is no answer to it."""
    return any(
        naming <= terms
        and _weight(terms & asked.weights.keys(), asked.weights) >= floor
        and (not asked.kinds or kinds & asked.kinds)
        and (not saying or bool(saying & terms))
        for terms, kinds in _states_now(candidate.text)
    )


def _words(text: str) -> list[tuple[str, frozenset[str]]]:
    """The words of ``text`` in order, each with its terms (empty for a stopword)."""
    words = (match.group(0).rstrip(_TRAILING) for match in _WORD_RUN.finditer(text))
    return [(word, frozenset(analyze(word))) for word in words if word]


def _terms(words: Sequence[tuple[str, frozenset[str]]]) -> frozenset[str]:
    """Every term of ``words``."""
    return frozenset(term for _, terms in words for term in terms)


def _told_in_past(question_words: Sequence[tuple[str, frozenset[str]]], text: str) -> bool:
    """``text`` says one of the question's words in a past form the question does not use
    ("Mia lived in Lisbon" for "Where does Mia live?"): a story, not the current value."""
    asked = {term: word for word, terms in question_words for term in terms}
    for word, terms in _words(text):
        for term in terms:
            if term in asked and word.lower().endswith("ed") and not _PAST_FORM.search(asked[term]):
                return True
    return False


def _extends(question_words: Sequence[tuple[str, frozenset[str]]], text: str) -> frozenset[str]:
    """The question's last-of-phrase words that ``text`` makes the first word of a longer subject
    ("The demo prep is at 2pm" for "When is the demo?"): another subject named after the question's."""
    asked = _terms(question_words)
    ends = _phrase_ends(question_words)
    return frozenset(
        term
        for match in _SUBJECT_HEAD.finditer(text)
        for term in frozenset(analyze(match.group(1))) & ends
        if (head := frozenset(analyze(match.group(2)))) and not head & asked
    )


def _phrase_ends(question_words: Sequence[tuple[str, frozenset[str]]]) -> frozenset[str]:
    """The terms of the question's words that end a phrase and name no one ("rent" in "What's the
    monthly rent at Elm Street?", "manager" in "Who is the hiring manager for …?"): what it asks about."""
    return frozenset(
        term
        for (word, terms), (_, following) in pairwise([*question_words, ("", frozenset())])
        for term in terms
        if not following and not _named(word)
    )


def _named(word: str) -> bool:
    """A name, a day or a number ("Acme", "Saturday", "4.2"): the naming terms' guard covers those."""
    return word[:1].isupper() or any(c.isdigit() for c in word)


def _other_subject(question: str, older: str, newer: str) -> bool:
    """The newer memory tells the question's verb in the past, swaps a word of the question for its
    own, or names a subject of its own after the question's words where the older does not."""
    question_words = _words(question)
    if (
        _told_in_past(question_words, newer)
        or _swaps_modifier(question_words, newer)
        or _swaps_complement(question_words, newer)
    ):
        return True
    return bool(_extends(question_words, newer) - _extends(question_words, older))


def _swaps_modifier(question_words: Sequence[tuple[str, frozenset[str]]], text: str) -> bool:
    """``text`` puts a word of its own where the question has one before the same word ("Dana's
    home number" for "What is Dana's work number?"): the question asks about another one."""
    asked = _terms(question_words)
    modified = frozenset(
        term for (_, before), (_, terms) in pairwise(question_words) if before for term in terms
    )
    return any(
        before and not before & asked and not _named(word) and terms & modified
        for (word, before), (_, terms) in pairwise(_words(text))
    )


def _complements(words: Sequence[tuple[str, frozenset[str]]]) -> dict[str, frozenset[str]]:
    """{preposition: the terms of the first word with terms after it} for each scoping preposition."""
    found: dict[str, set[str]] = {}
    for at, (word, _) in enumerate(words):
        if word.lower() in _SCOPING:
            following = next((terms for _, terms in words[at + 1 :] if terms), frozenset())
            found.setdefault(word.lower(), set()).update(following)
    return {word: frozenset(terms) for word, terms in found.items()}


def _swaps_complement(question_words: Sequence[tuple[str, frozenset[str]]], text: str) -> bool:
    """``text`` gives a preposition of the question another object and never says the question's
    ("… tech lead for billing" for "Who is tech lead for search?"): another one."""
    asked = _terms(question_words)
    words = _words(text)
    said = _terms(words)
    theirs = _complements(words)
    return any(
        objects and not objects & said and theirs.get(preposition, frozenset()) - asked
        for preposition, objects in _complements(question_words).items()
    )
