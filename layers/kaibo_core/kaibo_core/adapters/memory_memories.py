"""Memories and the term index in memory, with the DynamoDB store's semantics (tests, benchmarks).

Same contracts as DynamoMemoryStore (index_new exactly once, get, get_many) and
DynamoTermIndex (read: per term the postings of its current side, and of its history
side when asked, strongest impact first, at most ``limit`` each; df; corpus stats).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from kaibo_core.adapters.dynamodb_index import TermRead
from kaibo_core.indexing import index_side, memory_terms, plan_index, posting_of
from kaibo_core.models.memories import CorpusStats, MemoryRecord, Posting
from kaibo_core.storage_keys import ProjectId


class InMemoryMemoryStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.memories: dict[tuple[str, str], MemoryRecord] = {}
        # (project, side, term) -> {memory id: (impact, posting)}
        self.postings: dict[tuple[str, str, str], dict[str, tuple[int, Posting]]] = {}
        self.doc_freqs: dict[tuple[str, str], int] = {}
        self.corpus: dict[str, CorpusStats] = {}

    def index_new(self, memory: MemoryRecord) -> bool:
        if memory.content is None:
            raise ValueError("a memory without content cannot be indexed")
        side = index_side(memory.status)
        if side is None:
            raise ValueError(f"a {memory.status} memory is not indexed")
        plan = plan_index(memory.id, memory_terms(memory))
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
            self.memories[(memory.project_id, memory.id)] = memory
        return True

    def index_many(self, memories: Sequence[MemoryRecord]) -> list[bool | Exception]:
        return [self.index_new(memory) for memory in memories]

    def existing_ids(self, project: ProjectId, memory_ids: Iterable[str]) -> set[str]:
        with self._lock:
            return {m for m in memory_ids if (project, m) in self.memories}

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

    def read(
        self, project: ProjectId, terms: Sequence[str], limit: int, history: bool
    ) -> tuple[list[TermRead], CorpusStats]:
        with self._lock:
            reads = []
            for term in terms:
                postings: list[Posting] = []
                truncated = False
                for side in ("c", "h") if history else ("c",):
                    entries = self.postings.get((project, side, term), {})
                    ordered = sorted(entries.items(), key=lambda kv: (kv[1][0], kv[0]), reverse=True)
                    postings.extend(posting for _, (_, posting) in ordered[:limit])
                    truncated = truncated or len(ordered) > limit
                reads.append(TermRead(term, postings, self.doc_freqs.get((project, term), 0), truncated))
            return reads, self.corpus.get(project, CorpusStats(0, 0))
