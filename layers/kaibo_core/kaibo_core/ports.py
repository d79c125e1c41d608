"""Every port the services need, in one place: what a store, a queue or a structurer must offer.

Services depend on these Protocols only; ``kaibo_core.adapters`` implements them for
DynamoDB, SQS and Bedrock, and in memory (the fakes the unit tests and the embedded
benchmarks use). The import contracts (``.importlinter``) keep it so: services never
import an adapter, and a fake never imports a real adapter. Protocols are structural:
an adapter satisfies one by having its methods, without importing this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from kaibo_core.core.api_keys import IssuedKey
    from kaibo_core.core.forgetting import KeyedForget
    from kaibo_core.core.ledger import EventLocation, LedgerEntry, PurgeOutcome
    from kaibo_core.core.locating import Searched
    from kaibo_core.core.models.events import EventRecord, StreamHead
    from kaibo_core.core.models.jobs import JobRecord, PendingJob
    from kaibo_core.core.models.keys import PlanUsageKey, StoredKey, UsageKeyGap
    from kaibo_core.core.models.memories import (
        CorpusStats,
        MemoryRecord,
        PostingRef,
        SemanticPlacement,
        TermRead,
    )
    from kaibo_core.core.storage_keys import ProjectId
    from kaibo_core.core.structuring.drafts import CandidateSearch, EventToStructure, MemoryDraft
    from kaibo_core.core.structuring.plan import CommitOutcome, StructuringCommit
    from kaibo_core.core.webhooks import Notification

# --- Events: the hash-chained log -------------------------------------------------------------------


class EventLog(Protocol):
    """What remember needs from storage (DynamoEventStore implements it).

    ``append`` raises AppendConflictError when the transaction loses a race.
    """

    def read_head(self, project: ProjectId, stream: str) -> StreamHead: ...

    def append(
        self,
        project: ProjectId,
        stream: str,
        expected: StreamHead,
        records: Sequence[EventRecord],
        received_at: str,
        *,
        job: JobRecord | None = None,
    ) -> None: ...

    def get_events(self, project: ProjectId, locations: Sequence[tuple[str, int]]) -> list[EventRecord]: ...


class EventSource(Protocol):
    def get_events(self, project: ProjectId, locations: Sequence[tuple[str, int]]) -> list[EventRecord]: ...


class EventLocator(Protocol):
    """Recall's context: the ids of the events at (stream, seq) locations (missing ones left out)."""

    def event_ids(
        self, project: ProjectId, locations: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], str]: ...


class EventPages(Protocol):
    def page_events(
        self, project: ProjectId, stream: str, from_seq: int, limit: int, max_bytes: int
    ) -> tuple[list[EventRecord], int | None]: ...

    def list_heads(
        self, project: ProjectId, after_stream: str | None, limit: int
    ) -> tuple[list[tuple[str, StreamHead]], str | None]: ...


# --- The deletion ledger ---------------------------------------------------------------------------


class DeletionLedger(Protocol):
    """The per-project, hash-chained ledger of forgets (DynamoLedgerStore, InMemoryLedgerStore).

    ``append`` assigns the next seq and chains the entry onto the head, retrying lost races
    itself (``429 ledger_busy`` once it gives up); ``receipt_id`` (default: a new one) makes a
    retried append idempotent. ``read`` pages entries in seq order with the next ``from_seq``.
    A keyed forget's record (``keyed``) is claimed in the append's transaction, or alone by
    ``claim_forget_key`` when the forget wrote no entry; ``forget_key`` reads it back.
    ``purge_outcome`` is how the purge finished an entry (None: not yet), for its receipt.
    """

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
    ) -> LedgerEntry: ...

    def claim_forget_key(self, project: ProjectId, keyed: KeyedForget) -> KeyedForget: ...

    def forget_key(self, project: ProjectId, idempotency_key: str, now: int) -> KeyedForget | None: ...

    def is_applied(self, entry: LedgerEntry) -> bool: ...

    def read(self, project: ProjectId, from_seq: int, limit: int) -> tuple[list[LedgerEntry], int | None]: ...

    def receipt(self, project: ProjectId, receipt_id: str) -> LedgerEntry | None: ...

    def head(self, project: ProjectId) -> tuple[int, str]: ...

    def purge_outcome(self, entry: LedgerEntry) -> PurgeOutcome | None: ...

    def mark_applied(self, entry: LedgerEntry) -> None: ...


