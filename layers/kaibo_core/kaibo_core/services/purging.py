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
   locations the entry keeps, or by searching the project's streams, below); header, digest and
   hash stay: the chain still verifies;
4. the record of the idempotency key its forget was sent under, if any, is deleted: it holds the
   reason's salt beside a digest of the request, which would confirm a guessed reason, query or
   subject (the key is free again from then on);
5. the entry is marked purged (off the work list; receipts then read ``purged``), only if every
   event it names was found in step 3.

An entry written before entries kept their events' locations may name an event that no memory
cites: nothing it keeps says where it is (events are keyed by stream and seq; no item maps an event
id to them). The purge then searches the project's streams for it (core/locating.py: keys and ids
only, never a payload), within a read budget per run shared by every entry and within the run's
time; a search cut short keeps its cursor beside the entry, and the next run goes on from there
(the entry's other steps are done meanwhile, and it stays on the work list, behind the entries due
before that run: ``record_search``). Each event found is
recorded in the entry's locations (a placeholder citing it is written if it has no memory) and
erased like any other. An event that no stream of the project holds has no payload stored
anywhere: a tombstoned placeholder without a source (``unlocated_placeholder``) keeps anything from
being made from it later (a job still pending makes nothing), every other step is done, and the
entry leaves the work list marked ``unlocated`` with those event ids. Its receipt then reads
``purged`` and names them (``unlocatedEventIds``). The run reports it, for the operator. (An entry
an older purge marked unlocated without searching is off the work list: tools/requeue_unlocated.py
puts it back once, and it is searched like any other.)

A run that dies after any step is finished by the next, which repeats the steps already done at
no harm. Nothing that is not named by a due entry (or made from its events) is touched.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Final, Protocol

from kaibo_core.core.clock import Clock, format_instant
from kaibo_core.core.forgetting import forgotten_placeholder, unlocated_placeholder
from kaibo_core.core.ledger import EventLocation, LedgerEntry
from kaibo_core.core.locating import (
    LOCATE_READS_PER_RUN,
    LOCATE_STREAMS_PER_PAGE,
    EventsFound,
    LocateCursor,
    LocateState,
    Searched,
    StreamNames,
)
from kaibo_core.core.models.events import EventRecord
from kaibo_core.core.models.memories import MemoryRecord, SourceEventRef
from kaibo_core.core.provisional import provisional_memory_id
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.structuring.drafts import MAX_DRAFTS_PER_EVENT
from kaibo_core.core.structuring.plan import structured_memory_id
from kaibo_core.ports import PurgeWorkList

#: Ledger entries taken per run at most (the next run takes the rest).
MAX_ENTRIES_PER_RUN: Final = 200
#: A forget still unapplied this long after its entry was written has died (it runs at most 28 s).
APPLY_AFTER: Final = timedelta(seconds=60)


class StreamReader(Protocol):
    """The project's streams, read for the events an entry does not locate (keys and ids only)."""

    def stream_names(self, project: ProjectId, after: str | None, limit: int) -> StreamNames: ...
    def find_events(
        self, project: ProjectId, stream: str, event_ids: Collection[str], from_seq: int, limit: int
    ) -> EventsFound: ...


class PurgeStore(StreamReader, Protocol):
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
    def cite_source(self, project: ProjectId, memory_id: str, ref: SourceEventRef) -> None: ...
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
    #: Each entry whose events this run searched the project's streams for: (project, receipt id,
    #: what the search did), for the operator.
    searches: tuple[tuple[str, str, Searched], ...] = ()

    @property
    def locate_reads(self) -> int:
        """Items the run read searching streams (stream heads and events)."""
        return sum(searched.reads for _, _, searched in self.searches)


@dataclass(frozen=True, slots=True)
class EntryPurge:
    """What purging one entry did: memories and payloads erased, the events stored nowhere (the
    entry marked unlocated with them), its search (None: none needed), and whether it is
    ``finished`` (off the work list) or waits for the next run's search."""

    memories: int
    payloads: int
    unlocated: tuple[str, ...]
    searched: Searched | None
    finished: bool


