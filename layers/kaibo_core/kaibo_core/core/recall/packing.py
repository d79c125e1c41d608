"""Fitting the selected memories into the caller's token budget (``docs/recall.md``, "Packing").

Each memory, best first, is either **quoted** (its text verbatim, when it fits the
remaining budget), **summarized** (its most relevant sentences or clauses,
verbatim, joined by ``SUMMARY_SEPARATOR``), or **skipped**. Tokens are counted
only with ``kaibo_core.core.tokens.count_tokens`` on each item's final text, so
``used_tokens == sum(item.tokens) <= budget``; separators between items are the
caller's to count. Pure: standard library, ``kaibo_core.core.text`` and
``kaibo_core.core.tokens`` only.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from kaibo_core.core.text import analyze, fold
from kaibo_core.core.tokens import count_tokens

#: Joins the units of a summary: U+2026 with a space on each side.
SUMMARY_SEPARATOR = " … "
#: A summary counting fewer tokens than this is not worth an item: a few words
#: cut from their context answer nothing and would only crowd the budget.
MIN_SUMMARY_TOKENS = 8
#: A sentence counting more tokens than this is split into clauses, so that a
#: summary can keep the clause that answers and leave the rest of a long sentence.
MAX_SENTENCE_TOKENS = 40

#: A sentence ends after ``. ! ? …`` (and any closing quotes or brackets) followed
#: by whitespace, after ``。 ！ ？`` (and closers) whatever follows, and at every
#: line break (those of ``str.splitlines``).
_SENTENCE_END = re.compile(
    r"[.!?…][\"'”’»)\]]*(?=\s)"
    r"|[。！？][\"'”’»)\]」』）]*"
    r"|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]"
)
#: A clause ends after ``, ; : — –`` followed by whitespace, or after ``， ； ： 、``.
_CLAUSE_END = re.compile(r"[,;:—–](?=\s)|[，；：、]")
#: In a text longer than this, only the units that hold a question term's probe
#: (``term_probe``) are analyzed: a file remembered as one memory is hundreds of KB, and
#: analyzing every sentence of it was half of a recall. Every unit of a shorter text is analyzed.
PROBED_TEXT_CHARS = 4096
#: The leading word run of a term (what ``term_probe`` keeps of a date or compound).
_LEADING_WORD_RUN = re.compile(r"\w+")
#: Left out of a unit before probing: ``analyze`` drops apostrophes inside words
#: (``don't`` -> ``dont``) and commas inside numbers (``1,000`` -> ``1000``).
_DROPPED_IN_TERMS = str.maketrans("", "", "'’,")
#: A decimal digit of any script but ASCII's: a written date's ISO term is in ASCII digits
#: (``May ٢٠٢٣`` -> ``2023-05``), so probes and the text they are looked for in read every
#: digit as its ASCII one (one character for one: positions do not move).
_OTHER_DIGIT = re.compile(r"(?![0-9])\d")

Span = tuple[int, int]


@dataclass(frozen=True, slots=True)
class PackedItem:
    """One memory in the answer: ``tokens == count_tokens(text)``."""

    memory_id: str
    form: Literal["quote", "summary"]
    text: str
    tokens: int


@dataclass(frozen=True, slots=True)
class Packing:
    """``used_tokens == sum(item.tokens for item in items) <= budget``; ``skipped``
    lists, in input order, the memories that fit neither as a quote nor as a summary."""

    items: list[PackedItem]
    used_tokens: int
    skipped: list[str]


def _stripped(text: str, start: int, end: int) -> list[Span]:
    """The span of ``text[start:end]`` without surrounding whitespace; none if blank."""
    piece = text[start:end]
    core = piece.strip()
    if not core:
        return []
    lead = len(piece) - len(piece.lstrip())
    return [(start + lead, start + lead + len(core))]


def _split(text: str, start: int, end: int, boundary: re.Pattern[str]) -> list[Span]:
    spans: list[Span] = []
    position = start
    for match in boundary.finditer(text, start, end):
        spans.extend(_stripped(text, position, match.end()))
        position = match.end()
    spans.extend(_stripped(text, position, end))
    return spans


def split_clauses(text: str, max_sentence_tokens: int = MAX_SENTENCE_TOKENS) -> list[Span]:
    """The units of ``text`` as ``(start, end)`` spans, in order, non-empty, without
    surrounding whitespace: its sentences, each sentence that counts more than
    ``max_sentence_tokens`` tokens split into clauses. ``text[start:end]`` is the
    unit verbatim; the boundary punctuation stays with the unit it ends."""
    units: list[Span] = []
    for start, end in _split(text, 0, len(text), _SENTENCE_END):
        if count_tokens(text[start:end]) > max_sentence_tokens:
            units.extend(_split(text, start, end, _CLAUSE_END))
        else:
            units.append((start, end))
    return units


def term_probe(term: str) -> str:
    """A string every unit whose terms (``analyze``) include ``term`` holds once case-folded
    (``fold``) and without apostrophes and commas; ``""`` when there is none shorter.

    A Snowball English stem keeps all but its last character as it stands in the word
    (``happily`` -> ``happili``, ``hoping`` -> ``hope``, ``relational`` -> ``relat``), all but
    its last two when it ends in ``ie`` (``dying`` -> ``die``): the probe of an alphabetic term
    is the term without them (checked on ~1.3 million generated words; the tests check ~45k).
    Any other term is a folded token verbatim or an ISO date read from a written one
    (``May 8, 2023`` -> ``2023-05-08``): its leading word run (the year) stands in the text."""
    if term.isalpha():
        return term[:-2] if term.endswith("ie") else term[:-1]
    run = _LEADING_WORD_RUN.match(term)
    return _ascii_digits(run.group()) if run is not None else ""


def probed_form(text: str) -> str:
    """``text`` as probes are looked for in it: case-folded, without apostrophes and commas,
    every digit an ASCII one."""
    return _ascii_digits(fold(text).translate(_DROPPED_IN_TERMS))


def _ascii_digits(text: str) -> str:
    if text.isascii():
        return text
    return _OTHER_DIGIT.sub(lambda digit: str(unicodedata.digit(digit.group())), text)


def may_hold(unit: str, probes: Sequence[str]) -> bool:
    """Can ``unit`` hold one of the question terms the probes stand for (``term_probe``)?"""
    folded = probed_form(unit)
    return any(probe in folded for probe in probes)


def _unit_scores(text: str, units: Sequence[Span], question: Mapping[str, float]) -> list[float]:
    """Each unit's summed weight of the distinct question terms among its terms. In a text
    longer than ``PROBED_TEXT_CHARS``, a unit without any question term's probe scores 0
    without being analyzed: the same scores, for a fraction of the work."""
    probes = None if len(text) <= PROBED_TEXT_CHARS else [term_probe(term) for term in question]
    scores = []
    for start, end in units:
        unit = text[start:end]
        if probes is not None and not may_hold(unit, probes):
            scores.append(0.0)
            continue
        terms = set(analyze(unit))
        scores.append(math.fsum(weight for term, weight in question.items() if term in terms))
    return scores


def _question_weights(question_terms: Sequence[str], weights: Mapping[str, float]) -> dict[str, float]:
    """Distinct question terms -> weight; a term missing from ``weights`` weighs 1,
    one whose weight is not finite and > 0 is ignored."""
    question: dict[str, float] = {}
    for term in dict.fromkeys(question_terms):
        weight = weights.get(term, 1.0)
        if math.isfinite(weight) and weight > 0.0:
            question[term] = weight
    return question


def _joined(text: str, spans: Sequence[Span]) -> str:
    return SUMMARY_SEPARATOR.join(text[start:end] for start, end in spans)


@dataclass(frozen=True, slots=True)
class _Cost:
    """Additive bounds on ``count_tokens`` of stripped pieces joined by ``SUMMARY_SEPARATOR``.

    ``upper``: the sum of the pieces' counts (subadditivity, a tested guarantee).
    ``lower``: the byte bound of the counting rule, ``ceil((ascii + 2 * other bytes) / 3)``,
    and the number of whitespace-separated words; both add up over whitespace-joined
    pieces. Should the counting rule change, ``lower`` could only make a fitting
    unit be passed over: acceptance never relies on it."""

    upper: int
    weighted_bytes: int
    words: int

    @classmethod
    def of(cls, piece: str) -> _Cost:
        ascii_chars = sum(1 for char in piece if char < "\x80")
        utf8_bytes = len(piece.encode("utf-8", "surrogatepass"))
        return cls(count_tokens(piece), 2 * utf8_bytes - ascii_chars, len(piece.split()))

    def __add__(self, other: _Cost) -> _Cost:
        return _Cost(
            self.upper + other.upper, self.weighted_bytes + other.weighted_bytes, self.words + other.words
        )

    @property
    def lower(self) -> int:
        return max(-(-self.weighted_bytes // 3), self.words)


_NOTHING = _Cost(0, 0, 0)


class _UnitCosts:
    """Each unit's ``_Cost``, computed when first asked for: the greedy step reads only the
    units it tries, a few of a long text's thousands."""

    def __init__(self, text: str, units: Sequence[Span]) -> None:
        self._text = text
        self._units = units
        self._costs: dict[int, _Cost] = {}

    def __getitem__(self, index: int) -> _Cost:
        cost = self._costs.get(index)
        if cost is None:
            start, end = self._units[index]
            cost = self._costs[index] = _Cost.of(self._text[start:end])
        return cost


