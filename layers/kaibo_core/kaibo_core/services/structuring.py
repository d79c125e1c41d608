"""structure: a job's events become typed, time-bounded memories (docs/structuring.md).

For each event of the job, in order:

1. Its provisional memory is made sure of (remember may have failed to index it).
2. The structurer proposes drafts; the first plan stored for the event wins
   (``claim_plan``), so duplicates, concurrent or late, make the same memories.
3. Each link is resolved against the target's current state: an older statement
   than its target is filed behind it as history; a newer one retires it. A target
   already retired by someone else is followed to its current version (re-resolve).
4. The structured memories are staged (indexed, invisible), then one transaction
   switches them on, replaces the provisional memory and applies the links. A
   forgotten event refuses the switch; a link whose target changed meanwhile is
   resolved again.
5. Postings follow the items: the replaced provisional memory is unindexed, retired
   memories move to the history side, and a structured memory staged on the other side
   than its final status says (re-resolved since) moves there; one resolved again onto the
   side it was staged on, with another end or successor, has its postings written again
   (they carry both, for recall's asOf filter).

Every step is idempotent: a redelivered job repeats nothing that counts twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final, Literal

from kaibo_core.core import webhooks
from kaibo_core.core.clock import Clock, format_instant, instant_ms, utc_now
from kaibo_core.core.indexing import index_side, memory_side, postings_record, recorded_side
from kaibo_core.core.models.events import EventRecord
from kaibo_core.core.models.memories import MemoryRecord
from kaibo_core.core.provisional import provisional_memory, provisional_memory_id
from kaibo_core.core.recall.scoring import RecallFilters, score_postings, term_weights
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.structuring.drafts import (
    DEFAULT_TIME_ZONE,
    MAX_CANDIDATES,
    MAX_DRAFTS_PER_EVENT,
    CandidateMemory,
    EventToStructure,
    MemoryDraft,
)
from kaibo_core.core.structuring.plan import (
    FileBehind,
    Retire,
    StructuringCommit,
    decode_plan,
    encode_plan,
    structured_memory_id,
)
from kaibo_core.core.text import query_terms
from kaibo_core.ports import (
    EventSource,
    FallingBackStructurer,
    JobStore,
    Structurer,
    StructuringStore,
    TermIndex,
)

if TYPE_CHECKING:
    from kaibo_core.services.semantic import SemanticChannel

#: Links are resolved again at most this often when their targets keep changing.
MAX_RESOLVE_ROUNDS: Final = 4
#: Following a retired target to its current version takes at most this many hops.
MAX_CHAIN_HOPS: Final = 32
#: Postings read per term when searching for candidates (the strongest first).
CANDIDATE_POSTINGS_PER_TERM: Final = 50
CANDIDATE_QUERY_TERMS: Final = 16
#: Ranked postings a search may read memory items for: room for some that are no longer current.
CANDIDATES_READ: Final = MAX_CANDIDATES * 2
#: Candidates are current in any time: 9999-12-31.
_FAR_FUTURE_MS: Final = 253_402_300_799_000


@dataclass
class StructuringStats:
    """What structuring did (logged and reported as numbers only: never text)."""

    events: int = 0
    memories: int = 0
    superseded: int = 0
    canceled: int = 0
    filed_as_history: int = 0
    refused: int = 0
    conflicts: int = 0
    replays: int = 0
    links_dropped: int = 0
    fallbacks: int = 0  # events the structurer's fallback (the rules) answered: a model that failed
    memory_ids: list[str] = field(default_factory=list)

    @property
    def newly_structured_events(self) -> int:
        """The events this run took through structuring: not those it found committed already by
        an earlier run (``replays``), so that a redelivered job does not count them again."""
        return self.events - self.replays

    def counts(self) -> dict[str, int]:
        """The figures by their log and report names (numbers only)."""
        return {
            "events": self.events,
            "memories": self.memories,
            "superseded": self.superseded,
            "canceled": self.canceled,
            "filedAsHistory": self.filed_as_history,
            "refused": self.refused,
            "conflicts": self.conflicts,
            "replays": self.replays,
            "linksDropped": self.links_dropped,
            "fallbacks": self.fallbacks,
        }

    def add(self, other: StructuringStats) -> None:
        """Count ``other``'s work in these totals."""
        for name in (
            "events",
            "memories",
            "superseded",
            "canceled",
            "filed_as_history",
            "refused",
            "conflicts",
            "replays",
            "links_dropped",
            "fallbacks",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.memory_ids.extend(other.memory_ids)


@dataclass(frozen=True)
class JobFailure:
    """Which part of a job failed (ids only: never text)."""

    event_ids: tuple[str, ...]
    event_id: str | None  # the event being structured, None if reading the events failed
    attempt: int  # the job's deliveries so far, of any of its messages
    final: bool  # the job is marked failed: the message was on its last receive

    def log_fields(self) -> dict[str, object]:
        return {
            "eventIds": list(self.event_ids),
            "eventId": self.event_id,
            "attempt": self.attempt,
            "jobFailed": self.final,
        }


class CandidateFinder:
    """Earlier current memories that a statement may refer to: a lexical search over the
    current side of the term index, checked against the memory items (only ``active``)."""

    def __init__(
        self, index: TermIndex, memories: StructuringStore, model_version: str | None = None
    ) -> None:
        self._index = index
        self._memories = memories
        self._model_version = model_version

    def search(self, project: ProjectId, query: str, exclude: frozenset[str]) -> list[CandidateMemory]:
        terms = query_terms(query)[:CANDIDATE_QUERY_TERMS]
        if not terms:
            return []
        reads, corpus = self._index.read(project, terms, CANDIDATE_POSTINGS_PER_TERM, False)
        weights = term_weights({r.term: r.doc_freq for r in reads}, corpus)
        ranked, _ = score_postings(
            {r.term: r.postings for r in reads}, weights, corpus, RecallFilters(as_of_ms=_FAR_FUTURE_MS)
        )
        top = [c for c in ranked if c.memory_id not in exclude][:CANDIDATES_READ]
        candidates: list[CandidateMemory] = []
        read = 0
        # In waves: the best MAX_CANDIDATES first, then only as many more as were not current. Most
        # postings on the current side are of active memories, so one wave usually does: half the
        # items (and read units) of reading CANDIDATES_READ at once, for the same candidates.
        while read < len(top) and len(candidates) < MAX_CANDIDATES:
            wave = top[read : read + MAX_CANDIDATES - len(candidates)]
            read += len(wave)
            found = self._memories.get_many(project, [c.memory_id for c in wave])
            candidates.extend(
                candidate
                for c in wave
                if (candidate := self._candidate(found.get(c.memory_id), c.score)) is not None
            )
        return candidates

    def _candidate(self, memory: MemoryRecord | None, score: float) -> CandidateMemory | None:
        """A current memory as a candidate; None for one retired, purged or gone since its posting."""
        if memory is None or memory.status != "active" or memory.content is None:
            return None
        return CandidateMemory(
            memory_id=memory.id,
            type=memory.type,
            content=memory.content,
            valid_from=memory.valid_from,
            stream=memory.stream,
            subject=memory.subject,
            score=score,
            vector=self._vector(memory),
        )

    def _vector(self, memory: MemoryRecord) -> str | None:
        placement = memory.semantic
        if placement is None or placement.version != self._model_version:
            return None
        return placement.vector


class StructuringService:
    def __init__(
        self,
        events: EventSource,
        memories: StructuringStore,
        index: TermIndex,
        structurer: Structurer,
        *,
        clock: Clock = utc_now,
        project_time_zone: Callable[[ProjectId], str | None] = lambda _project: None,
        semantic: SemanticChannel | None = None,
    ) -> None:
        self._semantic = semantic
        self._events = events
        self._memories = memories
        self._finder = CandidateFinder(index, memories, None if semantic is None else semantic.version)
        self._structurer = structurer
        self._clock = clock
        self._project_time_zone = project_time_zone

    # -- jobs -----------------------------------------------------------------------------------

    def structure_job(
        self,
        project: ProjectId,
        job_id: str,
        jobs: JobStore,
        on_failure: Callable[[JobFailure], None] | None = None,
        *,
        last_receive: bool = False,
        stats: StructuringStats | None = None,
    ) -> StructuringStats:
        """Structure every event of a job and mark it done. Raises on a failure (the message is
        retried). ``last_receive``: the message is on its last receive, so a failure sends it to the
        dead-letter queue; the job is then marked failed first. A failed job is started again by
        the next message naming it. ``on_failure`` hears which job and event failed before the
        exception leaves (the caller logs it). The work is counted into ``stats`` when given, so
        that a caller also sees what a job that raised did before it failed (its model fallbacks)."""
        stats = StructuringStats() if stats is None else stats
        job = jobs.start(project, job_id, self._now())
        if job is None:
            return stats  # done already (a duplicate message) or unknown
        current: EventRecord | None = None
        try:
            records = self._events.get_events(project, [(e.stream, e.seq) for e in job.events])
            for current in records:
                self.structure_event(project, current, stats, job_id=job_id)
        except Exception as exc:
            if on_failure is not None:
                failing = current.id if current else None
                on_failure(JobFailure(job.event_ids, failing, job.attempts, last_receive))
            if last_receive:
                jobs.fail(project, job_id, f"structuring failed: {type(exc).__name__}", self._now())
            raise
        jobs.finish(project, job_id, stats.memory_ids, self._now())
        return stats

    # -- one event ------------------------------------------------------------------------------

    def structure_event(
        self, project: ProjectId, event: EventRecord, stats: StructuringStats, job_id: str | None = None
    ) -> list[str]:
        stats.events += 1
        provisional = self._provisional(project, event)
        if provisional is None:
            return []
        if provisional.status == "replaced":
            stats.replays += 1
            self._finish_postings(project, provisional, provisional.replaced_by)
            stats.memory_ids.extend(provisional.replaced_by)
            return list(provisional.replaced_by)
        if provisional.status != "provisional" or provisional.content is None:
            stats.refused += 1
            return []
        fallbacks_before = _fallbacks(self._structurer)
        drafts = self._plan(project, event, provisional)
        stats.fallbacks += _fallbacks(self._structurer) - fallbacks_before
        if drafts is None:
            stats.refused += 1
            return []
        memory_ids = self._apply(project, provisional, drafts, stats, (job_id, event.id))
        stats.memory_ids.extend(memory_ids)
        return memory_ids

    def _provisional(self, project: ProjectId, event: EventRecord) -> MemoryRecord | None:
        memory = self._memories.get(project, provisional_memory_id(event.id))
        if memory is not None:
            return memory
        made = provisional_memory(event, self._now())
        if made is None:
            return None  # no text (or purged): nothing to structure
        self._memories.index_new(self._placed([made])[0])
        return self._memories.get(project, made.id)

    def _plan(
        self, project: ProjectId, event: EventRecord, provisional: MemoryRecord
    ) -> list[MemoryDraft] | None:
        assert provisional.content is not None
        own = frozenset({provisional.id})
        to_structure = EventToStructure(
            event_id=event.id,
            stream=event.stream,
            seq=event.seq,
            hash=event.hash,
            kind=event.kind,
            text=provisional.content,
            occurred_at=event.occurred_at,
            time_zone=event.time_zone or self._project_time_zone(project) or DEFAULT_TIME_ZONE,
            supersedes=event.supersedes,
            cancels=event.cancels,
        )
        drafts = self._structurer.structure(to_structure, lambda q: self._finder.search(project, q, own))
        drafts = drafts[:MAX_DRAFTS_PER_EVENT] or [_whole_text_draft(to_structure)]
        text = provisional.content
        outcome, plan = self._memories.claim_plan(project, provisional.id, encode_plan(drafts, text))
        return None if outcome == "refused" or plan is None else decode_plan(plan, text)

    def _apply(
        self,
        project: ProjectId,
        provisional: MemoryRecord,
        drafts: list[MemoryDraft],
        stats: StructuringStats,
        origin: tuple[str | None, str] = (None, ""),
    ) -> list[str]:
        """Commit ``drafts``; ``origin`` (job id, event id) is what the webhook events name."""
        base = self._placed(
            [self._draft_memory(provisional, position, draft) for position, draft in enumerate(drafts, 1)]
        )
        staged: set[str] = set()
        #: What the postings this run staged a memory with say (not for one an earlier run began).
        records: dict[str, str] = {}
        for _ in range(MAX_RESOLVE_ROUNDS):
            change = self._resolve(project, provisional, base, drafts, stats)
            for memory in change.structured:
                if memory.id not in staged:
                    staging = replace(memory, status="staged", becomes=memory.status)
                    if self._memories.stage(staging) and (side := memory_side(staging)) is not None:
                        records[memory.id] = postings_record(staging, side)
                    staged.add(memory.id)
            reported = webhooks.structured(
                *origin, change.structured_ids, [(r.memory_id, r.status, r.by) for r in change.retire]
            )
            outcome = self._memories.commit(project, change, reported, self._now())
            if outcome == "conflict":
                stats.conflicts += 1
                continue
            if outcome == "refused":
                self._memories.abandon_staged(project, [m.id for m in change.structured])
                stats.refused += 1
                return []
            if outcome == "already_committed":
                # Another run committed this event first, as it resolved it: its items, not this
                # run's resolution, say where the postings go and what they carry.
                self._finish_postings(project, provisional, change.structured_ids)
                return change.structured_ids
            self._count(change, stats)
            self._follow_postings(
                project, provisional, [r.memory_id for r in change.retire], change.structured, records
            )
            return change.structured_ids
        raise RuntimeError("links kept changing while structuring; the job will be retried")

    @staticmethod
    def _draft_memory(provisional: MemoryRecord, position: int, draft: MemoryDraft) -> MemoryRecord:
        return MemoryRecord(
            project_id=provisional.project_id,
            id=structured_memory_id(provisional.id, position),
            status="active",
            type=draft.type,
            content=draft.content,
            valid_from=draft.valid_from,
            valid_to=None,
            confidence=round(min(1.0, max(0.0, draft.confidence)), 3),
            stream=provisional.stream,
            source_events=provisional.source_events,
            created_at=provisional.created_at,
            subject=draft.subject,
            replaces=provisional.id,
            # A draft saying what the event said is where the event is: no second model call.
            semantic=provisional.semantic if draft.content == provisional.content else None,
        )

    def _placed(self, memories: list[MemoryRecord]) -> list[MemoryRecord]:
        """Recall by meaning: ``memories`` with their vectors and cells, when a model is on."""
        return memories if self._semantic is None else self._semantic.place(memories)

    def _resolve(
        self,
        project: ProjectId,
        provisional: MemoryRecord,
        base: list[MemoryRecord],
        drafts: list[MemoryDraft],
        stats: StructuringStats,
    ) -> StructuringCommit:
        """The commit of ``drafts`` against the current state of every link target."""
        own = {provisional.id, *(m.id for m in base)}
        structured: list[MemoryRecord] = []
        retire: list[Retire] = []
        behind: list[FileBehind] = []
        linked: set[str] = set()
        for drafted, draft in zip(base, drafts, strict=True):
            memory = drafted
            for link in draft.links:
                target = self._current_version(project, link.memory_id)
                if target is None or target.id in own or target.id in linked:
                    stats.links_dropped += target is None
                    continue
                linked.add(target.id)
                if instant_ms(memory.valid_from) >= instant_ms(target.valid_from):
                    status: Literal["superseded", "canceled"] = (
                        "canceled" if link.kind == "cancels" else "superseded"
                    )
                    retire.append(Retire(target.id, status, memory.valid_from, memory.id))
                    memory = replace(memory, supersedes=(*memory.supersedes, target.id))
                elif memory.status == "active":
                    # An older statement arriving late: history behind the newer memory.
                    memory = replace(
                        memory,
                        status="superseded",
                        valid_to=target.valid_from,
                        superseded_by=(target.id,),
                    )
                    behind.append(FileBehind(target.id, memory.id))
            structured.append(memory)
        return StructuringCommit(provisional.id, tuple(structured), tuple(retire), tuple(behind))

    def _current_version(self, project: ProjectId, memory_id: str) -> MemoryRecord | None:
        """The memory a link names, or the version that replaced it since (None: not linkable)."""
        memory = self._memories.get(project, memory_id)
        for _ in range(MAX_CHAIN_HOPS):
            if memory is None:
                return None
            if memory.status == "active":
                return memory
            if memory.status == "replaced" and len(memory.replaced_by) == 1:
                following = memory.replaced_by[0]
            elif memory.status == "superseded" and memory.superseded_by:
                following = memory.superseded_by[-1]
            else:
                return None  # canceled, forgotten, staged or still provisional: leave it alone
            memory = self._memories.get(project, following)
        return None

    def _follow_postings(
        self,
        project: ProjectId,
        provisional: MemoryRecord,
        retired_ids: Sequence[str],
        structured: Iterable[MemoryRecord],
        staged_records: Mapping[str, str] | None = None,
    ) -> None:
        """``staged_records``: what this run staged memories' postings with (read for the others
        only: ``postings_record``)."""
        self._memories.unindex(provisional)
        memories = [*self._memories.get_many(project, retired_ids).values(), *structured]
        known = dict(staged_records or {})
        unknown = [memory.id for memory in memories if memory.id not in known]
        posted = {**(self._memories.posted_records(project, unknown) if unknown else {}), **known}
        for memory in memories:
            # A structured memory was staged as its first resolution said, which a later one (same
            # run, or a redelivery) may have changed: its side, or on the same side its end and
            # successor. Unrecorded: an item written before postings were recorded, whose postings
            # are current unless they moved already (the index repair checks those).
            wanted = index_side(memory.status)
            if wanted is None or memory.content is None:
                continue
            record = posted.get(memory.id)
            on = "c" if record is None else recorded_side(record)
            if wanted != on:
                self._memories.move_postings(memory, on, wanted)
            elif record is not None and record != postings_record(memory, wanted):
                self._memories.restate_postings(memory, wanted)

    def _finish_postings(
        self, project: ProjectId, provisional: MemoryRecord, structured_ids: Sequence[str]
    ) -> None:
        """Step 5 again for an event committed already (``structured_ids``: what it was replaced
        by): the run that committed it may have died (or lost the commit's answer) before its
        postings followed, and a redelivery finds it ``replaced``. Every step is idempotent, so
        what was done is not done twice. The memories it retired are the ones its structured
        memories supersede."""
        structured = self._memories.get_many(project, structured_ids)
        retired = [target for memory in structured.values() for target in memory.supersedes]
        self._follow_postings(project, provisional, retired, structured.values())

    @staticmethod
    def _count(change: StructuringCommit, stats: StructuringStats) -> None:
        stats.memories += len(change.structured)
        stats.superseded += sum(1 for r in change.retire if r.status == "superseded")
        stats.canceled += sum(1 for r in change.retire if r.status == "canceled")
        stats.filed_as_history += len(change.file_behind)

    def _now(self) -> str:
        return format_instant(self._clock())


def _fallbacks(structurer: Structurer) -> int:
    """How many events ``structurer`` has answered with its fallback so far (0 if it has none)."""
    return structurer.fallbacks if isinstance(structurer, FallingBackStructurer) else 0


def _whole_text_draft(event: EventToStructure) -> MemoryDraft:
    """A structurer that proposes nothing still keeps the event's text: an episode."""
    return MemoryDraft(type="episode", content=event.text, valid_from=event.occurred_at, confidence=0.5)