class PurgeWorkList(Protocol):
    """The ledger entries whose purge is owed (across projects), and their completion; and
    those whose forget never said its tombstones were all in place. ``release_forget_key``
    deletes the record of the idempotency key an entry's forget was sent under, if still its.
    ``record_search`` keeps beside an entry what the purge's search for its events found and how
    far it went (core/locating.py); while the search goes on, it moves the entry behind the
    entries due before then, so that ``due`` does not offer it ahead of them every run."""

    def due(self, before: str, limit: int) -> list[LedgerEntry]: ...

    def mark_purged(self, entry: LedgerEntry, purged_at: str) -> None: ...

    def release_forget_key(self, entry: LedgerEntry) -> None: ...

    def mark_unlocated(self, entry: LedgerEntry, event_ids: Sequence[str], at: str) -> None: ...

    def record_search(self, entry: LedgerEntry, searched: Searched, at: str) -> None: ...

    def unapplied(self, before: str, limit: int) -> list[LedgerEntry]: ...

    def mark_applied(self, entry: LedgerEntry) -> None: ...


class SaltCipher(Protocol):
    """Encrypts a keyed forget's reason salt for its record, and decrypts it for a replay
    (KmsSaltCipher: the deployment's KMS key, the context ``salt_encryption_context``)."""

    def encrypt(self, project: ProjectId, attempt_id: str, salt: str) -> str: ...

    def decrypt(self, project: ProjectId, attempt_id: str, ciphertext: str) -> str: ...


# --- Memories and the term index --------------------------------------------------------------------


class ProvisionalIndex(Protocol):
    """Where provisional memories go (DynamoMemoryStore implements it)."""

    def index_many(self, memories: Sequence[MemoryRecord]) -> list[bool | Exception]: ...

    def statuses(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, str]: ...


class MemoryGetter(Protocol):
    def get(self, project: ProjectId, memory_id: str) -> MemoryRecord | None: ...
    def get_many(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, MemoryRecord]: ...


class MemoryReader(Protocol):
    def get_many(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, MemoryRecord]: ...


class PlacementStore(Protocol):
    """Re-indexing by meaning: every memory item, and a placement replaced with its postings."""

    def memories(self, project: ProjectId | None) -> Iterator[MemoryRecord]: ...

    def get(self, project: ProjectId, memory_id: str) -> MemoryRecord | None: ...

    def replace_placement(self, memory: MemoryRecord, placement: SemanticPlacement) -> bool: ...


class IndexRepairStore(Protocol):
    """Repairing the term index: memory items and postings page by page, and the writes that mend."""

    def memory_page(
        self, project: ProjectId | None, start: str | None, limit: int
    ) -> tuple[list[MemoryRecord], str | None]: ...

    def posting_page(
        self, project: ProjectId | None, start: str | None, limit: int
    ) -> tuple[list[PostingRef], str | None]: ...

    def chunk_heads(self, memory: MemoryRecord) -> dict[str, list[str | None]]: ...

    def existing(self, refs: Sequence[PostingRef]) -> set[PostingRef]: ...

    def markers(self, project: ProjectId, memory_ids: Iterable[str]) -> set[str]: ...

    def get_many(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, MemoryRecord]: ...

    def move_postings(self, memory: MemoryRecord, from_side: str, to_side: str) -> None: ...

    def restate_postings(self, memory: MemoryRecord, side: str) -> None: ...

    def remove_from_index(self, memory: MemoryRecord) -> None: ...

    def erase_postings(self, refs: Sequence[PostingRef]) -> None: ...


class Embedder(Protocol):
    """A text model: unit-length vectors, one row per text (recall by meaning)."""

    version: str

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]: ...


class TermIndex(Protocol):
    def read(
        self,
        project: ProjectId,
        terms: Sequence[str],
        limit: int,
        history: bool,
        *,
        cells: Sequence[str] = (),
        cell_limit: int = 0,
    ) -> tuple[Sequence[TermRead], CorpusStats]: ...


class StructuringStore(Protocol):
    def get(self, project: ProjectId, memory_id: str) -> MemoryRecord | None: ...
    def get_many(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, MemoryRecord]: ...
    def index_new(self, memory: MemoryRecord) -> bool: ...
    def claim_plan(self, project: ProjectId, provisional_id: str, plan: str) -> tuple[str, str | None]: ...
    def stage(self, memory: MemoryRecord) -> bool: ...
    def commit(
        self,
        project: ProjectId,
        change: StructuringCommit,
        notifications: Sequence[Notification] = (),
        now: str = "",
    ) -> CommitOutcome: ...
    def abandon_staged(self, project: ProjectId, memory_ids: list[str]) -> None: ...
    def unindex(self, memory: MemoryRecord) -> None: ...
    def move_to_history(self, memory: MemoryRecord) -> None: ...
    def move_postings(self, memory: MemoryRecord, from_side: str, to_side: str) -> None: ...
    def restate_postings(self, memory: MemoryRecord, side: str) -> None: ...
    def posted_records(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, str | None]: ...


