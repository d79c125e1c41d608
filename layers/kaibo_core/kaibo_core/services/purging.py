"""The purge (functions/purge, on a schedule): erase every copy of forgotten text past its grace
window (docs/forget.md).

First it finishes the forgets that died after writing their ledger entry (an entry its forget
never marked applied, ``APPLY_AFTER`` after it was written): their memories are tombstoned and
leave the index, so they stop being served within one purge interval, not after the grace window.

Its main work list is the ledger: each entry not purged yet, once its ``purgeAfter`` has passed.
For an entry, in this order, each step idempotent:

1. every memory it names is tombstoned (normally done by forget already; a forget that died after
   writing its entry is finished here), and so is every memory structuring made from its events
   (staged and abandoned when it found them forgotten, or committed while the forget ran);
2. each of those memories is erased: out of the term index, the document-frequency counters its
   terms leave at zero deleted, content, plan, subject and tags removed, status ``purged``;
3. each of its events loses its payload and salt (header, digest and hash stay: the chain still
   verifies);
4. the entry is marked purged (off the work list; receipts then read ``purged``).

A run that dies after any step is finished by the next, which repeats the steps already done at
no harm. Nothing that is not named by a due entry (or made from its events) is touched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Final, Protocol

from kaibo_core.core.clock import Clock, format_instant
from kaibo_core.core.forgetting import FORGOTTEN
from kaibo_core.core.ledger import LedgerEntry
from kaibo_core.core.models.memories import MemoryRecord
from kaibo_core.core.provisional import provisional_memory_id
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.structuring.drafts import MAX_DRAFTS_PER_EVENT
from kaibo_core.core.structuring.plan import structured_memory_id
from kaibo_core.ports import PurgeWorkList

#: Ledger entries taken per run at most (the next run takes the rest).
MAX_ENTRIES_PER_RUN: Final = 200
#: A forget still unapplied this long after its entry was written has died (it runs at most 28 s).
APPLY_AFTER: Final = timedelta(seconds=60)


class PurgeStore(Protocol):
    def get_many(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, MemoryRecord]: ...
    def tombstone(
        self,
        project: ProjectId,
        memory_id: str,
        marks: dict[str, str],
        placeholder: MemoryRecord | None = None,
    ) -> MemoryRecord | None: ...
    def erase_many(self, memories: Sequence[MemoryRecord], purged_at: str) -> None: ...
    def tombstone_many(
        self, project: ProjectId, memories: Sequence[MemoryRecord], marks: dict[str, str]
    ) -> list[MemoryRecord | None]: ...
    def remove_many_from_index(self, memories: Sequence[MemoryRecord]) -> None: ...
    def erase_payload(self, project: ProjectId, stream: str, seq: int) -> None: ...


@dataclass(frozen=True, slots=True)
class PurgeResult:
    applied: int  # forgets finished this run (they had died after writing their entry)
    entries: int  # ledger entries purged this run
    memories: int  # memories erased
    events: int  # event payloads erased
    complete: bool  # False if the run stopped for lack of time (the next run goes on)


class Purger:
    def __init__(self, ledger: PurgeWorkList, store: PurgeStore, clock: Clock) -> None:
        self._ledger = ledger
        self._store = store
        self._clock = clock

    def run(self, *, has_time: Callable[[], bool], limit: int = MAX_ENTRIES_PER_RUN) -> PurgeResult:
        moment = self._clock()
        now = format_instant(moment)
        applied = entries = memories = events = 0
        for entry in self._ledger.unapplied(format_instant(moment - APPLY_AFTER), limit):
            if not has_time():
                return PurgeResult(applied, entries, memories, events, complete=False)
            self.apply(entry)
            applied += 1
        for entry in self._ledger.due(now, limit):
            if not has_time():
                return PurgeResult(applied, entries, memories, events, complete=False)
            erased, payloads = self.purge(entry, now)
            entries, memories, events = entries + 1, memories + erased, events + payloads
        return PurgeResult(applied, entries, memories, events, complete=True)

    def apply(self, entry: LedgerEntry) -> None:
        """Finish the tombstones of a forget that died after writing ``entry``."""
        project = ProjectId(entry.project_id)
        marks = {"tombstonedAt": entry.tombstoned_at, "purgeAfter": entry.purge_after, "receiptId": entry.id}
        named, made = _named_and_made(entry)
        memories = list(self._store.get_many(project, [*named, *made]).values())
        before = self._store.tombstone_many(project, memories, marks)
        # Every one leaves the index, those the dying forget tombstoned too (it may have died before
        # removing their postings); a memory out of the index already is skipped (exactly once).
        self._store.remove_many_from_index(
            [was if was is not None else memory for was, memory in zip(before, memories, strict=True)]
        )
        self._ledger.mark_applied(entry)

    def purge(self, entry: LedgerEntry, now: str) -> tuple[int, int]:
        """Erase everything ``entry`` names; (memories erased, payloads erased)."""
        project = ProjectId(entry.project_id)
        marks = {"tombstonedAt": entry.tombstoned_at, "purgeAfter": entry.purge_after, "receiptId": entry.id}
        named, made = _named_and_made(entry)
        found = self._store.get_many(project, [*named, *made])
        targets = list(found.values())
        for memory in targets:
            if memory.status not in FORGOTTEN:  # a forget that died after its ledger entry
                self._store.tombstone(project, memory.id, marks)
        self._store.erase_many([memory for memory in targets if memory.status != "purged"], now)
        cited = {ref.event_id: (ref.stream, ref.seq) for m in found.values() for ref in m.source_events}
        payloads = 0
        for event_id in entry.event_ids:
            if event_id in cited:
                self._store.erase_payload(project, *cited[event_id])
                payloads += 1
        self._ledger.mark_purged(entry, now)
        return len(targets), payloads


def _named_and_made(entry: LedgerEntry) -> tuple[set[str], list[str]]:
    """The memories ``entry`` names with its events' provisional memories, and the ids of every
    memory structuring can have made from those events (staged and abandoned, or committed while
    the forget ran): all of them hold the forgotten text."""
    provisional = [provisional_memory_id(event_id) for event_id in entry.event_ids]
    made = [structured_memory_id(p, n) for p in provisional for n in range(1, MAX_DRAFTS_PER_EVENT + 1)]
    return set(entry.memory_ids) | set(provisional), made