def _fits(text: str, max_tokens: int) -> bool:
    """``count_tokens(text) <= max_tokens``, without counting a text too long to fit: every
    character weighs at least one byte of the counting rule's byte bound, a third of a token."""
    return len(text) <= 3 * max_tokens and count_tokens(text) <= max_tokens


def _cut(text: str, span: Span, max_tokens: int) -> Span | None:
    """The longest prefix of the unit that ends at a word boundary (just before
    whitespace) and counts at most ``max_tokens``; ``None`` if there is none.
    Prefix counts are monotone (``count(a) <= count(a + b)``), so bisect."""
    start, end = span
    ends = [k for k in range(start + 1, end) if text[k].isspace() and not text[k - 1].isspace()]
    low, high = 0, len(ends)
    while low < high:
        middle = (low + high) // 2
        if count_tokens(text[start : ends[middle]]) <= max_tokens:
            low = middle + 1
        else:
            high = middle
    return (start, ends[low - 1]) if low else None


def _acceptable(text: str, spans: Sequence[Span], max_tokens: int) -> bool:
    summary = _joined(text, spans)
    return bool(spans) and summary != text and MIN_SUMMARY_TOKENS <= count_tokens(summary) <= max_tokens


def summary_spans(
    text: str, question_terms: Sequence[str], weights: Mapping[str, float], max_tokens: int
) -> list[Span] | None:
    """The spans of ``text`` that ``summarize`` joins, in text order (see there)."""
    if max_tokens < MIN_SUMMARY_TOKENS or _fits(text, max_tokens):
        return None
    units = split_clauses(text, min(MAX_SENTENCE_TOKENS, max_tokens))
    if not units:
        return None
    scores = _unit_scores(text, units, _question_weights(question_terms, weights))
    relevant = sorted((i for i, score in enumerate(scores) if score > 0.0), key=lambda i: (-scores[i], i))
    order = relevant or list(range(len(units)))
    unit_costs = _UnitCosts(text, units)
    if unit_costs[order[0]].upper > max_tokens:  # the best unit alone does not fit: cut it
        cut = _cut(text, units[order[0]], max_tokens)
        if cut is not None and _acceptable(text, [cut], max_tokens):
            return [cut]
    # The joined text is counted exactly only when _Cost's bounds cannot decide.
    separator = _Cost.of(SUMMARY_SEPARATOR)
    chosen: list[int] = []
    total = _NOTHING  # the chosen units and the separators between them
    for index in order:
        trial = sorted([*chosen, index])
        cost = total + unit_costs[index] + (separator if chosen else _NOTHING)
        if cost.upper <= max_tokens or (
            cost.lower <= max_tokens and count_tokens(_joined(text, [units[i] for i in trial])) <= max_tokens
        ):
            chosen, total = trial, cost
        elif not relevant:
            break  # no relevant unit: the beginning of the text, without gaps
    spans = [units[i] for i in chosen]
    return spans if _acceptable(text, spans, max_tokens) else None