class StreamSearch:
    """One run's search of projects' streams for events whose place their entry does not keep:
    every entry's search spends the run's one read budget, and none reads past the run's time."""

    def __init__(self, streams: StreamReader, budget: int, has_time: Callable[[], bool]) -> None:
        self._streams = streams
        self._budget = budget
        self._has_time = has_time

    def events(self, entry: LedgerEntry, sought: Sequence[str]) -> Searched:
        """Search ``entry``'s project for ``sought`` from where the last run stopped, until every
        one is found, every stream is read, or the budget or the time runs out."""
        if entry.locate.finished:
            return Searched(tuple(sought), state=entry.locate)
        project = ProjectId(entry.project_id)
        remaining = set(sought)
        found: list[EventLocation] = []
        reads = 0
        cursor = entry.locate.cursor
        reading = (cursor.stream, cursor.seq) if cursor is not None and cursor.seq is not None else None
        listed_after = cursor.stream if cursor is not None else None
        ahead: list[str] = []  # streams listed, not read yet
        more_streams = True

        def searched(state: LocateState) -> Searched:
            return Searched(tuple(sought), tuple(found), reads, state)

        while remaining:
            if reading is None and not ahead and not more_streams:
                break  # every stream read
            if self._budget <= 0 or not self._has_time():
                if reading is not None:
                    return searched(LocateState(LocateCursor(*reading)))
                if ahead:
                    return searched(LocateState(LocateCursor(ahead[0], 1)))
                if listed_after is None:
                    return searched(LocateState())
                return searched(LocateState(LocateCursor(listed_after)))
            if reading is None and ahead:
                reading = (ahead.pop(0), 1)
            if reading is None:
                names = self._streams.stream_names(
                    project, listed_after, min(LOCATE_STREAMS_PER_PAGE, self._budget)
                )
                reads += names.reads
                self._budget -= names.reads
                ahead, more_streams = list(names.names), names.more and bool(names.names)
                listed_after = names.names[-1] if names.names else listed_after
                continue
            stream, seq = reading
            page = self._streams.find_events(project, stream, remaining, seq, self._budget)
            reads += page.reads
            self._budget -= page.reads
            for event_id, at in sorted(page.found.items()):
                found.append((event_id, stream, at))
                remaining.discard(event_id)
            reading = (stream, page.next_seq) if page.next_seq is not None else None
        return searched(LocateState(finished=True))


