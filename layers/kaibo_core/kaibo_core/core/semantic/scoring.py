"""Recall by meaning's part of a recall: candidates from the cells' postings, one fused score.

    question vector --nearest cells--> their postings (vectors on them) --cosine--> semantic candidates
    lexical candidates ∪ semantic candidates --items--> fused score = cosine + lexical_weight · BM25

A score, not reciprocal ranks, is fused: with ranks, a lure that BM25 ranks first beats the memory
only the model ranks first (measured: docs/performance-recall.md, "Recall by meaning"). The cosine
is on [-1, 1] and differs little between unrelated memories; BM25 is unbounded and is zero when no
word is shared: a small weight on BM25 lets an exact match win among similar meanings, and lets a
paraphrase with no shared word still rank.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kaibo_core.core.recall.scoring import RecallFilters, visible
from kaibo_core.core.semantic.vectors import decode_vector, decode_vectors

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from kaibo_core.core.models.memories import SemanticPlacement, TermRead


@dataclass(frozen=True, slots=True)
class SemanticParams:
    """The frozen parameters of recall by meaning (docs/recall.md, "Recall by meaning")."""

    #: Cells a question reads (of 256), nearest first.
    probes: int = 8
    #: Postings read per cell, nearest its centroid first.
    postings_per_cell: int = 48
    #: Semantic candidates whose memory items are fetched beside the lexical ones.
    candidates: int = 16
    #: A posting closer than this to the question is not a candidate.
    min_candidate_cosine: float = 0.25
    #: β of ``cosine + β · BM25``.
    lexical_weight: float = 0.03
    #: A recall whose words cover too little of the question still answers when a memory is this close.
    confident_cosine: float = 0.5


def semantic_candidates(
    reads: Sequence[TermRead],
    question: NDArray[np.float32],
    filters: RecallFilters,
    params: SemanticParams,
) -> list[tuple[str, float]]:
    """The memories of the cells' postings nearest the question (id, cosine), best first, at
    most ``params.candidates``, visible at ``asOf`` under the filters (as the postings say: the
    items decide in the end)."""
    ids: list[str] = []
    codes: list[str] = []
    seen: set[str] = set()
    for read in reads:
        for posting in read.postings:
            if posting.vector is None or posting.memory_id in seen:
                continue
            seen.add(posting.memory_id)
            if visible(
                posting.status,
                posting.valid_from_ms,
                posting.valid_to_ms,
                posting.stream,
                posting.type,
                filters,
            ):
                ids.append(posting.memory_id)
                codes.append(posting.vector)
    if not ids:
        return []
    cosines = decode_vectors(codes) @ question
    ranked = sorted(zip(ids, cosines.tolist(), strict=True), key=lambda pair: (-pair[1], pair[0]))
    return [(memory_id, cosine) for memory_id, cosine in ranked if cosine >= params.min_candidate_cosine][
        : params.candidates
    ]


def memory_cosine(placement: SemanticPlacement | None, version: str, question: NDArray[np.float32]) -> float:
    """The cosine of a memory (its item's vector) to the question; 0 when it has no vector of
    this model (written before the model was turned on, or by another model)."""
    vector = placed_vector(placement, version)
    return 0.0 if vector is None else float(vector @ question)


def placed_vector(placement: SemanticPlacement | None, version: str) -> NDArray[np.float32] | None:
    """A memory's vector, if it has one of this model (``version``)."""
    if placement is None or placement.version != version:
        return None
    return decode_vector(placement.vector)


def memories_alike(
    placements: Mapping[str, SemanticPlacement | None], version: str
) -> Callable[[str, str], float | None]:
    """The cosine of two memories' vectors (by id, from ``placements``), each decoded once; None
    when either has no vector of this model."""
    decoded: dict[str, NDArray[np.float32] | None] = {}

    def vector(memory_id: str) -> NDArray[np.float32] | None:
        if memory_id not in decoded:
            decoded[memory_id] = placed_vector(placements.get(memory_id), version)
        return decoded[memory_id]

    def alike(first: str, second: str) -> float | None:
        a, b = vector(first), vector(second)
        return None if a is None or b is None else float(a @ b)

    return alike


def fused_score(bm25: float, cosine: float, params: SemanticParams) -> float:
    return max(0.0, cosine) + params.lexical_weight * bm25
