"""Candidates from postings: visibility at ``asOf`` and the filters, then BM25 (pure).

Postings carry everything this step needs (tf, dl, validity, stream, type, status),
so no memory item is read for a document that will not be a candidate. The
postings are hints: the final candidates are checked again against their memory
items (``visible``), which are the authority.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass

from kaibo_core.core.models.memories import CURRENT_STATUSES, HISTORICAL_STATUSES, CorpusStats, Posting
from kaibo_core.core.ranking import DEFAULT_PARAMS, Bm25Params, idf


@dataclass(frozen=True, slots=True)
class RecallFilters:
    as_of_ms: int
    streams: frozenset[str] | None = None
    types: frozenset[str] | None = None
    include_superseded: bool = False


@dataclass(frozen=True, slots=True)
class Candidate:
    memory_id: str
    score: float
    matched: frozenset[str]  # question terms found in the memory
    valid_from_ms: int


def visible(  # noqa: PLR0917 - the fields of a posting or memory item that decide visibility
    status: str,
    valid_from_ms: int,
    valid_to_ms: int | None,
    stream: str,
    memory_type: str,
    filters: RecallFilters,
) -> bool:
    """Was this memory valid at ``asOf`` and does it pass the filters?

    Never: replaced provisional copies, tombstoned or purged memories, memories not yet
    valid at ``asOf``. A memory whose validity ended at or before ``asOf`` (superseded,
    canceled) only with ``includeSuperseded``.
    """
    if status not in CURRENT_STATUSES and status not in HISTORICAL_STATUSES:
        return False
    if valid_from_ms > filters.as_of_ms:
        return False
    ended = valid_to_ms is not None and valid_to_ms <= filters.as_of_ms
    if (ended or (status in HISTORICAL_STATUSES and valid_to_ms is None)) and not filters.include_superseded:
        return False
    if filters.streams is not None and stream not in filters.streams:
        return False
    return filters.types is None or memory_type in filters.types


def term_weights(doc_freqs: Mapping[str, int], corpus: CorpusStats) -> dict[str, float]:
    """idf of each question term (a term no memory contains gets the highest idf)."""
    n_docs = max(corpus.docs, max(doc_freqs.values(), default=0))
    return {term: idf(n_docs, df) for term, df in doc_freqs.items()}


def _length_terms(corpus: CorpusStats, params: Bm25Params) -> tuple[float, float, float]:
    """BM25's k1 and the two parts of its length normalisation, hoisted out of the hot loops:
    ``tf / (tf + base + per_term * dl)`` is ``tf / (tf + k1 * (1 - b + b * dl / avgdl))``."""
    k1, b = params.k1, params.b
    avgdl = corpus.avg_doc_len
    return k1, (k1 * (1 - b) if avgdl > 0 else k1), (k1 * b / avgdl if avgdl > 0 else 0.0)


def score_postings(
    postings_by_term: Mapping[str, Sequence[Posting]],
    weights: Mapping[str, float],
    corpus: CorpusStats,
    filters: RecallFilters,
    params: Bm25Params = DEFAULT_PARAMS,
) -> tuple[list[Candidate], int]:
    """BM25 candidates best first (ties: newer first, then id), and how many matching
    memories the validity filter alone removed (for the ``nothing_valid_at_asof`` reason).

    The hot loop of recall (hundreds of postings per question): ``visible`` inlined,
    BM25's per-term and per-corpus constants hoisted.
    """
    k1, length_base, length_per_term = _length_terms(corpus, params)
    as_of, include_ended = filters.as_of_ms, filters.include_superseded
    streams, types = filters.streams, filters.types
    scores: dict[str, float] = {}
    matched: dict[str, set[str]] = {}
    valid_from: dict[str, int] = {}
    invalid_at_as_of: set[str] = set()
    for term, postings in postings_by_term.items():
        saturation = weights.get(term, 0.0) * (k1 + 1.0)
        for posting in postings:
            status = posting.status
            historical = status in HISTORICAL_STATUSES
            if not historical and status not in CURRENT_STATUSES:
                continue
            if (streams is not None and posting.stream not in streams) or (
                types is not None and posting.type not in types
            ):
                continue
            valid_to = posting.valid_to_ms
            ended = (valid_to is not None and valid_to <= as_of) or (historical and valid_to is None)
            if posting.valid_from_ms > as_of or (ended and not include_ended):
                invalid_at_as_of.add(posting.memory_id)
                continue
            memory, tf = posting.memory_id, posting.tf
            gain = saturation * tf / (tf + length_base + length_per_term * posting.dl)
            if memory in scores:
                scores[memory] += gain
                matched[memory].add(term)
            else:
                scores[memory] = gain
                matched[memory] = {term}
                valid_from[memory] = posting.valid_from_ms
    ranked = sorted(scores, key=lambda m: (-scores[m], -valid_from[m], m))
    candidates = [Candidate(m, scores[m], frozenset(matched[m]), valid_from[m]) for m in ranked]
    return candidates, len(invalid_at_as_of - scores.keys())


def exact_score(
    term_counts: Mapping[str, int],
    doc_len: int,
    weights: Mapping[str, float],
    corpus: CorpusStats,
    params: Bm25Params = DEFAULT_PARAMS,
) -> float:
    """BM25 of one memory from all its terms (``weights``: the question terms' idf)."""
    k1, b = params.k1, params.b
    avgdl = corpus.avg_doc_len
    norm = k1 * (1 - b + b * doc_len / avgdl) if avgdl > 0 else k1
    score = 0.0
    for term, weight in weights.items():
        tf = term_counts.get(term, 0)
        if tf > 0:
            score += weight * tf * (k1 + 1.0) / (tf + norm)
    return score


def coverage(terms: Container[str], weights: Mapping[str, float]) -> float:
    """The share of the question's idf weight that ``terms`` cover, in [0, 1]. Summed in the
    question's order, asking ``terms`` only about the question's terms (a long memory's terms are
    read where asked: core/recall/long_texts.py)."""
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    return sum(weight for term, weight in weights.items() if term in terms) / total


def successions(
    postings_by_term: Mapping[str, Sequence[Posting]],
    weights: Mapping[str, float],
    corpus: CorpusStats,
    filters: RecallFilters,
    params: Bm25Params = DEFAULT_PARAMS,
) -> dict[str, Candidate]:
    """The memories that retired a version the question matches, ended at ``asOf`` (docs/recall.md,
    "Found through an earlier version"): {successor id: the earlier version as a candidate, its
    BM25 score and matched terms}, the best earlier version of each successor.

    "Rent for the Maple St apartment is $1,850" superseded by "Rent's $1,975 starting July": the
    question "How much is the rent on the Maple St apartment?" matches the earlier text; its
    current version answers it. Not with ``includeSuperseded``: every version is then its own
    candidate. The successor is confirmed by its own item like every candidate.
    """
    if filters.include_superseded:
        return {}
    k1, length_base, length_per_term = _length_terms(corpus, params)
    streams, types = filters.streams, filters.types
    scores: dict[str, float] = {}
    matched: dict[str, set[str]] = {}
    retired_by: dict[str, str] = {}
    for term, postings in postings_by_term.items():
        saturation = weights.get(term, 0.0) * (k1 + 1.0)
        for posting in postings:
            successor = posting.successor
            if successor is None or posting.status not in HISTORICAL_STATUSES:
                continue
            if posting.valid_to_ms is None or posting.valid_to_ms > filters.as_of_ms:
                continue  # still valid at asOf: a version of its own, not ended
            if (streams is not None and posting.stream not in streams) or (
                types is not None and posting.type not in types
            ):
                continue
            memory, tf = posting.memory_id, posting.tf
            gain = saturation * tf / (tf + length_base + length_per_term * posting.dl)
            scores[memory] = scores.get(memory, 0.0) + gain
            matched.setdefault(memory, set()).add(term)
            retired_by[memory] = successor
    found: dict[str, Candidate] = {}
    for memory in sorted(scores, key=lambda m: (-scores[m], m)):
        successor = retired_by[memory]
        if successor not in found:
            found[successor] = Candidate(memory, scores[memory], frozenset(matched[memory]), 0)
    return found
