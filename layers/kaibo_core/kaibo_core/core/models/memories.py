"""Domain records of memories and of the term index (no I/O, no wire format).

Statuses (API.md, one vocabulary everywhere)::

    provisional -> replaced            (made at remember time; replaced by structured memories)
    active -> superseded | canceled    (a later statement replaced or cancelled it; validTo set)
    any -> tombstoned -> purged        (forgotten; text gone after the grace window)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal, NamedTuple

MemoryStatus = Literal[
    "provisional", "replaced", "active", "superseded", "canceled", "tombstoned", "purged", "staged"
]
MemoryType = Literal["fact", "decision", "task", "preference", "procedure", "episode"]
MEMORY_TYPES: Final[tuple[MemoryType, ...]] = (
    "fact",
    "decision",
    "task",
    "preference",
    "procedure",
    "episode",
)

#: Statuses recall answers from by default: what is believed now.
CURRENT_STATUSES: Final[frozenset[str]] = frozenset({"provisional", "active"})
#: Statuses that are history: recall shows them with ``includeSuperseded`` or at a past ``asOf``.
HISTORICAL_STATUSES: Final[frozenset[str]] = frozenset({"superseded", "canceled"})
#: Never in recall: a replaced provisional copy, anything forgotten.
HIDDEN_STATUSES: Final[frozenset[str]] = frozenset({"replaced", "tombstoned", "purged"})

#: The last word of a preference's subject ("anna coffee preference"), added by the rules: the
#: statement itself may not say it ("I like green tea").
PREFERENCE_SUBJECT_WORD: Final = "preference"

#: Internal, never served: a structured memory written and indexed but not yet switched on.
#: It becomes visible in the same transaction that marks its provisional memory ``replaced``
#: (docs/structuring.md, "Provisional to structured").
STAGED: Final = "staged"

#: A provisional memory is the event's text, unstructured: low confidence until structured.
PROVISIONAL_CONFIDENCE: Final = 0.5


@dataclass(frozen=True, slots=True)
class SourceEventRef:
    """A citation: the event a memory came from, as the chain proves it."""

    event_id: str
    stream: str
    seq: int
    hash: str


@dataclass(frozen=True, slots=True)
class SemanticPlacement:
    """Where recall by meaning files a memory: its vector and its nearest cells of the inverted file.

    Computed once, when the memory is written, by the model named in ``version`` (model and cell
    set); stored on the memory item so that every later move of its postings (supersede, forget,
    purge) finds them without running the model again (docs/recall.md, "Recall by meaning").
    """

    version: str  # the model and its cells, e.g. ``mini6c256``: postings of two versions never mix
    cells: tuple[tuple[int, int], ...]  # (cell, impact): the memory's nearest cells, nearest first
    vector: str  # kaibo_core.core.semantic.vectors.encode_vector


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """One memory. The stored item is the authority on its status (postings are hints)."""

    project_id: str
    id: str
    status: MemoryStatus
    type: MemoryType
    content: str | None  # None once tombstoned
    valid_from: str  # canonical instant (kaibo_core.core.clock.format_instant)
    valid_to: str | None
    confidence: float
    stream: str
    source_events: tuple[SourceEventRef, ...]
    created_at: str
    supersedes: tuple[str, ...] = ()
    superseded_by: tuple[str, ...] = ()
    replaced_by: tuple[str, ...] = ()
    subject: str | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)
    #: A structured memory: the provisional memory it replaced.
    replaces: str | None = None
    #: A staged memory: the status it takes when switched on.
    becomes: MemoryStatus | None = None
    #: Recall by meaning: its vector and cells (None: written without a model, or purged).
    semantic: SemanticPlacement | None = None
    #: Its length in terms as indexed (text and date terms, ``indexing.memory_terms``), as its item
    #: records it when written by this text pipeline; None: not known (recall then counts it).
    #: Not compared: it is what the store knows of the memory, not part of what it says.
    indexed_length: int | None = field(default=None, compare=False)

    @property
    def source_event_ids(self) -> tuple[str, ...]:
        return tuple(ref.event_id for ref in self.source_events)


class PostingRef(NamedTuple):
    """Where one posting is stored: its partition's project, side and term, and its sort key's
    impact and memory (the index repair reads the index by keys)."""

    project_id: str
    side: str  # ``c`` or ``h``
    term: str
    impact: int
    memory_id: str


class Posting(NamedTuple):
    """One (term, memory) entry of the inverted index: what ranking and the filters need,
    so that recall never fetches a memory that will not be a candidate.

    A named tuple rather than a frozen dataclass: recall builds hundreds per question, and a
    tuple is built ~2.5x faster (a frozen dataclass sets each field through ``object.__setattr__``).
    """

    memory_id: str
    tf: int  # occurrences of the term in the memory's text
    dl: int  # the memory's length in terms
    valid_from_ms: int
    valid_to_ms: int | None
    stream: str
    type: str
    status: str
    #: A semantic posting (a cell's): the memory's vector (kaibo_core.core.semantic.vectors).
    vector: str | None = None
    #: A history posting (superseded or canceled): the memory that retired it, so that a question
    #: in the earlier version's words finds the current one (docs/recall.md, "Found through an
    #: earlier version").
    successor: str | None = None


@dataclass(frozen=True, slots=True)
class CorpusStats:
    """Per-project BM25 statistics: indexed (not replaced, not forgotten) memories and their terms."""

    docs: int
    terms: int

    @property
    def avg_doc_len(self) -> float:
        return self.terms / self.docs if self.docs > 0 else 0.0


@dataclass(frozen=True, slots=True)
class TermRead:
    """What the term index holds for one term of a question: its postings, strongest first."""

    term: str
    postings: list[Posting]
    doc_freq: int
    truncated: bool  # more postings exist beyond the bounded read


@dataclass(frozen=True, slots=True)
class Explanation:
    """The versions that led to a memory: oldest first, the asked memory last."""

    memory_id: str
    chain: tuple[MemoryRecord, ...]
