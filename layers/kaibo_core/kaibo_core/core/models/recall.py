"""What recall is asked and what it answers, as domain values (the wire form is ``kaibo_core.api``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from kaibo_core.core.models.memories import MemoryRecord

AbstainReason = Literal[
    "no_terms", "no_match", "nothing_valid_at_asof", "below_threshold", "budget_too_small"
]

ABSTAIN_MESSAGES: Final[dict[str, str]] = {
    "no_terms": "The question has no searchable words (only stopwords, punctuation or symbols).",
    "no_match": "No memory contains any of the question's terms (with the filters given).",
    "nothing_valid_at_asof": "Memories match the question, but none was valid at asOf.",
    "below_threshold": "The best matching memory covers too little of the question to answer it.",
    "budget_too_small": "Matching memories exist, but not even a short summary of one fits the budget.",
}


@dataclass(frozen=True, slots=True)
class RecallQuery:
    question: str
    budget: int
    as_of: str | None = None  # RFC 3339 as sent; None: now
    streams: frozenset[str] | None = None
    types: frozenset[str] | None = None
    include_superseded: bool = False


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One packed item: the memory (the authority on its fields and citations) and what of it fits."""

    memory: MemoryRecord
    form: Literal["quote", "summary"]
    text: str
    tokens: int
    score: float
    #: A newer packed memory that answers the question as this one does (core/recall/recency.py).
    older_than: str | None = None
    #: The earlier version, superseded or canceled by this memory, that the question's words matched.
    found_via: str | None = None


@dataclass(frozen=True, slots=True)
class RecallCandidate:
    """A confirmed candidate before packing (the ``candidates`` event of a streamed recall)."""

    memory: MemoryRecord
    score: float


@dataclass(frozen=True, slots=True)
class RecallAnswer:
    items: list[RecallHit]
    used_tokens: int
    budget: int
    as_of: str  # the instant recall answered for (canonical form)
    abstain_reason: AbstainReason | None = None
