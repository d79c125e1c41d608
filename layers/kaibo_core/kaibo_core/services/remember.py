"""remember: append a batch of events to a stream, exactly once per idempotency key.

1. Plan (pure, before any I/O): every limit and every canonical form is checked,
   ids and salts are drawn, digests computed. A bad batch fails here whole.
2. Append optimistically: read the head, chain the events onto it, write keys +
   events + head in one transaction. On a lost race the head is re-read and the
   append retried (bounded, full-jitter backoff); keys another writer claimed
   meanwhile become replays. A key found claimed by this request's own event (its
   id is drawn for this request alone) is this request's own commit, whose answer
   was lost and whose re-send (the SDK's retry) was refused: a first write, not a replay.
3. Replays return the original event (``replayed: true``) after checking that
   the request really is a retry of it; a different event under a used key is a
   409, decided before anything of the batch is written.
4. The same transaction creates the batch's structuring job (kaibo_core.core.models.jobs),
   so every acknowledged event has one.
5. After the commit, each event's provisional memory is stored and indexed
   (idempotently), so recall finds it at once, and the job's message (ids only) goes
   to the structuring queue. The events are acknowledged whatever happens here: a
   failure is logged and counted, a replay of the same keys completes the index, and
   the sweeper re-queues a job whose message was lost.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, cast

from kaibo_core.core import chain
from kaibo_core.core import deadline as invocation
from kaibo_core.core.backoff import full_jitter
from kaibo_core.core.clock import Clock, format_instant, parse_instant, utc_now
from kaibo_core.core.errors import (
    ConflictError,
    PayloadTooLargeError,
    UnprocessableError,
)
from kaibo_core.core.forgetting import FORGOTTEN
from kaibo_core.core.ids import event_id
from kaibo_core.core.ids import job_id as new_job_id
from kaibo_core.core.limits import (
    MAX_APPEND_ATTEMPTS,
    MAX_OCCURRED_AT_LEAD,
    MAX_PAYLOAD_BYTES,
    MIN_OCCURRED_AT,
)
from kaibo_core.core.models.events import (
    AppendConflictError,
    EventRecord,
    IdempotencyClaim,
    NewEvent,
    RememberedEvent,
    RememberOutcome,
    StreamHead,
    stream_busy,
)
from kaibo_core.core.models.jobs import EventLocation, JobRecord
from kaibo_core.core.models.memories import MemoryStatus
from kaibo_core.core.provisional import provisional_memory
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.time_zones import is_time_zone
from kaibo_core.ports import EventLog, JobQueue, JobReader, MemoryReader, ProvisionalIndex
from kaibo_core.services.jobs import JobsService

if TYPE_CHECKING:
    from kaibo_core.services.semantic import SemanticChannel

#: What an explicit ``supersedes``/``cancels`` entry must look like.
MEMORY_ID_PATTERN = re.compile(r"mem_[A-Za-z0-9_.-]{1,80}")

BACKOFF_BASE_SECONDS = 0.005
BACKOFF_CAP_SECONDS = 0.2


@dataclass(frozen=True)
class PlannedEvent:
    index: int
    event_id: str
    kind: str
    idempotency_key: str
    occurred_at: str
    occurred_at_given: bool
    canonical_payload: str
    salt: str
    payload_digest: str
    time_zone: str | None = None
    supersedes: tuple[str, ...] = ()
    cancels: tuple[str, ...] = ()


@dataclass
class _AppendState:
    pending: list[PlannedEvent]
    appended: dict[str, EventRecord] = field(default_factory=dict)


def plan_batch(events: Sequence[NewEvent], received: datetime) -> list[PlannedEvent]:
    """Validate what the schema cannot (duplicates, time, canonical form, size) and prepare each event."""
    seen: dict[str, int] = {}
    planned: list[PlannedEvent] = []
    for index, event in enumerate(events):
        if event.idempotency_key in seen:
            raise UnprocessableError(
                "duplicate_idempotency_key",
                f"events[{index}] repeats the idempotency key of events[{seen[event.idempotency_key]}]; "
                "each event in a batch needs its own key.",
                {"index": index, "idempotencyKey": event.idempotency_key},
            )
        seen[event.idempotency_key] = index
        occurred_at = _occurred_at(index, event.occurred_at, received)
        try:
            canonical = chain.canonical_payload(event.payload)
        except chain.NotCanonicalizableError as exc:
            raise UnprocessableError(
                "not_canonicalizable",
                f"events[{index}].payload has no RFC 8785 canonical form ({exc}). Integers must lie "
                "within ±(2^53−1), other numbers outside [2^53, 10^21); NaN, Infinity and lone surrogates "
                "are not allowed.",
                {"index": index},
            ) from exc
        if len(canonical) > MAX_PAYLOAD_BYTES:
            raise PayloadTooLargeError(
                "event_too_large",
                f"events[{index}].payload is {len(canonical)} bytes in canonical form; the limit is "
                f"{MAX_PAYLOAD_BYTES}.",
                {"index": index, "bytes": len(canonical), "limit": MAX_PAYLOAD_BYTES},
            )
        _check_memory_ids(index, "supersedes", event.supersedes)
        _check_memory_ids(index, "cancels", event.cancels)
        salt = secrets.token_hex(chain.SALT_BYTES)
        planned.append(
            PlannedEvent(
                index=index,
                event_id=event_id(),
                kind=event.kind,
                idempotency_key=event.idempotency_key,
                occurred_at=occurred_at,
                occurred_at_given=event.occurred_at is not None,
                canonical_payload=canonical.decode("utf-8"),
                salt=salt,
                payload_digest=chain.payload_digest(salt, canonical),
                time_zone=_time_zone(index, event.time_zone),
                supersedes=tuple(dict.fromkeys(event.supersedes)),
                cancels=tuple(dict.fromkeys(event.cancels)),
            )
        )
    return planned


def _time_zone(index: int, name: str | None) -> str | None:
    if name is None:
        return None
    if not is_time_zone(name):
        raise UnprocessableError(
            "invalid_time_zone",
            f"events[{index}].timeZone {name!r} is not an IANA time zone name (e.g. Europe/Berlin, UTC).",
            {"index": index, "field": "timeZone", "timeZone": name},
        )
    return name


def _check_memory_ids(index: int, field_name: str, memory_ids: Sequence[str]) -> None:
    for memory_id in memory_ids:
        if not MEMORY_ID_PATTERN.fullmatch(memory_id):
            raise UnprocessableError(
                "invalid_memory_id",
                f"events[{index}].{field_name} holds {memory_id!r}, which is not a memory id (mem_…).",
                {"index": index, "field": field_name, "memoryId": memory_id},
            )


def _occurred_at(index: int, text: str | None, received: datetime) -> str:
    if text is None:
        return format_instant(received)
    try:
        moment = parse_instant(text)
    except ValueError as exc:
        raise UnprocessableError(
            "invalid_timestamp",
            f"events[{index}].occurredAt: {exc}",
            {"index": index, "field": "occurredAt"},
        ) from exc
    if moment < MIN_OCCURRED_AT:
        raise UnprocessableError(
            "occurred_at_too_early",
            f"events[{index}].occurredAt is before {format_instant(MIN_OCCURRED_AT)}, the earliest "
            "instant an event may carry.",
            {"index": index, "occurredAt": text, "earliest": format_instant(MIN_OCCURRED_AT)},
        )
    if moment - received > MAX_OCCURRED_AT_LEAD:
        raise UnprocessableError(
            "occurred_at_in_future",
            f"events[{index}].occurredAt is more than {int(MAX_OCCURRED_AT_LEAD.total_seconds() // 60)} "
            "minutes ahead of the server's clock; check the sender's clock.",
            {"index": index, "occurredAt": text, "serverTime": format_instant(received)},
        )
    return format_instant(moment)


def chain_records(  # noqa: PLR0917 - the inputs of a chain link
    project: ProjectId,
    stream: str,
    head: StreamHead,
    events: Sequence[PlannedEvent],
    received_at: str,
    job_id: str | None = None,
) -> list[EventRecord]:
    """Give each planned event the next seq and its hash, linked onto ``head``."""
    records: list[EventRecord] = []
    prev = head
    for planned in events:
        seq = prev.seq + 1
        header = chain.event_header(
            project_id=project,
            stream=stream,
            seq=seq,
            event_id=planned.event_id,
            kind=planned.kind,
            idempotency_key=planned.idempotency_key,
            occurred_at=planned.occurred_at,
            received_at=received_at,
            payload_digest=planned.payload_digest,
        )
        digest = chain.event_hash(prev.hash, header)
        records.append(
            EventRecord(
                project_id=project,
                stream=stream,
                seq=seq,
                id=planned.event_id,
                kind=planned.kind,
                idempotency_key=planned.idempotency_key,
                occurred_at=planned.occurred_at,
                received_at=received_at,
                payload_digest=planned.payload_digest,
                hash=digest,
                prev_hash=prev.hash,
                canonical_payload=planned.canonical_payload,
                salt=planned.salt,
                job_id=job_id,
                time_zone=planned.time_zone,
                supersedes=planned.supersedes,
                cancels=planned.cancels,
            )
        )
        prev = StreamHead(seq=seq, hash=digest)
    return records


def is_retry_of(planned: PlannedEvent, stream: str, original: EventRecord) -> bool:
    """Does this request event repeat the original one (so replaying it loses nothing)?"""
    if original.stream != stream or original.kind != planned.kind:
        return False
    if planned.occurred_at_given and planned.occurred_at != original.occurred_at:
        return False
    if original.salt is None:
        return False  # payload purged: nothing left to compare it with, so nothing new is dropped unseen
    digest = chain.payload_digest(original.salt, planned.canonical_payload.encode("utf-8"))
    return digest == original.payload_digest


def queued_job(project: ProjectId, job_id: str, records: Sequence[EventRecord], now: str) -> JobRecord:
    return JobRecord(
        project_id=project,
        id=job_id,
        status="queued",
        events=tuple(EventLocation(r.id, r.stream, r.seq) for r in records),
        created_at=now,
        updated_at=now,
    )


class RememberService:
    def __init__(
        self,
        log: EventLog,
        memories: ProvisionalIndex | None = None,
        *,
        jobs: JobQueue | None = None,
        job_reader: JobReader | None = None,
        memory_reader: MemoryReader | None = None,
        clock: Clock = utc_now,
        sleep: Callable[[float], None] = time.sleep,
        max_attempts: int = MAX_APPEND_ATTEMPTS,
        semantic: SemanticChannel | None = None,
    ) -> None:
        self._semantic = semantic
        self._log = log
        self._memories = memories
        self._jobs = jobs
        self._job_waits = None if job_reader is None else JobsService(job_reader, sleep=sleep)
        self._memory_reader = memory_reader
        self._clock = clock
        self._sleep = sleep
        self._max_attempts = max_attempts

    def remember(self, project: ProjectId, stream: str, events: Sequence[NewEvent]) -> RememberOutcome:
        received = self._clock()
        received_at = format_instant(received)
        planned = plan_batch(events, received)
        outcome = RememberOutcome(events=[])
        state = _AppendState(pending=list(planned))
        originals: dict[str, EventRecord] = {}
        job_id = new_job_id() if self._jobs is not None else None
        while state.pending:
            if outcome.attempts >= self._max_attempts:
                raise stream_busy(stream, outcome.attempts)
            outcome.attempts += 1
            head = self._log.read_head(project, stream)
            records = chain_records(project, stream, head, state.pending, received_at, job_id)
            job = None if job_id is None else queued_job(project, job_id, records, received_at)
            try:
                self._log.append(project, stream, head, records, received_at, job=job)
            except AppendConflictError as conflict:
                if conflict.claimed:
                    originals.update(self._check_replays(project, stream, state, conflict.claimed))
                if conflict.head_moved and state.pending:
                    outcome.head_conflicts += 1
                    wait = self._backoff(outcome.head_conflicts)
                    if not invocation.time_for(wait):
                        raise stream_busy(stream, outcome.attempts) from conflict
                    self._sleep(wait)
                continue
            state.appended.update({record.idempotency_key: record for record in records})
            state.pending = []
        for event in planned:
            key = event.idempotency_key
            if key in state.appended:
                outcome.events.append(RememberedEvent(state.appended[key], replayed=False))
            else:
                outcome.events.append(RememberedEvent(originals[key], replayed=True))
        outcome.appended = len(state.appended)
        outcome.replays = len(originals)
        if self._memories is not None:
            self._index_provisional(project, outcome, received_at)
        self._announce_job(project, outcome, job_id)
        return outcome

    def wait(self, project: ProjectId, outcome: RememberOutcome, timeout_seconds: float) -> RememberOutcome:
        """``wait: true``: the outcome with its job once finished (or as it stands after
        ``timeout_seconds``) and, if the job is done, its structured memories in the job's order."""
        if outcome.job_id is None or self._job_waits is None:
            return outcome
        job = self._job_waits.wait(project, outcome.job_id, timeout_seconds)
        if job is None:
            return replace(outcome, job=self._job_waits.find(project, outcome.job_id))
        if job.status != "done" or self._memory_reader is None:
            return replace(outcome, job=job)
        found = self._memory_reader.get_many(project, job.memory_ids)
        return replace(outcome, job=job, structured=[found[m] for m in job.memory_ids if m in found])

    def _announce_job(self, project: ProjectId, outcome: RememberOutcome, job_id: str | None) -> None:
        if self._jobs is None or job_id is None:
            return
        if outcome.appended:
            outcome.job_id, outcome.job_created = job_id, True
            try:
                self._jobs.send(project, job_id)
            except Exception as exc:  # acknowledged events must not fail here: the sweeper re-queues
                outcome.enqueue_failure = exc
        else:
            outcome.job_id = next((e.record.job_id for e in outcome.events if e.record.job_id), None)

    def _index_provisional(self, project: ProjectId, outcome: RememberOutcome, created_at: str) -> None:
        assert self._memories is not None
        drafts = [
            (memory, event.replayed)
            for event in outcome.events
            if (memory := provisional_memory(event.record, created_at)) is not None
        ]
        replayed = [memory.id for memory, was_replayed in drafts if was_replayed]
        try:
            existing = self._memories.statuses(project, replayed) if replayed else {}
        except Exception as exc:  # acknowledged events must not fail here
            outcome.index_failures.append(exc)
            return
        todo = [memory for memory, _ in drafts if memory.id not in existing]
        if self._semantic is not None and todo:
            try:
                todo = self._semantic.place(todo)
            except Exception as exc:  # acknowledged events must not fail here: indexed by words only
                outcome.index_failures.append(exc)
        results = dict(zip((m.id for m in todo), self._memories.index_many(todo), strict=True))
        for memory, _ in drafts:
            result = results.get(memory.id, False)
            if isinstance(result, Exception):
                outcome.index_failures.append(result)
            elif (status := existing.get(memory.id)) in FORGOTTEN:
                # A replayed key of a forgotten event: its text must not come back in the answer.
                outcome.memories.append(replace(memory, status=cast(MemoryStatus, status), content=None))
            elif status is not None:  # a replay: the memory as it is now (replaced once structured)
                outcome.memories.append(replace(memory, status=cast(MemoryStatus, status)))
            else:
                outcome.memories.append(memory)

    def _check_replays(
        self,
        project: ProjectId,
        stream: str,
        state: _AppendState,
        claimed: dict[str, IdempotencyClaim],
    ) -> dict[str, EventRecord]:
        """The originals of the ``claimed`` keys that another request wrote (replays, checked to
        repeat them); those this request wrote itself go to ``state.appended``."""
        found = {
            (r.stream, r.seq): r
            for r in self._log.get_events(project, [(c.stream, c.seq) for c in claimed.values()])
        }
        originals: dict[str, EventRecord] = {}
        for event in state.pending:
            claim = claimed.get(event.idempotency_key)
            if claim is None:
                continue
            original = found.get((claim.stream, claim.seq))
            if original is None or original.id != claim.event_id:
                raise RuntimeError(f"idempotency key {claim.idempotency_key!r} points at a missing event")
            if original.id == event.event_id:
                # This request's own event: an append of it committed, its answer was lost, and the
                # SDK's re-send failed its conditions. Appended (with its job) by this request.
                state.appended[event.idempotency_key] = original
                continue
            if not is_retry_of(event, stream, original):
                named = (
                    "an event that was forgotten and purged: its payload is gone, so no request can be "
                    "shown to repeat it"
                    if original.salt is None
                    else "a different event"
                )
                raise ConflictError(
                    "idempotency_key_reused",
                    f"events[{event.index}] reuses idempotency key {event.idempotency_key!r}, which already "
                    f"names {named} ({original.id} in stream {original.stream!r}). Use a new key for a new "
                    "event; nothing of this batch was written.",
                    {"index": event.index, "idempotencyKey": event.idempotency_key, "eventId": original.id},
                )
            originals[event.idempotency_key] = original
        state.pending = [e for e in state.pending if e.idempotency_key not in claimed]
        return originals

    @staticmethod
    def _backoff(conflicts: int) -> float:
        return full_jitter(conflicts, BACKOFF_BASE_SECONDS, BACKOFF_CAP_SECONDS)
