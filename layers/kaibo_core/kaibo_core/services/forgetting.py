"""forget: resolve the set, write the ledger entry, tombstone at once (docs/forget.md).

1. **Resolve** (reads only): the selector's matches (a memory id; a query, matched by *all* of
   its stems on either side of the index, superseded and canceled memories included; a stream,
   every event's provisional memory; a subject, the memories whose stored subject it is, found
   through the index by its stems), closed under older versions and same source events
   (kaibo_core.core.forgetting). A query or subject is read from its rarest stem on, and refused
   (``forget_selector_too_broad``) if more than ``MAX_FORGET_CANDIDATES`` memories hold even that
   one (``_holding_all``). A dry run stops here and returns the set and its token.
2. **Commit**: the ledger entry (memory ids, event ids, salted reason digest, tombstonedAt,
   purgeAfter; and, unhashed, where each event lives) is appended: from then on the erasure is
   owed, and the purge finishes it whatever happens to this request.
3. **Tombstone**: each memory's status becomes ``tombstoned`` (hidden from recall, explain and
   reads at once; structuring refuses a tombstoned provisional memory), then its postings and
   counts leave the index. An event of the set without a provisional memory gets a tombstoned
   one, so nothing can be structured from it later.

Under an **idempotency key**, the first call's answer is kept with the key (FORGET_KEY_TTL),
claimed in the ledger append's transaction: a key records at most one entry. A retry reads it
first and answers alike (``replayed``), after finishing the tombstones if the first call died
after its entry (what the purge would do a few minutes later); a call that loses the race for the
key to a concurrent one answers that one's answer. The record keeps the reason's salt encrypted
(``SaltCipher``: one KMS Encrypt per keyed forget, before anything is written; one Decrypt per
call that finds the key held); a forget without a key makes no KMS call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Final, Protocol

from kaibo_core.core.clock import format_instant
from kaibo_core.core.errors import BadRequestError, ConflictError, NotFoundError, UnprocessableError
from kaibo_core.core.forgetting import (
    DEFAULT_MAX_MEMORIES,
    FORGOTTEN,
    MAX_FORGET_CANDIDATES,
    MAX_MEMORIES_LIMIT,
    ForgetKeyTakenError,
    ForgetMember,
    ForgetOutcome,
    ForgetRequest,
    ForgetSet,
    KeyedForget,
    MemoryHeader,
    Why,
    answered_members,
    comparable_subject,
    forget_request_digest,
    forgotten_placeholder,
    has_subject,
    holds_terms,
    older_versions,
    same_event_memories,
    subject_lookup_terms,
)
from kaibo_core.core.ledger import LedgerEntry, new_reason_salt, new_receipt_id, reason_digest
from kaibo_core.core.models.events import EventRecord
from kaibo_core.core.models.memories import MemoryRecord, SourceEventRef
from kaibo_core.core.provisional import provisional_memory_id
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.text import query_terms
from kaibo_core.ports import DeletionLedger, EventPages, SaltCipher

#: Events read per page when a whole stream is forgotten.
STREAM_PAGE: Final = 1000
#: Rounds of tombstoning what structuring committed while a forget ran (one is the usual most).
MAX_MEANWHILE_ROUNDS: Final = 4
STREAM_PAGE_BYTES: Final = 4 * 1024 * 1024
#: Candidates of a query or subject read in full at once (one BatchGetItem: at most 100 keys).
LOAD_BATCH: Final = 100


class ForgetStore(Protocol):
    def get(self, project: ProjectId, memory_id: str) -> MemoryRecord | None: ...
    def get_many(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, MemoryRecord]: ...
    def headers(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, MemoryHeader]: ...
    def term_counts(self, project: ProjectId, terms: Sequence[str]) -> dict[str, int]: ...
    def memories_with_term(self, project: ProjectId, term: str, at_most: int) -> set[str] | None: ...
    def tombstone(
        self,
        project: ProjectId,
        memory_id: str,
        marks: dict[str, str],
        placeholder: MemoryRecord | None = None,
    ) -> MemoryRecord | None: ...
    def tombstone_many(
        self, project: ProjectId, memories: Sequence[MemoryRecord], marks: dict[str, str]
    ) -> list[MemoryRecord | None]: ...
    def remove_many_from_index(self, memories: Sequence[MemoryRecord]) -> None: ...


class ForgetService:
    def __init__(
        self,
        memories: ForgetStore,
        events: EventPages,
        ledger: DeletionLedger,
        grace: timedelta,
        clock: Callable[[], datetime],
        *,
        finish: Callable[[LedgerEntry], None],
        salts: SaltCipher,
        max_candidates: int = MAX_FORGET_CANDIDATES,
    ) -> None:
        """``finish``: the purge's own completion of a forget that died after its entry
        (``Purger.apply``), run when a retry under the same key finds its entry unapplied.
        ``salts``: encrypts the reason's salt a keyed forget's record keeps, and decrypts it for
        a retry. ``max_candidates``: the most memories a ``query`` or ``subject`` may resolve through."""
        self._max_candidates = max_candidates
        self._salts = salts
        self._memories = memories
        self._events = events
        self._ledger = ledger
        self._grace = grace
        self._clock = clock
        self._finish = finish

    def forget(self, project: ProjectId, request: ForgetRequest) -> ForgetOutcome:
        key = request.idempotency_key
        if key is not None:
            if request.dry_run:
                raise BadRequestError(
                    "idempotency_key_with_dry_run",
                    "A dry run changes nothing, so there is nothing to replay: send the dry run "
                    "without idempotencyKey, and the key with the real forget.",
                    {"field": "idempotencyKey"},
                )
            kept = self._ledger.forget_key(project, key, self._epoch())
            if kept is not None:
                return self._replay(project, request, kept)
        limit = request.max_memories or DEFAULT_MAX_MEMORIES
        found = self.resolve(project, request, limit)
        if len(found.members) > limit:
            raise UnprocessableError(
                "forget_set_too_large",
                f"This forget would erase more than {limit} memories; narrow it, or pass maxMemories "
                "(up to 1000) after a dryRun.",
                {"maxMemories": limit},
            )
        if request.dry_run:
            return ForgetOutcome(found, dry_run=True)
        if request.preview_token is not None and request.preview_token != found.preview_token:
            raise ConflictError(
                "preview_changed",
                "The set this forget would erase changed since the dry run that gave previewToken; "
                "run the dry run again.",
                {"previewToken": found.preview_token},
            )
        if not found.members and not found.event_ids:
            return self._nothing_found(project, request, found)
        return self._commit(project, request, found)

    # -- 1. resolve -------------------------------------------------------------------------------

    def resolve(self, project: ProjectId, request: ForgetRequest, limit: int) -> ForgetSet:
        placeholders: dict[str, MemoryRecord] = {}
        if request.memory_id is not None:
            matches = self._by_id(project, request.memory_id)
        elif request.query is not None:
            matches = self._by_query(project, request.query, limit)
        elif request.subject is not None:
            matches = self._by_subject(project, request.subject, limit)
        else:
            assert request.stream is not None
            matches, placeholders = self._by_stream(project, request.stream)
        members = self._closure(project, matches, limit)
        event_ids = {event for member in members for event in member.memory.source_event_ids}
        event_ids.update(event for memory in placeholders.values() for event in memory.source_event_ids)
        return ForgetSet(tuple(members), tuple(sorted(event_ids)), tuple(placeholders.values()))

    def _by_id(self, project: ProjectId, memory_id: str) -> list[MemoryRecord]:
        memory = self._memories.get(project, memory_id) if memory_id.startswith("mem_") else None
        if memory is None or memory.status == "staged":
            raise NotFoundError(
                "memory_not_found", f"No memory {memory_id!r} in this project.", {"memoryId": memory_id}
            )
        return [memory]

    def _by_query(self, project: ProjectId, query: str, limit: int) -> list[MemoryRecord]:
        terms = query_terms(query)
        if not terms:
            raise UnprocessableError(
                "invalid_query", "The query has no searchable words.", {"field": "query"}
            )
        return self._holding_all(project, terms, limit, "query")

    def _by_subject(self, project: ProjectId, subject: str, limit: int) -> list[MemoryRecord]:
        """The memories whose stored subject is ``subject`` (``comparable_subject``), found among
        those indexed under its stems: a subject has no index of its own, and its words are
        indexed as part of the memory's text."""
        terms = subject_lookup_terms(subject)
        if not terms:
            raise UnprocessableError(
                "invalid_subject",
                "The subject has no searchable words (only stop words or punctuation); give it as "
                'GET /v1/memories/{id} shows it, for example "release target".',
                {"field": "subject"},
            )
        return self._holding_all(project, sorted(terms), limit, "subject", comparable_subject(subject))

    def _holding_all(
        self,
        project: ProjectId,
        terms: Sequence[str],
        limit: int,
        field: str,
        subject: str | None = None,
    ) -> list[MemoryRecord]:
        """The memories not forgotten yet posted under every one of ``terms`` (on either side of
        the index) and, if given, whose subject is ``subject``; at most ``limit + 1`` (enough to
        refuse a set that is too large).

        Read in the order of cost: every posting of the rarest term (refused if more than
        ``max_candidates`` memories hold it, before any memory is read); their memories without
        text (status, subject); the postings of each other term held by no more memories than
        candidates are left; and last the remaining candidates in full, a batch at a time, each
        checked by its text against the terms too frequent to read. The text of a match is needed anyway:
        a dry run shows it, and a real forget removes the postings it computes from it."""
        counts = self._memories.term_counts(project, terms)
        rarest, *others = sorted(terms, key=lambda term: (counts[term], term))
        posted = None
        if counts[rarest] <= self._max_candidates:
            posted = self._memories.memories_with_term(project, rarest, self._max_candidates)
        if posted is None:
            raise self._too_broad(field)
        if not posted:
            return []
        headers = self._memories.headers(project, posted).values()
        candidates = {
            header.id
            for header in headers
            if header.status not in FORGOTTEN and (subject is None or has_subject(header, subject))
        }
        by_text: list[str] = []
        for term in others:
            # A term's postings are read only if there are no more of them than candidates left
            # (each of which would otherwise be read in full): so every read stays within a
            # multiple of the rarest term's memories, whatever the others' frequencies.
            also = None
            if counts[term] <= len(candidates):
                also = self._memories.memories_with_term(project, term, len(candidates))
            if also is None:
                by_text.append(term)
            else:
                candidates &= also
        return self._load_matches(project, sorted(candidates), limit, by_text, subject)

    def _load_matches(
        self, project: ProjectId, candidates: list[str], limit: int, terms: list[str], subject: str | None
    ) -> list[MemoryRecord]:
        """``candidates`` in full, a batch at a time, kept if still not forgotten, with ``subject``
        and holding ``terms``; stops past ``limit`` matches."""
        matches: list[MemoryRecord] = []
        for start in range(0, len(candidates), LOAD_BATCH):
            batch = self._memories.get_many(project, candidates[start : start + LOAD_BATCH])
            matches += [
                memory
                for memory in (batch[m] for m in candidates[start : start + LOAD_BATCH] if m in batch)
                if memory.status not in FORGOTTEN
                and (subject is None or has_subject(memory, subject))
                and holds_terms(memory, terms)
            ]
            if len(matches) > limit:
                break
        return matches

    def _too_broad(self, field: str) -> UnprocessableError:
        return UnprocessableError(
            "forget_selector_too_broad",
            f"Every word of this {field} is held by more than {self._max_candidates} memories, too "
            f"many to resolve in one forget; add a rarer word to the {field}, or forget by stream "
            "or memoryId.",
            {"field": field, "maxCandidates": self._max_candidates},
        )

    def _by_stream(
        self, project: ProjectId, stream: str
    ) -> tuple[list[MemoryRecord], dict[str, MemoryRecord]]:
        events = self._stream_events(project, stream)
        if not events:
            raise NotFoundError(
                "stream_not_found", f"No stream {stream!r} in this project.", {"stream": stream}
            )
        wanted = {provisional_memory_id(event.id): event for event in events}
        found = self._memories.get_many(project, wanted)
        placeholders = {
            memory_id: forgotten_placeholder(event, self._now())
            for memory_id, event in wanted.items()
            if memory_id not in found
        }
        return sorted(found.values(), key=lambda m: m.id), placeholders

    def _stream_events(self, project: ProjectId, stream: str) -> list[EventRecord]:
        events: list[EventRecord] = []
        next_seq: int | None = 1
        while next_seq is not None:
            page, next_seq = self._events.page_events(
                project, stream, next_seq, STREAM_PAGE, STREAM_PAGE_BYTES
            )
            events.extend(page)
        return events

    def _closure(self, project: ProjectId, matches: list[MemoryRecord], limit: int) -> list[ForgetMember]:
        """The matches and, breadth first, their older versions and same-event memories; at most
        ``limit + 1`` (enough to refuse a set that is too large)."""
        members: dict[str, ForgetMember] = {}
        frontier: list[tuple[MemoryRecord, Why]] = [(memory, "match") for memory in matches]
        while frontier and len(members) <= limit:
            wanted: dict[str, Why] = {}
            for memory, why in frontier:
                if memory.id in members or memory.status in FORGOTTEN:
                    continue
                members[memory.id] = ForgetMember(memory, why)
                for older in older_versions(memory):
                    wanted.setdefault(older, "older_version")
                for same in [*same_event_memories(memory), *_provisional_ids(memory.source_events)]:
                    wanted.setdefault(same, "same_source_event")
            todo = [memory_id for memory_id in wanted if memory_id not in members]
            found = self._memories.get_many(project, todo) if todo else {}
            frontier = [(found[m], wanted[m]) for m in todo if m in found]
        return list(members.values())

    # -- 2. and 3. commit and tombstone -------------------------------------------------------------

    def _commit(self, project: ProjectId, request: ForgetRequest, found: ForgetSet) -> ForgetOutcome:
        now = self._clock()
        salt = new_reason_salt()
        receipt_id = new_receipt_id()
        keyed = self._keyed(project, request, found, salt, receipt_id, receipted=True)
        try:
            receipt = self._ledger.append(
                project,
                memory_ids=[*found.memory_ids, *(m.id for m in found.placeholders)],
                event_ids=list(found.event_ids),
                reason_digest=reason_digest(salt, request.reason),
                tombstoned_at=format_instant(now),
                purge_after=format_instant(now + self._grace),
                receipt_id=receipt_id,
                event_locations=found.event_locations,
                keyed=keyed,
            )
        except ForgetKeyTakenError:
            return self._replay_holder(project, request)
        marks = {
            "tombstonedAt": receipt.tombstoned_at,
            "purgeAfter": receipt.purge_after,
            "receiptId": receipt.id,
        }
        before = self._memories.tombstone_many(project, [m.memory for m in found.members], marks)
        for placeholder in found.placeholders:
            self._memories.tombstone(project, placeholder.id, marks, placeholder=placeholder)
        before += self._made_meanwhile(project, found, before, marks)
        self._memories.remove_many_from_index([memory for memory in before if memory is not None])
        self._ledger.mark_applied(receipt)
        return ForgetOutcome(
            found, dry_run=False, receipt=receipt, reason_salt=salt, replayed=False if keyed else None
        )

    # -- idempotency keys ---------------------------------------------------------------------------

    def _keyed(
        self,
        project: ProjectId,
        request: ForgetRequest,
        found: ForgetSet,
        salt: str,
        attempt_id: str,
        *,
        receipted: bool,
    ) -> KeyedForget | None:
        """The record to keep under the request's key (None without one), its salt encrypted:
        in clear beside the request's digest and the entry's reason digest, it would let whoever
        reads the table confirm a guessed reason, query or subject."""
        if request.idempotency_key is None:
            return None
        return KeyedForget(
            key=request.idempotency_key,
            request_digest=forget_request_digest(salt, request),
            salt_ciphertext=self._salts.encrypt(project, attempt_id, salt),
            attempt_id=attempt_id,
            receipt_id=attempt_id if receipted else None,
            members=answered_members(found),
            event_ids=found.event_ids,
            written_at=self._epoch(),
        )

    def _nothing_found(self, project: ProjectId, request: ForgetRequest, found: ForgetSet) -> ForgetOutcome:
        """An empty set writes no entry; under a key, its answer is kept all the same, so that a
        retry answers it again rather than what the selector may match by then."""
        keyed = self._keyed(project, request, found, new_reason_salt(), new_receipt_id(), receipted=False)
        if keyed is None:
            return ForgetOutcome(found, dry_run=False)
        try:
            held = self._ledger.claim_forget_key(project, keyed)
        except ForgetKeyTakenError:
            return self._replay_holder(project, request)
        if held.attempt_id != keyed.attempt_id:
            return self._replay(project, request, held)
        return ForgetOutcome(found, dry_run=False, replayed=False)

    def _replay_holder(self, project: ProjectId, request: ForgetRequest) -> ForgetOutcome:
        """A concurrent call under the same key committed first: its answer."""
        assert request.idempotency_key is not None
        held = self._ledger.forget_key(project, request.idempotency_key, self._epoch())
        if held is None:
            raise RuntimeError("a forget idempotency key was taken, then found free")
        return self._replay(project, request, held)

    def _replay(self, project: ProjectId, request: ForgetRequest, kept: KeyedForget) -> ForgetOutcome:
        """The answer kept for the key, if this is the same request; its tombstones finished first
        if the call that wrote it died after its entry."""
        salt = self._kept_salt(project, kept)
        if forget_request_digest(salt, request) != kept.request_digest:
            raise ConflictError(
                "idempotency_key_reused",
                f"idempotencyKey {kept.key!r} was used by another forget of this project (another "
                "selector, reason, maxMemories or previewToken); send this forget under a new key.",
                {"idempotencyKey": kept.key, **({"receiptId": kept.receipt_id} if kept.receipt_id else {})},
            )
        receipt = None
        if kept.receipt_id is not None:
            receipt = self._ledger.receipt(project, kept.receipt_id)
            if receipt is None:
                raise RuntimeError(
                    f"forget key {kept.key!r} names receipt {kept.receipt_id}, not in the ledger"
                )
            if not self._ledger.is_applied(receipt):
                self._finish(receipt)
        return ForgetOutcome(
            ForgetSet((), ()),
            dry_run=False,
            receipt=receipt,
            reason_salt=salt if receipt is not None else None,
            replayed=True,
            replay=kept,
        )

    def _kept_salt(self, project: ProjectId, kept: KeyedForget) -> str:
        if kept.salt_ciphertext is not None:
            return self._salts.decrypt(project, kept.attempt_id, kept.salt_ciphertext)
        assert kept.clear_salt is not None  # a record written before salts were encrypted
        return kept.clear_salt

    def _epoch(self) -> int:
        return int(self._clock().timestamp())

    def _made_meanwhile(
        self,
        project: ProjectId,
        found: ForgetSet,
        tombstoned: list[MemoryRecord | None],
        marks: dict[str, str],
    ) -> list[MemoryRecord | None]:
        """Tombstone what structuring made from the set's memories after resolve read them: a
        provisional memory read ``provisional`` and tombstoned ``replaced`` had its structured
        memories committed in between, and they hold its text. Once it is tombstoned no structuring
        can commit for it again (the commit needs it ``provisional``), so one pass over what the
        tombstones found, then over what those pull in (older versions, same-event memories), ends.
        Purged with the entry: the purge erases every memory structured from its events."""
        seen = {member.memory.id for member in found.members}
        added: list[MemoryRecord | None] = []
        frontier = tombstoned
        for _ in range(MAX_MEANWHILE_ROUNDS):
            late = [m for was in frontier if was is not None for m in was.replaced_by if m not in seen]
            if not late:
                break
            made = list(self._memories.get_many(project, late).values())
            members = [m for m in self._closure(project, made, MAX_MEMORIES_LIMIT) if m.memory.id not in seen]
            seen.update(member.memory.id for member in members)
            frontier = self._memories.tombstone_many(project, [member.memory for member in members], marks)
            added += frontier
        return added

    def _now(self) -> str:
        return format_instant(self._clock())


def _provisional_ids(sources: Iterable[SourceEventRef]) -> list[str]:
    return [provisional_memory_id(ref.event_id) for ref in sources]
