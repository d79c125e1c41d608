"""Memories and the term index in memory, with the DynamoDB store's semantics (tests, benchmarks).

Same contracts as DynamoMemoryStore (index_new exactly once, get, get_many) and
DynamoTermIndex (read: per term the postings of its current side, and of its history
side when asked, strongest impact first, at most ``limit`` each; df; corpus stats).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import replace

from kaibo_core.core.indexing import memory_plan, memory_side, posting_of, postings_record
from kaibo_core.core.models.memories import CorpusStats, MemoryRecord, Posting, TermRead
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.structuring.plan import CommitOutcome, StructuringCommit, require_staged
from kaibo_core.core.webhooks import Notification


class InMemoryMemoryStore:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.plans: dict[tuple[str, str], str] = {}
        self.memories: dict[tuple[str, str], MemoryRecord] = {}
        # (project, side, term) -> {memory id: (impact, posting)}
        self.postings: dict[tuple[str, str, str], dict[str, tuple[int, Posting]]] = {}
        self.doc_freqs: dict[tuple[str, str], int] = {}
        self.corpus: dict[str, CorpusStats] = {}
        #: (project, memory id) -> what its postings say (the DynamoDB item's ``ix``: postings_record)
        self.records: dict[tuple[str, str], str] = {}

    def index_new(self, memory: MemoryRecord) -> bool:
        if memory.content is None:
            raise ValueError("a memory without content cannot be indexed")
        side = memory_side(memory)
        if side is None:
            raise ValueError(f"a {memory.status} memory is not indexed")
        plan = memory_plan(memory)
        with self._lock:
            if (memory.project_id, memory.id) in self.memories:
                return False
            for entry in plan.entries:
                self.postings.setdefault((memory.project_id, side, entry.term), {})[memory.id] = (
                    entry.impact,
                    posting_of(memory, entry, plan.dl),
                )
                df_key = (memory.project_id, entry.term)
                self.doc_freqs[df_key] = self.doc_freqs.get(df_key, 0) + 1
            stats = self.corpus.get(memory.project_id, CorpusStats(0, 0))
            self.corpus[memory.project_id] = CorpusStats(stats.docs + 1, stats.terms + plan.dl)
            # What the DynamoDB item records with it (``dl``): its length as indexed.
            self.memories[(memory.project_id, memory.id)] = replace(memory, indexed_length=plan.dl)
            self.records[(memory.project_id, memory.id)] = postings_record(memory, side)
        return True

    def index_many(self, memories: Sequence[MemoryRecord]) -> list[bool | Exception]:
        return [self.index_new(memory) for memory in memories]

    def statuses(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, str]:
        with self._lock:
            return {
                m: self.memories[(project, m)].status for m in memory_ids if (project, m) in self.memories
            }

    def get(self, project: ProjectId, memory_id: str) -> MemoryRecord | None:
        with self._lock:
            return self.memories.get((project, memory_id))

    def get_many(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, MemoryRecord]:
        with self._lock:
            return {m: self.memories[(project, m)] for m in memory_ids if (project, m) in self.memories}

    def replace(self, memory: MemoryRecord) -> None:
        """Test hook: change a stored memory item only (postings stay: they are hints)."""
        with self._lock:
            self.memories[(memory.project_id, memory.id)] = memory

    # -- structuring (DynamoStructuringStore's contract) -----------------------------------------

    def claim_plan(self, project: ProjectId, provisional_id: str, plan: str) -> tuple[str, str | None]:
        with self._lock:
            memory = self.memories.get((project, provisional_id))
            existing = self.plans.get((project, provisional_id))
            if memory is not None and memory.status == "provisional" and existing is None:
                self.plans[(project, provisional_id)] = plan
                return "claimed", plan
            if memory is not None and memory.status in {"provisional", "replaced"} and existing is not None:
                return "existing", existing
            return "refused", None

    def stage(self, memory: MemoryRecord) -> bool:
        return self.index_new(require_staged(memory))

    def commit(
        self,
        project: ProjectId,
        change: StructuringCommit,
        notifications: Sequence[Notification] = (),  # noqa: ARG002 - no webhooks in memory
        now: str = "",  # noqa: ARG002
    ) -> CommitOutcome:
        with self._lock:
            provisional = self.memories.get((project, change.provisional_id))
            if provisional is None or provisional.status in {"tombstoned", "purged"}:
                return "refused"
            if provisional.status != "provisional":
                done = list(provisional.replaced_by) == change.structured_ids
                if provisional.status == "replaced" and done:
                    return "already_committed"
                raise RuntimeError(f"provisional memory in unexpected state {provisional.status!r}")
            staged = [self.memories.get((project, m.id)) for m in change.structured]
            if any(m is None or m.status != "staged" for m in staged):
                raise RuntimeError("structured memories must be staged before the commit")
            targets = {r.memory_id: self.memories.get((project, r.memory_id)) for r in change.retire}
            if any(t is None or t.status != "active" for t in targets.values()):
                return "conflict"
            behind = {b.memory_id: self.memories.get((project, b.memory_id)) for b in change.file_behind}
            if any(t is None or t.status in {"tombstoned", "purged"} for t in behind.values()):
                return "conflict"
            key = (project, change.provisional_id)
            replaced_by = tuple(change.structured_ids)
            self.memories[key] = replace(provisional, status="replaced", replaced_by=replaced_by)
            for memory in change.structured:
                current = self.memories[(project, memory.id)]
                self.memories[(project, memory.id)] = replace(
                    current,
                    status=memory.status,
                    valid_to=memory.valid_to,
                    supersedes=memory.supersedes,
                    superseded_by=memory.superseded_by,
                    becomes=None,
                )
            for retire in change.retire:
                old = self.memories[(project, retire.memory_id)]
                self.memories[(project, retire.memory_id)] = replace(
                    old,
                    status=retire.status,
                    valid_to=retire.valid_to,
                    superseded_by=(*old.superseded_by, retire.by),
                )
            for b in change.file_behind:
                newer = self.memories[(project, b.memory_id)]
                linked = (*newer.supersedes, b.older)
                self.memories[(project, b.memory_id)] = replace(newer, supersedes=linked)
            return "committed"

    def abandon_staged(self, project: ProjectId, memory_ids: list[str]) -> None:
        with self._lock:
            for memory_id in memory_ids:
                memory = self.memories.get((project, memory_id))
                if memory is not None and memory.status == "staged":
                    self.memories[(project, memory_id)] = replace(memory, status="tombstoned")

    def unindex(self, memory: MemoryRecord) -> None:
        plan = memory_plan(memory)
        project = memory.project_id
        with self._lock:
            removed = False
            for entry in plan.entries:
                if self.postings.get((project, "c", entry.term), {}).pop(memory.id, None) is not None:
                    removed = True
                    self.doc_freqs[(project, entry.term)] -= 1
            if removed:
                stats = self.corpus[project]
                self.corpus[project] = CorpusStats(stats.docs - 1, stats.terms - plan.dl)

    def move_to_history(self, memory: MemoryRecord) -> None:
        self.move_postings(memory, "c", "h")

    def move_postings(self, memory: MemoryRecord, from_side: str, to_side: str) -> None:
        plan = memory_plan(memory)
        with self._lock:
            moved = False
            for entry in plan.entries:
                postings = self.postings.get((memory.project_id, from_side, entry.term), {})
                if postings.pop(memory.id, None) is not None:
                    moved = True
                    self.postings.setdefault((memory.project_id, to_side, entry.term), {})[memory.id] = (
                        entry.impact,
                        posting_of(memory, entry, plan.dl),
                    )
            if moved:
                self.records[(memory.project_id, memory.id)] = postings_record(memory, to_side)

    def restate_postings(self, memory: MemoryRecord, side: str) -> None:
        plan = memory_plan(memory)
        with self._lock:
            for entry in plan.entries:
                postings = self.postings.get((memory.project_id, side, entry.term), {})
                if memory.id in postings:  # one a forget removed is not brought back
                    postings[memory.id] = (entry.impact, posting_of(memory, entry, plan.dl))
            if (memory.project_id, memory.id) in self.memories:
                self.records[(memory.project_id, memory.id)] = postings_record(memory, side)

    def posted_records(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, str | None]:
        with self._lock:
            return {m: self.records.get((project, m)) for m in memory_ids if (project, m) in self.memories}

    def read(
        self,
        project: ProjectId,
        terms: Sequence[str],
        limit: int,
        history: bool,
        *,
        cells: Sequence[str] = (),
        cell_limit: int = 0,
    ) -> tuple[list[TermRead], CorpusStats]:
        with self._lock:
            reads = []
            for term, bound in [(term, limit) for term in terms] + [(cell, cell_limit) for cell in cells]:
                postings: list[Posting] = []
                truncated = False
                for side in ("c", "h") if history else ("c",):
                    entries = self.postings.get((project, side, term), {})
                    ordered = sorted(entries.items(), key=lambda kv: (kv[1][0], kv[0]), reverse=True)
                    postings.extend(posting for _, (_, posting) in ordered[:bound])
                    truncated = truncated or len(ordered) > bound
                reads.append(TermRead(term, postings, self.doc_freqs.get((project, term), 0), truncated))
            return reads, self.corpus.get(project, CorpusStats(0, 0))
