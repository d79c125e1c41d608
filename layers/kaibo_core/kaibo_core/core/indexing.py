"""What indexing a memory writes, computed without I/O (docs/recall.md, "The term index").

For each distinct term of a memory's text, one **posting** in the partition
``project#t<side>#term`` (side ``c`` for current memories, ``h`` for history),
sorted by an integer **impact**: the BM25 term-frequency factor at a fixed
reference length,

    impact = round(IMPACT_SCALE * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / AVGDL_REFERENCE)))

so that a descending Query reads the postings that can score highest first, and
a bounded read of a frequent term keeps its best entries. Recall recomputes the
exact BM25 from the posting's ``tf`` and ``dl`` with the project's live average
length: the impact only orders the reads.

Document frequencies and corpus statistics are counters split into shards
(``crc32(memory id) mod shards``), so that no single item takes every write.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from kaibo_core.core.clock import instant_ms, parse_instant
from kaibo_core.core.models.memories import (
    CURRENT_STATUSES,
    HISTORICAL_STATUSES,
    STAGED,
    MemoryRecord,
    Posting,
    SemanticPlacement,
)
from kaibo_core.core.ranking import DEFAULT_PARAMS, Bm25Params
from kaibo_core.core.semantic.placement import cell_term, is_cell_term
from kaibo_core.core.semantic.vectors import posting_code
from kaibo_core.core.text import analyze, time_terms

#: The memory length (in terms) the impact order assumes; near the typical memory.
AVGDL_REFERENCE: Final = 16.0
IMPACT_SCALE: Final = 10_000  # impacts lie in [0, 22000): five digits
DF_SHARDS: Final = 8
#: The same as DF_SHARDS, and the same hash: a memory updates df shard k and corpus shard k,
#: so indexing the memories of one shard in sequence avoids every counter conflict.
CORPUS_SHARDS: Final = DF_SHARDS
#: Two actions per term (posting + df shard) and two for the memory and its corpus shard
#: fit in one TransactWriteItems (at most 100 actions).
TERMS_PER_TRANSACTION: Final = 49


@dataclass(frozen=True, slots=True)
class TermEntry:
    term: str
    tf: int
    impact: int


@dataclass(frozen=True, slots=True)
class IndexPlan:
    memory_id: str
    dl: int
    entries: tuple[TermEntry, ...]  # sorted by term: every attempt chunks them identically
    df_shard: int
    corpus_shard: int

    def chunks(self, size: int = TERMS_PER_TRANSACTION) -> list[tuple[TermEntry, ...]]:
        return [self.entries[i : i + size] for i in range(0, len(self.entries), size)] or [()]


def shard_of(memory_id: str, shards: int) -> int:
    return zlib.crc32(memory_id.encode("utf-8")) % shards


def impact(tf: int, dl: int, params: Bm25Params = DEFAULT_PARAMS) -> int:
    k1, b = params.k1, params.b
    factor = tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * dl / AVGDL_REFERENCE))
    return min(round(IMPACT_SCALE * factor), 99_999)


def index_side(status: str) -> str | None:
    """Which postings side a memory of ``status`` lives on; None: not indexed at all."""
    if status in CURRENT_STATUSES:
        return "c"
    if status in HISTORICAL_STATUSES:
        return "h"
    return None


def effective_status(memory: MemoryRecord) -> str:
    """A memory's status, or for a staged one the status it will take."""
    return memory.becomes if memory.status == STAGED and memory.becomes else memory.status


def memory_side(memory: MemoryRecord) -> str | None:
    """Which postings side ``memory`` is indexed on (a staged memory: where it will live)."""
    return index_side(effective_status(memory))


def date_terms(memory: MemoryRecord) -> list[str]:
    """The terms of the date a memory became valid (UTC; kaibo_core.core.text.time_terms)."""
    moment = parse_instant(memory.valid_from)
    return time_terms(moment.year, moment.month, moment.day)


def memory_terms(memory: MemoryRecord) -> list[str]:
    """What a memory is indexed under: its text's terms, then its date's, so that
    "in July 2023" finds what was said then."""
    if memory.content is None:
        raise ValueError("a memory without content has no terms")
    return analyze(memory.content) + date_terms(memory)


