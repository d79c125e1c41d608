"""BM25 over postings given as plain data (``docs/recall.md``, "Ranking").

    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    score(d, q) = sum over distinct t in q of
                  idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))

The idf is the non-negative Lucene variant of Robertson-Sparck Jones: a term in
every document still weighs a little more than nothing, never less. Pure and
dependency-free: the caller reads postings and corpus statistics, this module
only does arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Bm25Params:
    """``k1`` = 1.2 and ``b`` = 0.75 are the defaults of Robertson's experiments and
    of Lucene/Elasticsearch/OpenSearch. ``k1`` saturates repeats quickly, which suits
    memories (a second mention adds evidence, a tenth barely any); ``b`` = 0.75 keeps
    most of the length normalization, since memory texts range from one fact to a
    pasted paragraph and a long text mentions any term more easily."""

    k1: float = 1.2
    b: float = 0.75

    def __post_init__(self) -> None:
        if not (math.isfinite(self.k1) and self.k1 >= 0):
            raise ValueError(f"k1 must be finite and >= 0, got {self.k1!r}")
        if not 0 <= self.b <= 1:
            raise ValueError(f"b must lie in [0, 1], got {self.b!r}")


DEFAULT_PARAMS = Bm25Params()


def idf(n_docs: int, doc_freq: int) -> float:
    """ln(1 + (N - df + 0.5) / (df + 0.5)), always > 0.

    Corpus statistics may lag the postings (they are maintained separately), so
    ``doc_freq`` is clamped to [0, n_docs] rather than trusted to lie there.
    """
    if n_docs < 0:
        raise ValueError(f"n_docs must be >= 0, got {n_docs}")
    df = min(max(doc_freq, 0), n_docs)
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def bm25_score(  # noqa: PLR0917 - the arguments are the formula's inputs, in its order
    term_freqs: Mapping[str, int],
    doc_len: int,
    avg_doc_len: float,
    doc_freqs: Mapping[str, int],
    n_docs: int,
    query: Sequence[str],
    params: Bm25Params = DEFAULT_PARAMS,
) -> float:
    """The BM25 score of one document for ``query``.

    ``term_freqs`` holds the document's term frequencies (terms absent or with
    tf <= 0 contribute nothing), ``doc_len`` its length in terms, ``doc_freqs``
    the corpus document frequencies (a missing term counts as df = 0). Each
    distinct query term counts once, whatever its repeats in ``query``. When
    ``avg_doc_len`` is not positive (an empty corpus) length normalization is off.
    """
    k1, b = params.k1, params.b
    length_ratio = max(doc_len, 0) / avg_doc_len if avg_doc_len > 0 else 1.0
    norm = k1 * (1.0 - b + b * length_ratio)
    score = 0.0
    for term in dict.fromkeys(query):
        tf = term_freqs.get(term, 0)
        if tf <= 0:
            continue
        score += idf(n_docs, doc_freqs.get(term, 0)) * tf * (k1 + 1.0) / (tf + norm)
    return score
