"""Which ranked memories recall returns (``docs/recall.md``, "Near-duplicates" and
"The smallest set").

    ranked (best first) --collapse_near_duplicates--> distinct candidates
                        --smallest_set--> greedy weighted cover of the question's
                                          terms + corroborating high scorers

Pure: standard library only, no I/O. Every rule is deterministic: ties are broken
by score, then by input (rank) order.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from kaibo_core.core.text import analyze


@dataclass(frozen=True, slots=True)
class Ranked:
    """A ranked candidate: ``terms`` is ``frozenset(analyze(text))`` (or a set equal to it, read
    where asked: ``kaibo_core.core.recall.long_texts.TermSet``), ``score`` its BM25 score (> 0)."""

    memory_id: str
    score: float
    terms: AbstractSet[str]
    text: str
    #: When the memory became valid (epoch ms), if known: two memories that give one subject's
    #: attribute different values keep only the newer (``kaibo_core.core.recall.conflicts``).
    valid_from_ms: int | None = None
    #: The memory's type (fact, decision, …), if known: only value-holding types can outdate.
    memory_type: str | None = None
    #: With recall by meaning: ``score`` is the fused score, ``lexical`` its BM25 part and
    #: ``cosine`` the memory's cosine to the question (kaibo_core.core.semantic.scoring).
    lexical: float | None = None
    cosine: float | None = None
    #: What context added to ``score`` (kaibo_core.core.recall.context): a neighbour of a better memory.
    context_lift: float = 0.0


@dataclass(frozen=True, slots=True)
class SelectionParams:
    """``coverage_target``: the greedy cover stops once this share of the question's
    total idf weight is covered (1.0: every question term some candidate has).
    ``relative_floor``: afterwards every remaining candidate scoring at least
    ``relative_floor * top score`` is added as corroboration. ``max_items`` caps
    the result (cover picks first, then corroboration)."""

    coverage_target: float = 1.0
    relative_floor: float = 0.3
    max_items: int = 50
    #: With recall by meaning, corroboration is per channel: BM25 at least ``relative_floor`` of the
    #: best BM25, or a cosine within ``cosine_margin`` of the best cosine (cosines of unrelated
    #: memories sit close to the best one's, so a share of the fused score would let in all of them).
    cosine_margin: float = 0.15
    #: A neighbour lifted by context (kaibo_core.core.recall.context) is corroborated by its lifted
    #: score only with a relevance of its own: a question term, or with recall by meaning at least
    #: this cosine (the floor of a semantic candidate, ``SemanticParams.min_candidate_cosine``).
    neighbour_min_cosine: float = 0.25

    def __post_init__(self) -> None:
        if not 0.0 <= self.coverage_target <= 1.0:
            raise ValueError(f"coverage_target must lie in [0, 1], got {self.coverage_target!r}")
        if not 0.0 <= self.relative_floor <= 1.0:
            raise ValueError(f"relative_floor must lie in [0, 1], got {self.relative_floor!r}")
        if self.max_items < 1:
            raise ValueError(f"max_items must be >= 1, got {self.max_items!r}")


DEFAULT_SELECTION = SelectionParams()

#: Negations, as words; ``NEGATION_TERMS`` are their terms under ``analyze``. A
#: better-ranked text that adds one of them to another's terms ("the deploy is
#: not on Tuesday" vs "the deploy is on Tuesday") contradicts it rather than
#: repeating it, so containment does not drop it.
_NEGATION_WORDS = """
not no never nor none nothing nobody nowhere neither without cannot
dont doesnt didnt isnt arent wasnt werent cant couldnt wont wouldnt
shouldnt hasnt havent hadnt mustnt neednt aint
"""
NEGATION_TERMS: frozenset[str] = frozenset(term for word in _NEGATION_WORDS.split() for term in analyze(word))
#: Longest first: a long text's terms are read where a term's probe stands, and a short term's
#: probe (``no``: ``n``) stands nearly everywhere, so the negations a text is likelier to be found
#: holding cheaply are asked about first (the answer is the same in any order).
_NEGATIONS_LONGEST_FIRST: tuple[str, ...] = tuple(sorted(NEGATION_TERMS, key=lambda term: (-len(term), term)))


def normalized_text(text: str) -> str:
    """NFKC, case folding, and every whitespace run collapsed to one space (ends stripped)."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _covers(kept: Ranked, kept_text: str, candidate: Ranked, candidate_text: str) -> bool:
    """``candidate`` says nothing ``kept`` does not: equal normalized text, or a
    non-empty term set contained in ``kept``'s (containment = 1) where the terms
    ``kept`` adds include no negation."""
    if candidate_text == kept_text:
        return True
    return (
        bool(candidate.terms)
        and candidate.terms <= kept.terms
        and not any(term in kept.terms and term not in candidate.terms for term in _NEGATIONS_LONGEST_FIRST)
    )


