"""Reciprocal rank fusion: one ranking from the lexical and the semantic channel's rankings.

``score(d) = Σ_channels weight / (k + rank(d))``, rank from 1 (Cormack, Clarke and Büttcher,
SIGIR 2009). Ranks, not scores, are fused because BM25 and cosine are on scales that do not
compare; ``k = 60`` is the paper's value, which damps the difference between the first ranks.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Final, TypeVar

RRF_K: Final = 60

_Id = TypeVar("_Id", bound=Hashable)


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[_Id]], weights: Sequence[float] | None = None, k: int = RRF_K
) -> list[tuple[_Id, float]]:
    """Every id of any ranking with its fused score, best first (ties: first seen first)."""
    if weights is not None and len(weights) != len(rankings):
        raise ValueError("one weight per ranking")
    scores: dict[_Id, float] = {}
    for position, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else weights[position]
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda pair: (-pair[1], order[pair[0]]))