def summarize(
    text: str, question_terms: Sequence[str], weights: Mapping[str, float], max_tokens: int
) -> str | None:
    """A verbatim extract of ``text`` counting at most ``max_tokens`` tokens, or ``None``.

    The text's units (``split_clauses``, with sentences of more than
    ``min(MAX_SENTENCE_TOKENS, max_tokens)`` tokens split into clauses) are scored
    by the summed weight of the distinct question terms each contains (terms by
    ``analyze``). Units scoring > 0 are taken greedily by score descending (ties:
    earlier first), each kept if the joined summary (units in text order, joined by
    ``SUMMARY_SEPARATOR``) still fits, otherwise passed over. Without any unit
    scoring > 0, units are taken from the start while they fit. If the best unit
    alone does not fit, it is cut to its longest prefix that ends at a word
    boundary and fits. ``None`` when ``max_tokens < MIN_SUMMARY_TOKENS``, when
    ``text`` itself fits in ``max_tokens`` (that is a quote), or when the result
    would count fewer than ``MIN_SUMMARY_TOKENS`` tokens.
    """
    spans = summary_spans(text, question_terms, weights, max_tokens)
    return None if spans is None else _joined(text, spans)


def pack(
    selected: Sequence[tuple[str, str]],
    question_terms: Sequence[str],
    weights: Mapping[str, float],
    budget: int,
) -> Packing:
    """Fit ``selected`` ((memory_id, text), best first) into ``budget`` tokens.

    In input order, while budget remains: a text counting at most the remaining
    tokens is quoted verbatim; otherwise ``summarize(text, ..., remaining)`` is
    tried; a memory with neither is skipped (as is every memory once the budget is
    spent). Items keep the input order.
    """
    if budget < 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    items: list[PackedItem] = []
    skipped: list[str] = []
    remaining = budget
    for memory_id, text in selected:
        if remaining > 0:
            if _fits(text, remaining):
                tokens = count_tokens(text)
                items.append(PackedItem(memory_id, "quote", text, tokens))
                remaining -= tokens
                continue
            summary = summarize(text, question_terms, weights, remaining)
            if summary is not None:
                tokens = count_tokens(summary)
                items.append(PackedItem(memory_id, "summary", summary, tokens))
                remaining -= tokens
                continue
        skipped.append(memory_id)
    return Packing(items, budget - remaining, skipped)