# --- Jobs and the structuring queue -----------------------------------------------------------------


class JobReader(Protocol):
    def get(self, project: ProjectId, job_id: str) -> JobRecord | None: ...


class JobStore(Protocol):
    def start(self, project: ProjectId, job_id: str, now: str) -> JobRecord | None: ...
    def finish(self, project: ProjectId, job_id: str, memory_ids: list[str], now: str) -> None: ...
    def fail(self, project: ProjectId, job_id: str, error: str, now: str) -> None: ...


class PendingJobs(Protocol):
    def pending_before(self, cutoff: datetime, limit: int) -> Iterator[PendingJob]: ...

    def postpone(self, job: PendingJob, since: datetime) -> bool:
        """Move ``job`` to ``since`` if it is still unfinished and still where it was read."""
        ...


class JobQueue(Protocol):
    """Where structuring jobs are announced (SqsJobQueue implements it)."""

    def send(self, project: ProjectId, job_id: str) -> None: ...


class JobRequeue(Protocol):
    def send_many(self, jobs: list[tuple[ProjectId, str]]) -> int: ...


# --- Structuring ------------------------------------------------------------------------------------


class Structurer(Protocol):
    """Turns one event into memory drafts. Deterministic implementations are preferred:
    the service stores the first plan it makes for an event and reuses it on redelivery."""

    @property
    def name(self) -> str: ...

    def structure(self, event: EventToStructure, search: CandidateSearch) -> list[MemoryDraft]: ...


@runtime_checkable
class FallingBackStructurer(Structurer, Protocol):
    """A structurer that answers with another one when it cannot answer itself (a model that
    failed, answered by the rules): ``fallbacks`` counts those events so far."""

    @property
    def fallbacks(self) -> int: ...


# --- Projects and keys ------------------------------------------------------------------------------


class ProjectStore(Protocol):
    def create_project(  # noqa: PLR0917 - a project's fields
        self,
        project: ProjectId,
        name: str,
        key: IssuedKey,
        scopes: Sequence[str],
        now: str,
        time_zone: str | None = None,
        usage_key: str | None = None,
    ) -> None: ...

    def add_key(self, project: ProjectId, key: IssuedKey, scopes: Sequence[str], now: str) -> None: ...

    def revoke_key(self, key_id: str, now: str) -> None: ...


class UsageKeyBackfill(Protocol):
    """Projects created before per-project throttles, given their usage key afterwards."""

    def without_usage_keys(self) -> Iterator[UsageKeyGap]:
        """Every project some of whose keys lack its usage key (or that has none itself)."""
        ...

    def give_usage_key(self, project: ProjectId, usage_key: str) -> str:
        """``usage_key`` becomes the project's unless it has one already; the one it has now."""
        ...

    def give_key_usage_key(self, key_id: str, usage_key: str) -> bool:
        """The key carries ``usage_key`` unless it carries one already; whether it was written."""
        ...


class UsageKeyOwners(Protocol):
    """Which API key each project counts against (tools/enroll_projects.py --remove-orphan-keys)."""

    def project_usage_key(self, project: ProjectId) -> tuple[bool, str | None]:
        """``(the project exists, its usage key)``, strongly consistent."""
        ...


class UsagePlanKeys(Protocol):
    """The usage plan's API keys made for projects, to remove those no project uses."""

    def project_keys(self) -> Iterator[PlanUsageKey]:
        """Every key of the plan named ``kaibo-<projectId>`` (never the shared key)."""
        ...

    def created_at(self, key_id: str) -> datetime | None:
        """When the key was made (None: it is gone)."""
        ...

    def remove(self, key_id: str) -> None:
        """The key out of the plan, then deleted (done too if it was gone already)."""
        ...


class UsagePlanEnrollment(Protocol):
    """Per-project throttles: an API key of the usage plan for each project."""

    def enroll(self, project: ProjectId, usage_key: str) -> None:
        """The usage plan holds an API key of value ``usage_key`` for ``project`` once this returns;
        safe to call again with the same arguments (it then creates nothing more)."""
        ...

    def existing_usage_key(self, project: ProjectId) -> str | None:
        """The value of a key made for ``project`` before (None: none was)."""
        ...


class KeyLookup(Protocol):
    def get_key(self, key_id: str) -> StoredKey | None: ...