class Purger:
    def __init__(
        self,
        ledger: PurgeWorkList,
        store: PurgeStore,
        clock: Clock,
        *,
        locate_reads_per_run: int = LOCATE_READS_PER_RUN,
    ) -> None:
        self._ledger = ledger
        self._store = store
        self._clock = clock
        self._locate_reads_per_run = locate_reads_per_run

    def run(self, *, has_time: Callable[[], bool], limit: int = MAX_ENTRIES_PER_RUN) -> PurgeResult:
        """Finish the forgets that died after their entry, then purge the entries past their grace
        window, oldest first. An entry that fails stays on the work list and the run goes on with
        the next: one entry that keeps failing never holds back every later erasure."""
        moment = self._clock()
        now = format_instant(moment)
        applied = entries = memories = events = 0
        failures: list[Exception] = []
        unlocated: list[tuple[str, str, int]] = []
        searches: list[tuple[str, str, Searched]] = []
        unapplied: set[str] = set()
        search = StreamSearch(self._store, self._locate_reads_per_run, has_time)

        def result(complete: bool) -> PurgeResult:
            return PurgeResult(
                applied,
                entries,
                memories,
                events,
                complete,
                tuple(unlocated),
                tuple(failures),
                tuple(searches),
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
                done = self.purge(entry, now, search)
            except Exception as exc:  # as above
                failures.append(exc)
                continue
            memories, events = memories + done.memories, events + done.payloads
            if done.searched is not None:
                searches.append((entry.project_id, entry.id, done.searched))
            if not done.finished:
                continue  # its search goes on next run
            if done.unlocated:
                unlocated.append((entry.project_id, entry.id, len(done.unlocated)))
            else:
                entries += 1
        return result(complete=True)

    def apply(self, entry: LedgerEntry) -> None:
        """Finish the tombstones of a forget that died after writing ``entry``."""
        # Every one leaves the index, those the dying forget tombstoned too (it may have died before
        # removing their postings); a memory out of the index already is skipped (exactly once).
        self._store.remove_many_from_index(self._tombstone_all(entry))
        self._ledger.mark_applied(entry)

    def purge(self, entry: LedgerEntry, now: str, search: StreamSearch | None = None) -> EntryPurge:
        """Erase everything ``entry`` names. The events it neither keeps the place of nor has a
        memory citing are searched for first (``search``: this run's; default: a whole budget) and
        recorded where found. Marked purged once every event it names has lost its payload; marked
        unlocated with the events stored in no stream (both take it off the work list); left on
        the work list while its search goes on (everything else erased meanwhile)."""
        search = search or StreamSearch(self._store, self._locate_reads_per_run, lambda: True)
        targets = self._tombstone_all(entry)
        sought = _sought(entry, targets)
        searched = search.events(entry, sought) if sought else None
        if searched is not None:
            self._ledger.record_search(entry, searched, now)
            entry = replace(
                entry, event_locations=entry.event_locations + searched.found, locate=searched.state
            )
            sourceless = {memory.id for memory in targets if not memory.source_events}
            targets += self._placeholders(entry, {memory.id for memory in targets} - sourceless, sourceless)
        finished = searched is None or searched.finished
        if finished:
            targets += self._block_unlocated(entry, targets)
        self._store.erase_many([memory for memory in targets if memory.status != "purged"], now)
        named, made = _named_and_made(entry)
        self._store.erase_unfinished(ProjectId(entry.project_id), [*named, *made])
        payloads, unlocated = self._erase_payloads(entry, targets)
        if finished:
            self._ledger.release_forget_key(entry)
            if unlocated:
                self._ledger.mark_unlocated(entry, unlocated, now)
            else:
                self._ledger.mark_purged(entry, now)
        return EntryPurge(len(targets), payloads, tuple(unlocated) if finished else (), searched, finished)

    def _tombstone_all(self, entry: LedgerEntry) -> list[MemoryRecord]:
        """Every memory of ``entry`` tombstoned, each as it was before (with its text, for the index
        and the erasure): those it names, those made from its events, and a placeholder for each
        of its events that has no provisional memory (its forget died before writing it)."""
        project = ProjectId(entry.project_id)
        named, made = _named_and_made(entry)
        memories = list(self._store.get_many(project, [*named, *made]).values())
        before = self._store.tombstone_many(project, memories, _marks(entry))
        kept = [was if was is not None else memory for was, memory in zip(before, memories, strict=True)]
        sourceless = {memory.id for memory in memories if not memory.source_events}
        return kept + self._placeholders(entry, {memory.id for memory in memories} - sourceless, sourceless)

    def _placeholders(
        self, entry: LedgerEntry, existing: set[str], sourceless: Collection[str] = ()
    ) -> list[MemoryRecord]:
        """The placeholders of ``entry``'s events that have no provisional memory, written (a
        memory made from such an event meanwhile is tombstoned instead, and returned). A
        placeholder in ``sourceless`` (written by a purge before it searched streams: it cites no
        event) is given the event it stands for instead, now that its place is known."""
        project = ProjectId(entry.project_id)
        missing = [
            (stream, seq)
            for event, stream, seq in entry.event_locations
            if provisional_memory_id(event) not in existing
        ]
        placed: list[MemoryRecord] = []
        for event in self._store.get_events(project, missing) if missing else []:
            if provisional_memory_id(event.id) in sourceless:
                ref = SourceEventRef(event.id, event.stream, event.seq, event.hash)
                self._store.cite_source(project, provisional_memory_id(event.id), ref)
                continue
            placeholder = forgotten_placeholder(event, entry.tombstoned_at)
            was = self._store.tombstone(project, placeholder.id, _marks(entry), placeholder=placeholder)
            placed.append(was if was is not None else placeholder)
        return placed

    def _block_unlocated(self, entry: LedgerEntry, memories: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        """For each event of ``entry`` that no memory cites and whose place it does not keep (once
        searched for: no stream holds it), its ``unlocated_placeholder``, written: nothing can be
        made from the event after the entry leaves the work list. A memory made from it since
        ``memories`` were read is tombstoned instead, and returned (it cites the event: its payload
        is then erased too)."""
        project = ProjectId(entry.project_id)
        blocked: list[MemoryRecord] = []
        for event_id in _sought(entry, memories):
            placeholder = unlocated_placeholder(entry.project_id, event_id, entry.tombstoned_at)
            was = self._store.tombstone(project, placeholder.id, _marks(entry), placeholder=placeholder)
            blocked.append(was if was is not None else placeholder)
        return blocked

    def _erase_payloads(self, entry: LedgerEntry, memories: Sequence[MemoryRecord]) -> tuple[int, list[str]]:
        """Erase the payload of every event ``entry`` names, cited or not; (how many, the events
        whose place is unknown: named by an entry written before it kept their locations, by no
        memory, and not found by the search, or not yet)."""
        project = ProjectId(entry.project_id)
        located = {ref.event_id: (ref.stream, ref.seq) for memory in memories for ref in memory.source_events}
        located.update({event: (stream, seq) for event, stream, seq in entry.event_locations})
        for event_id in entry.event_ids:
            if event_id in located:
                self._store.erase_payload(project, *located[event_id])
        return len(located.keys() & set(entry.event_ids)), [e for e in entry.event_ids if e not in located]


def _sought(entry: LedgerEntry, memories: Sequence[MemoryRecord]) -> list[str]:
    """The events of ``entry`` that no memory cites and whose place it does not keep."""
    known = {ref.event_id for memory in memories for ref in memory.source_events}
    known.update(event for event, _stream, _seq in entry.event_locations)
    return [event for event in entry.event_ids if event not in known]


def _marks(entry: LedgerEntry) -> dict[str, str]:
    return {"tombstonedAt": entry.tombstoned_at, "purgeAfter": entry.purge_after, "receiptId": entry.id}


def _named_and_made(entry: LedgerEntry) -> tuple[set[str], list[str]]:
    """The memories ``entry`` names with its events' provisional memories, and the ids of every
    memory structuring can have made from those events (staged and abandoned, or committed while
    the forget ran): all of them hold the forgotten text."""
    provisional = [provisional_memory_id(event_id) for event_id in entry.event_ids]
    made = [structured_memory_id(p, n) for p in provisional for n in range(1, MAX_DRAFTS_PER_EVENT + 1)]
    return set(entry.memory_ids) | set(provisional), made