def collapse_near_duplicates(ranked: Sequence[Ranked]) -> tuple[list[Ranked], dict[str, str]]:
    """Drop candidates that repeat a better-ranked kept one.

    Input best-first. A candidate B is dropped when terms(B) ⊆ terms(A) for some
    better-ranked kept A (containment |T(B) ∩ T(A)| / |T(B)| = 1: B says nothing A
    does not) and the terms A adds include none of ``NEGATION_TERMS`` (A would
    contradict B, not repeat it), or when its normalized text (``normalized_text``)
    equals A's. A candidate with an empty term set is never contained unless its
    normalized text equals A's. Returns (kept in input order, {dropped_id: id of the first
    kept candidate that covers it}). Memories that disagree are not near-duplicates: recall's
    safety net for those is ``kaibo_core.core.recall.conflicts.outdated``.
    """
    kept: list[tuple[Ranked, str]] = []
    dropped: dict[str, str] = {}
    for candidate in ranked:
        candidate_text = normalized_text(candidate.text)
        for better, better_text in kept:
            if _covers(better, better_text, candidate, candidate_text):
                dropped[candidate.memory_id] = better.memory_id
                break
        else:
            kept.append((candidate, candidate_text))
    return [candidate for candidate, _ in kept], dropped


def _usable(weight: float) -> bool:
    return math.isfinite(weight) and weight > 0.0


def _corroboration(candidates: Sequence[Ranked], params: SelectionParams) -> Callable[[Ranked], bool]:
    """Which candidates the smallest set adds after its cover (``smallest_set``).

    A neighbour lifted by context is there for its place next to a better memory: it is
    corroborated by its lifted score (at least ``relative_floor`` of the best score) when it also
    holds a question term of its own or, with recall by meaning, its own cosine is at least
    ``neighbour_min_cosine``, so a stream of unrelated notes does not bring the note next door."""
    score_floor = params.relative_floor * max(candidate.score for candidate in candidates)

    def relevant_neighbour(candidate: Ranked) -> bool:
        if candidate.context_lift <= 0.0 or candidate.score < score_floor:
            return False
        own_lexical = (
            candidate.score - candidate.context_lift if candidate.lexical is None else candidate.lexical
        )
        return own_lexical > 0.0 or (candidate.cosine or 0.0) >= params.neighbour_min_cosine

    if all(candidate.cosine is None for candidate in candidates):
        return lambda candidate: (
            relevant_neighbour(candidate) if candidate.context_lift > 0.0 else candidate.score >= score_floor
        )
    lexical_floor = params.relative_floor * max(candidate.lexical or 0.0 for candidate in candidates)
    cosine_floor = max(candidate.cosine or 0.0 for candidate in candidates) - params.cosine_margin

    def close_to_the_best(candidate: Ranked) -> bool:
        lexical, cosine = candidate.lexical or 0.0, candidate.cosine or 0.0
        return (
            (lexical > 0.0 and lexical >= lexical_floor)
            or (cosine > 0.0 and cosine >= cosine_floor)
            or relevant_neighbour(candidate)
        )

    return close_to_the_best


def smallest_set(
    candidates: Sequence[Ranked],
    weights: Mapping[str, float],
    params: SelectionParams = DEFAULT_SELECTION,
) -> list[Ranked]:
    """The smallest set of candidates that answers the question, best first.

    ``weights`` maps each question term to its idf weight; weights that are not
    finite and > 0 are ignored. Greedy weighted set cover: repeatedly pick the
    candidate with the largest marginal gain (the sum of the weights of question
    terms in its ``terms`` not yet covered; ties: higher score, then earlier in
    the input) until the covered weight reaches ``coverage_target * total``, no
    candidate adds a gain > 0, or ``max_items`` are chosen. Then corroboration:
    every remaining candidate, in input order, whose score >= ``relative_floor *
    top score`` (top = the largest score among ``candidates``), while fewer than
    ``max_items`` are chosen. The result is ordered by score descending, ties in
    input order. Weight sums use ``math.fsum`` (exact, order-independent).
    """
    if not candidates:
        return []
    question = {term: weight for term, weight in weights.items() if _usable(weight)}
    total = math.fsum(question.values())
    chosen: list[int] = []
    taken: set[int] = set()
    if total > 0.0:
        target = params.coverage_target * total
        covered: set[str] = set()
        while len(chosen) < params.max_items and math.fsum(question[t] for t in covered) < target:
            uncovered = [term for term in question if term not in covered]
            best: int | None = None
            best_key: tuple[float, float, int] = (0.0, 0.0, 0)
            for index, candidate in enumerate(candidates):
                if index in taken:
                    continue
                gain = math.fsum(question[term] for term in uncovered if term in candidate.terms)
                key = (gain, candidate.score, -index)
                if gain > 0.0 and (best is None or key > best_key):
                    best, best_key = index, key
            if best is None:
                break
            chosen.append(best)
            taken.add(best)
            covered.update(term for term in uncovered if term in candidates[best].terms)
    corroborates = _corroboration(candidates, params)
    for index, candidate in enumerate(candidates):
        if len(chosen) >= params.max_items:
            break
        if index not in taken and corroborates(candidate):
            chosen.append(index)
            taken.add(index)
    chosen.sort(key=lambda index: (-candidates[index].score, index))
    return [candidates[index] for index in chosen]
