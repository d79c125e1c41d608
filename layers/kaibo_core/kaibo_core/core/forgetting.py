"""What a forget takes, decided without I/O: the set's closure rules, its preview token, its limits.

A forget names memories by one selector (a memory id, a query, a stream); the set it erases is
the closure of those matches under two relations, and never more:

- **older versions**: what a member ``supersedes`` (walking back), and the provisional memory a
  structured member ``replaces``;
- **same source event**: every memory made from one of the members' source events (the event's
  provisional memory and everything structured from it).

A newer version is *not* followed (``supersededBy``): forgetting "the release is July 13" must not
erase "it moved to July 17", said later in another event. It is taken only when it shares a
source event with the set (then it carries the same text).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

from kaibo_core.core.chain import canonicalize
from kaibo_core.core.ledger import EventLocation, LedgerEntry
from kaibo_core.core.models.events import EventRecord
from kaibo_core.core.models.memories import MemoryRecord, SourceEventRef
from kaibo_core.core.provisional import provisional_memory_id

Why = Literal["match", "older_version", "same_source_event"]

#: A set larger than this is refused unless the call raises ``maxMemories``.
DEFAULT_MAX_MEMORIES: Final = 100
#: ``maxMemories`` may go up to this (one forget is one ledger entry and one request).
MAX_MEMORIES_LIMIT: Final = 1000
#: Statuses that are already forgotten: never part of a new set.
FORGOTTEN: Final = frozenset({"tombstoned", "purged"})
#: Internal statuses a forget takes too (never served): a structured memory not switched on yet.
UNSERVED: Final = frozenset({"staged"})


@dataclass(frozen=True, slots=True)
class ForgetMember:
    memory: MemoryRecord
    why: Why


@dataclass(frozen=True, slots=True)
class ForgetSet:
    """The memories a forget erases (in the order found: matches first) and their source events."""

    members: tuple[ForgetMember, ...]
    event_ids: tuple[str, ...]
    #: Tombstones for events of the set that have no memory yet (a stream forgotten before its
    #: events were indexed): written so that nothing is made from those events later.
    placeholders: tuple[MemoryRecord, ...] = ()

    @property
    def memory_ids(self) -> list[str]:
        return sorted(member.memory.id for member in self.members)

    @property
    def event_locations(self) -> list[EventLocation]:
        """Where each of ``event_ids`` lives, as the set's memories cite it."""
        memories = [*(member.memory for member in self.members), *self.placeholders]
        cited = {ref.event_id: (ref.stream, ref.seq) for memory in memories for ref in memory.source_events}
        return [(event, *cited[event]) for event in self.event_ids if event in cited]

    @property
    def preview_token(self) -> str:
        return preview_token(self.memory_ids, self.event_ids)


@dataclass(frozen=True, slots=True)
class ForgetRequest:
    reason: str
    memory_id: str | None = None
    query: str | None = None
    stream: str | None = None
    dry_run: bool = False
    preview_token: str | None = None
    max_memories: int | None = None


@dataclass(frozen=True, slots=True)
class ForgetOutcome:
    found: ForgetSet
    dry_run: bool
    receipt: LedgerEntry | None = None
    reason_salt: str | None = None


def preview_token(memory_ids: Iterable[str], event_ids: Iterable[str]) -> str:
    """A digest of exactly the set: sha256 of the JCS of its sorted memory and event ids."""
    document = {"eventIds": sorted(set(event_ids)), "memoryIds": sorted(set(memory_ids))}
    return hashlib.sha256(canonicalize(document)).hexdigest()


def older_versions(memory: MemoryRecord) -> list[str]:
    """The memories one step older than ``memory``: what it supersedes, and what it replaces."""
    return [*memory.supersedes, *([memory.replaces] if memory.replaces else [])]


def same_event_memories(memory: MemoryRecord) -> list[str]:
    """Memories made from the same text as ``memory``: the structured ones a provisional memory
    was replaced by (its siblings are found through their common provisional memory)."""
    return list(memory.replaced_by)


def forgotten_placeholder(event: EventRecord, now: str) -> MemoryRecord:
    """The tombstoned provisional memory of a forgotten event that has none, so that none is made
    from it later (structuring and remember only ever put a memory item that does not exist)."""
    return MemoryRecord(
        project_id=event.project_id,
        id=provisional_memory_id(event.id),
        status="tombstoned",
        type="episode",
        content=None,
        valid_from=event.occurred_at,
        valid_to=None,
        confidence=0.0,
        stream=event.stream,
        source_events=(SourceEventRef(event.id, event.stream, event.seq, event.hash),),
        created_at=now,
    )