def posting_of(memory: MemoryRecord, entry: TermEntry, dl: int) -> Posting:
    """The posting of one of a memory's terms (every store writes this).

    A staged memory's postings already carry the status it will have: the memory item,
    not the posting, decides whether it is visible.
    """
    status = effective_status(memory)
    return Posting(
        memory_id=memory.id,
        tf=entry.tf,
        dl=dl,
        valid_from_ms=instant_ms(memory.valid_from),
        valid_to_ms=_valid_to_ms(memory),
        stream=memory.stream,
        type=memory.type,
        status=status,
        vector=posting_code(memory.semantic.vector)
        if memory.semantic is not None and is_cell_term(entry.term)
        else None,
        successor=_successor(memory, status),
    )


def _valid_to_ms(memory: MemoryRecord) -> int | None:
    return None if memory.valid_to is None else instant_ms(memory.valid_to)


def _successor(memory: MemoryRecord, status: str) -> str | None:
    return memory.superseded_by[-1] if status in HISTORICAL_STATUSES and memory.superseded_by else None


def postings_record(memory: MemoryRecord, side: str) -> str:
    """What ``memory``'s postings on ``side`` say of it beyond its words, as its item records it
    (``ix``): the side alone, or for postings that carry an end or a successor,
    ``side|status|validToMs|successor``. Structuring compares it with a memory's final state to
    know, without reading a posting, whether its postings must move or be written again."""
    status = effective_status(memory)
    valid_to, successor = _valid_to_ms(memory), _successor(memory, status)
    if valid_to is None and successor is None:
        return side
    fields = [side, status, "" if valid_to is None else str(valid_to), successor or ""]
    return POSTING_SEPARATOR.join(fields)


def recorded_side(record: str) -> str:
    """The side a ``postings_record`` names (a record written before validity was kept is the
    side alone)."""
    return record.split(POSTING_SEPARATOR, 1)[0]


def memory_plan(memory: MemoryRecord) -> IndexPlan:
    """What indexing ``memory`` writes: its terms' postings and, placed by a model, its cells'."""
    return plan_index(memory.id, memory_terms(memory), cell_entries(memory.semantic))


def cell_entries(placement: SemanticPlacement | None) -> tuple[TermEntry, ...]:
    """A placed memory's cells as entries of its plan (kaibo_core.core.semantic.placement): they
    are not words of its text, so they count in no length."""
    if placement is None:
        return ()
    return tuple(TermEntry(cell_term(placement.version, cell), 1, rank) for cell, rank in placement.cells)


def plan_index(memory_id: str, terms: Sequence[str], cells: Sequence[TermEntry] = ()) -> IndexPlan:
    if isinstance(terms, str):
        raise TypeError("plan_index takes a memory's terms (memory_terms), not its text")
    counts = Counter(terms)
    dl = len(terms)
    words = [TermEntry(term, tf, impact(tf, dl)) for term, tf in counts.items()]
    entries = tuple(sorted([*words, *cells], key=lambda entry: entry.term))
    return IndexPlan(
        memory_id=memory_id,
        dl=dl,
        entries=entries,
        df_shard=shard_of(memory_id, DF_SHARDS),
        corpus_shard=shard_of(memory_id, CORPUS_SHARDS),
    )


#: Field separator of a stored posting: never in a stream name, type or status.
POSTING_SEPARATOR: Final = "|"


def encode_posting(posting: Posting) -> str:
    """A posting's fields as one string attribute: ``tf|dl|validFromMs|validToMs|status|type|stream``,
    and ``|successor`` on a history posting whose memory was retired by another.

    One attribute instead of seven: recall deserializes hundreds of postings per question,
    and the SDK's cost is per attribute. (The memory id is in the sort key.)
    """
    valid_to = "" if posting.valid_to_ms is None else str(posting.valid_to_ms)
    fields = [
        str(posting.tf),
        str(posting.dl),
        str(posting.valid_from_ms),
        valid_to,
        posting.status,
        posting.type,
        posting.stream,
    ]
    if posting.successor is not None:
        fields.append(posting.successor)
    return POSTING_SEPARATOR.join(fields)


def decode_posting(memory_id: str, encoded: str) -> Posting:
    tf, dl, valid_from, valid_to, status, memory_type, rest = encoded.split(POSTING_SEPARATOR, 6)
    stream, _, successor = rest.partition(POSTING_SEPARATOR)
    # Positional, in field order: recall's hot loop (hundreds per question).
    return Posting(
        memory_id,
        int(tf),
        int(dl),
        int(valid_from),
        int(valid_to) if valid_to else None,
        stream,
        memory_type,
        status,
        None,
        successor or None,
    )
