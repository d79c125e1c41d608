"""The purge (functions/purge, on a schedule): erase every copy of forgotten text past its grace
window (docs/forget.md).

First it finishes the forgets that died after writing their ledger entry (an entry its forget
never marked applied, ``APPLY_AFTER`` after it was written): their memories are tombstoned and
leave the index, so they stop being served within one purge interval, not after the grace window.

Its main work list is the ledger: each entry not purged yet, once its ``purgeAfter`` has passed.
For an entry, in this order, each step idempotent:

1. every memory it names is tombstoned (normally done by forget already; a forget that died after
   writing its entry is finished here, the placeholders of its events without a memory included),
   and so is every memory structuring made from its events (staged and abandoned when it found
   them forgotten, or committed while the forget ran);
2. each of those memories is erased: out of the term index, the document-frequency counters its
   terms leave at zero deleted, content, plan, subject and tags removed, status ``purged``; so
   are the postings of any of them whose index never finished (no memory item: found by its
   index marker);
3. each event it names loses its payload and salt, cited by a memory or not (found by the
   locations the entry keeps); header, digest and hash stay: the chain still verifies;
4. the record of the idempotency key its forget was sent under, if any, is deleted: it holds the
   reason's salt beside a digest of the request, which would confirm a guessed reason, query or
   subject (the key is free again from then on);
5. the entry is marked purged (off the work list; receipts then read ``purged``), only if every
   event it names was found in step 3.

An entry written before entries kept their events' locations may name an event that no memory
cites: nothing records where it is (events are keyed by stream and seq; no item maps an event id to
them), so its payload cannot be erased. Such an entry is finished all the same, once, instead of
failing every run: a tombstoned placeholder without a source (``unlocated_placeholder``) keeps
anything from being made from the event later (a job still pending makes nothing), every other step
is done, and the entry leaves the work list marked ``unlocated`` with those event ids. Its receipt
then reads ``purged`` and names them (``unlocatedEventIds``): the purge is finished, and says which
payloads it could not erase. The run reports it, for the operator.

A run that dies after any step is finished by the next, which repeats the steps already done at
no harm. Nothing that is not named by a due entry (or made from its events) is touched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Final, Protocol

from kaibo_core.core.clock import Clock, format_instant
from kaibo_core.core.forgetting import forgotten_placeholder, unlocated_placeholder
from kaibo_core.core.ledger import LedgerEntry
from kaibo_core.core.models.events import EventRecord
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
    def erase_unfinished(self, project: ProjectId, memory_ids: Sequence[str]) -> None: ...
    def tombstone_many(
        self, project: ProjectId, memories: Sequence[MemoryRecord], marks: dict[str, str]
    ) -> list[MemoryRecord | None]: ...
    def remove_many_from_index(self, memories: Sequence[MemoryRecord]) -> None: ...
    def erase_payload(self, project: ProjectId, stream: str, seq: int) -> None: ...
    def get_events(self, project: ProjectId, locations: Sequence[tuple[str, int]]) -> list[EventRecord]: ...


@dataclass(frozen=True, slots=True)
class PurgeResult:
    applied: int  # forgets finished this run (they had died after writing their entry)
    entries: int  # ledger entries purged this run
    memories: int  # memories erased
    events: int  # event payloads erased
    complete: bool  # False if the run stopped for lack of time (the next run goes on)
    #: Entries finished this run with events whose place is unknown (none cites them, and the entry
    #: predates event locations): (project, receipt id, how many events), for the operator; each
    #: entry is reported by the one run that finishes it.
    unlocated: tuple[tuple[str, str, int], ...] = ()
    #: What stopped an entry this run (it stays on the work list; the others went on).
    failures: tuple[Exception, ...] = ()


class Purger:
    def __init__(self, ledger: PurgeWorkList, store: PurgeStore, clock: Clock) -> None:
        self._ledger = ledger
        self._store = store
        self._clock = clock

    def run(self, *, has_time: Callable[[], bool], limit: int = MAX_ENTRIES_PER_RUN) -> PurgeResult:
        """Finish the forgets that died after their entry, then purge the entries past their grace
        window, oldest first. An entry that fails stays on the work list and the run goes on with
        the next: one entry that keeps failing never holds back every later erasure."""
        moment = self._clock()
        now = format_instant(moment)
        applied = entries = memories = events = 0
        failures: list[Exception] = []
        unlocated: list[tuple[str, str, int]] = []
        unapplied: set[str] = set()

        def result(complete: bool) -> PurgeResult:
            return PurgeResult(
                applied, entries, memories, events, complete, tuple(unlocated), tuple(failures)
            )

        for entry in self._ledger.unapplied(format_instant(moment - APPLY_AFTER), limit):
            if not has_time():
                return result(complete=False)
            try:
                self.apply(entry)
            except Exception as exc:  # kept and reported by the caller; the next entry goes on
                failures.append(exc)
                unapplied.add(entry.id)
                continue
            applied += 1
        for entry in self._ledger.due(now, limit):
            if not has_time():
                return result(complete=False)
            if entry.id in unapplied:
                continue  # its forget is finished first, by a later run
            try:
                erased, payloads, missing = self.purge(entry, now)
            except Exception as exc:  # as above
                failures.append(exc)
                continue
            memories, events = memories + erased, events + payloads
            if missing:
                unlocated.append((entry.project_id, entry.id, len(missing)))
            else:
                entries += 1
        return result(complete=True)

    def apply(self, entry: LedgerEntry) -> None:
        """Finish the tombstones of a forget that died after writing ``entry``."""
        # Every one leaves the index, those the dying forget tombstoned too (it may have died before
        # removing their postings); a memory out of the index already is skipped (exactly once).
        self._store.remove_many_from_index(self._tombstone_all(entry))
        self._ledger.mark_applied(entry)

    def purge(self, entry: LedgerEntry, now: str) -> tuple[int, int, list[str]]:
        """Erase everything ``entry`` names; (memories erased, payloads erased, the events whose
        place is unknown). Marked purged once every event it names has lost its payload; else
        marked unlocated with those events (both take it off the work list)."""
        targets = self._tombstone_all(entry)
        targets += self._block_unlocated(entry, targets)
        self._store.erase_many([memory for memory in targets if memory.status != "purged"], now)
        named, made = _named_and_made(entry)
        self._store.erase_unfinished(ProjectId(entry.project_id), [*named, *made])
        payloads, unlocated = self._erase_payloads(entry, targets)
        self._ledger.release_forget_key(entry)
        if unlocated:
            self._ledger.mark_unlocated(entry, unlocated, now)
        else:
            self._ledger.mark_purged(entry, now)
        return len(targets), payloads, unlocated

    def _tombstone_all(self, entry: LedgerEntry) -> list[MemoryRecord]:
        """Every memory of ``entry`` tombstoned, each as it was before (with its text, for the index
        and the erasure): those it names, those made from its events, and a placeholder for each
        of its events that has no provisional memory (its forget died before writing it)."""
        project = ProjectId(entry.project_id)
        named, made = _named_and_made(entry)
        memories = list(self._store.get_many(project, [*named, *made]).values())
        before = self._store.tombstone_many(project, memories, _marks(entry))
        kept = [was if was is not None else memory for was, memory in zip(before, memories, strict=True)]
        return kept + self._placeholders(entry, {memory.id for memory in memories})

    def _placeholders(self, entry: LedgerEntry, existing: set[str]) -> list[MemoryRecord]:
        """The placeholders of ``entry``'s events that have no provisional memory, written (a
        memory made from such an event meanwhile is tombstoned instead, and returned)."""
        project = ProjectId(entry.project_id)
        missing = [
            (stream, seq)
            for event, stream, seq in entry.event_locations
            if provisional_memory_id(event) not in existing
        ]
        placed: list[MemoryRecord] = []
        for event in self._store.get_events(project, missing) if missing else []:
            placeholder = forgotten_placeholder(event, entry.tombstoned_at)
            was = self._store.tombstone(project, placeholder.id, _marks(entry), placeholder=placeholder)
            placed.append(was if was is not None else placeholder)
        return placed

    def _block_unlocated(self, entry: LedgerEntry, memories: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        """For each event of ``entry`` that no memory cites and whose place it does not keep, its
        ``unlocated_placeholder``, written: nothing can be made from the event after the entry
        leaves the work list. A memory made from it since ``memories`` were read is tombstoned
        instead, and returned (it cites the event: its payload is then erased too)."""
        cited = {ref.event_id for memory in memories for ref in memory.source_events}
        cited.update(event for event, _stream, _seq in entry.event_locations)
        project = ProjectId(entry.project_id)
        blocked: list[MemoryRecord] = []
        for event_id in entry.event_ids:
            if event_id in cited:
                continue
            placeholder = unlocated_placeholder(entry.project_id, event_id, entry.tombstoned_at)
            was = self._store.tombstone(project, placeholder.id, _marks(entry), placeholder=placeholder)
            blocked.append(was if was is not None else placeholder)
        return blocked

    def _erase_payloads(self, entry: LedgerEntry, memories: Sequence[MemoryRecord]) -> tuple[int, list[str]]:
        """Erase the payload of every event ``entry`` names, cited or not; (how many, the events
        whose place is unknown: named by an entry written before it kept their locations, and by
        no memory)."""
        project = ProjectId(entry.project_id)
        located = {ref.event_id: (ref.stream, ref.seq) for memory in memories for ref in memory.source_events}
        located.update({event: (stream, seq) for event, stream, seq in entry.event_locations})
        for event_id in entry.event_ids:
            if event_id in located:
                self._store.erase_payload(project, *located[event_id])
        return len(located.keys() & set(entry.event_ids)), [e for e in entry.event_ids if e not in located]


def _marks(entry: LedgerEntry) -> dict[str, str]:
    return {"tombstonedAt": entry.tombstoned_at, "purgeAfter": entry.purge_after, "receiptId": entry.id}


def _named_and_made(entry: LedgerEntry) -> tuple[set[str], list[str]]:
    """The memories ``entry`` names with its events' provisional memories, and the ids of every
    memory structuring can have made from those events (staged and abandoned, or committed while
    the forget ran): all of them hold the forgotten text."""
    provisional = [provisional_memory_id(event_id) for event_id in entry.event_ids]
    made = [structured_memory_id(p, n) for p in provisional for n in range(1, MAX_DRAFTS_PER_EVENT + 1)]
    return set(entry.memory_ids) | set(provisional), made
