"""An in-memory deletion ledger with DynamoLedgerStore's contract, for unit tests and the embedded runtime.

One lock makes each append atomic, so there is never a race to lose: seqs run 1, 2, 3...
per project with no gap. Entries are built by the same pure code as the DynamoDB store's
(``kaibo_core.core.ledger.make_entry``), so both hash identically.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace

from kaibo_core.core import chain
from kaibo_core.core.forgetting import ForgetKeyTakenError, KeyedForget
from kaibo_core.core.ledger import (
    EventLocation,
    LedgerEntry,
    PurgeOutcome,
    ReceiptIdTakenError,
    make_entry,
    new_receipt_id,
    records_same_forget,
)
from kaibo_core.core.locating import Searched
from kaibo_core.core.storage_keys import ProjectId


class InMemoryLedgerStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.entries: dict[str, list[LedgerEntry]] = {}
        self._receipts: dict[tuple[str, str], int] = {}
        self.purged: dict[tuple[str, int], str] = {}
        #: (project, seq) -> the events the purge could not locate, and when it finished the entry.
        self.unlocated: dict[tuple[str, int], tuple[tuple[str, ...], str]] = {}
        self.applied: set[tuple[str, int]] = set()
        #: (project, seq) -> where an entry whose search goes on waits on the work list (its dueSk).
        self.due_behind: dict[tuple[str, int], str] = {}
        self.keys: dict[tuple[str, str], KeyedForget] = {}

    def append(
        self,
        project: ProjectId,
        *,
        memory_ids: Sequence[str],
        event_ids: Sequence[str],
        reason_digest: str,
        tombstoned_at: str,
        purge_after: str,
        receipt_id: str | None = None,
        event_locations: Sequence[EventLocation] = (),
        keyed: KeyedForget | None = None,
    ) -> LedgerEntry:
        """Chain a new entry onto the project's head; a known ``receipt_id`` returns its entry;
        ``keyed`` is kept with it, ForgetKeyTakenError if another call holds the key."""
        receipt = receipt_id or new_receipt_id()
        with self._lock:
            entries = self.entries.setdefault(project, [])
            existing = self._receipts.get((project, receipt))
            if existing is not None:
                entry = entries[existing - 1]
                if not records_same_forget(entry, memory_ids, event_ids, reason_digest):
                    raise ReceiptIdTakenError(f"receipt {receipt} already records another forget")
                return entry
            if keyed is not None and not self._key_free(project, keyed):
                raise ForgetKeyTakenError(keyed.key)
            entry = make_entry(
                project_id=project,
                seq=len(entries) + 1,
                receipt_id=receipt,
                memory_ids=memory_ids,
                event_ids=event_ids,
                reason_digest=reason_digest,
                tombstoned_at=tombstoned_at,
                purge_after=purge_after,
                prev_hash=entries[-1].hash if entries else chain.GENESIS_PREV_HASH,
                event_locations=event_locations,
                forget_key=keyed.key if keyed is not None else None,
            )
            entries.append(entry)
            self._receipts[(project, receipt)] = entry.seq
            if keyed is not None:
                self.keys[(project, keyed.key)] = keyed
            return entry

    def _key_free(self, project: ProjectId, keyed: KeyedForget) -> bool:
        held = self.keys.get((project, keyed.key))
        return held is None or held.expired(keyed.written_at)

    def claim_forget_key(self, project: ProjectId, keyed: KeyedForget) -> KeyedForget:
        with self._lock:
            if self._key_free(project, keyed):
                self.keys[(project, keyed.key)] = keyed
            return self.keys[(project, keyed.key)]

    def forget_key(self, project: ProjectId, idempotency_key: str, now: int) -> KeyedForget | None:
        with self._lock:
            held = self.keys.get((project, idempotency_key))
            return None if held is None or held.expired(now) else held

    def is_applied(self, entry: LedgerEntry) -> bool:
        with self._lock:
            return (entry.project_id, entry.seq) in self.applied

    def read(self, project: ProjectId, from_seq: int, limit: int) -> tuple[list[LedgerEntry], int | None]:
        if limit < 1:
            raise ValueError("limit must be 1 or more")
        start = max(from_seq, 1)
        with self._lock:
            entries = self.entries.get(project, [])
            page = entries[start - 1 : start - 1 + limit]
            more = bool(page) and page[-1].seq < len(entries)
            return page, (page[-1].seq + 1 if more else None)

    def receipt(self, project: ProjectId, receipt_id: str) -> LedgerEntry | None:
        with self._lock:
            seq = self._receipts.get((project, receipt_id))
            return None if seq is None else self.entries[project][seq - 1]

    def head(self, project: ProjectId) -> tuple[int, str]:
        with self._lock:
            entries = self.entries.get(project, [])
            return (entries[-1].seq, entries[-1].hash) if entries else (0, chain.GENESIS_PREV_HASH)

    # -- the purge's bookkeeping ------------------------------------------------------------------

    def due(self, before: str, limit: int) -> list[LedgerEntry]:
        with self._lock:
            waiting = [
                entry
                for entries in self.entries.values()
                for entry in entries
                if entry.purge_after < before
                and (entry.project_id, entry.seq) not in self.purged
                and (entry.project_id, entry.seq) not in self.unlocated
            ]
        return sorted(
            waiting,
            key=lambda e: (self.due_behind.get((e.project_id, e.seq), e.purge_after), e.project_id, e.seq),
        )[:limit]

    def mark_purged(self, entry: LedgerEntry, purged_at: str) -> None:
        with self._lock:
            self.purged.setdefault((entry.project_id, entry.seq), purged_at)

    def release_forget_key(self, entry: LedgerEntry) -> None:
        if entry.forget_key is None:
            return
        place = (entry.project_id, entry.forget_key)
        with self._lock:
            held = self.keys.get(place)
            if held is not None and held.attempt_id == entry.id:  # not a later claim of the key
                del self.keys[place]

    def mark_unlocated(self, entry: LedgerEntry, event_ids: Sequence[str], at: str) -> None:
        with self._lock:
            self.unlocated.setdefault((entry.project_id, entry.seq), (tuple(sorted(event_ids)), at))

    def record_search(self, entry: LedgerEntry, searched: Searched, at: str) -> None:
        with self._lock:
            if not searched.state.finished:  # behind the entries due before ``at`` (as dueSk)
                self.due_behind[(entry.project_id, entry.seq)] = at
            entries = self.entries[entry.project_id]
            kept = entries[entry.seq - 1]
            entries[entry.seq - 1] = replace(
                kept, event_locations=kept.event_locations + searched.found, locate=searched.state
            )

    def purge_outcome(self, entry: LedgerEntry) -> PurgeOutcome | None:
        place = (entry.project_id, entry.seq)
        with self._lock:
            if place in self.purged:
                return PurgeOutcome(self.purged[place])
            if place in self.unlocated:
                event_ids, at = self.unlocated[place]
                return PurgeOutcome(at, event_ids)
            return None

    def unapplied(self, before: str, limit: int) -> list[LedgerEntry]:
        with self._lock:
            waiting = [
                entry
                for entries in self.entries.values()
                for entry in entries
                if entry.tombstoned_at < before and (entry.project_id, entry.seq) not in self.applied
            ]
        return sorted(waiting, key=lambda e: (e.tombstoned_at, e.project_id, e.seq))[:limit]

    def mark_applied(self, entry: LedgerEntry) -> None:
        with self._lock:
            self.applied.add((entry.project_id, entry.seq))
