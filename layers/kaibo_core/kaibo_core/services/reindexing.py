"""Re-indexing: every memory placed by the model recall uses now (``SemanticReindexer``), and the
term index repaired where older versions left it wrong (``IndexRepairer``, below).

Re-indexing by meaning: every memory placed by the model recall uses now.

Memories written while recall by meaning was off, or placed by another model or cell set, have no
cells of the current version: recall finds them by their words only. A re-index places each of
them (one model call per ``BATCH`` memories) and replaces its cell postings, each memory in one
transaction of its own; one that changed since it was read (retired, forgotten, placed by someone
else) is read again, and skipped if it keeps changing: running the command again finishes it.
Memories that are not indexed (replaced provisional ones, forgotten ones) are left alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from kaibo_core.core.indexing import encode_posting, memory_plan, memory_side, posting_of
from kaibo_core.core.storage_keys import ProjectId

if TYPE_CHECKING:
    from kaibo_core.core.models.memories import MemoryRecord, PostingRef, SemanticPlacement
    from kaibo_core.ports import IndexRepairStore, PlacementStore
    from kaibo_core.services.semantic import SemanticChannel

#: Memories embedded per model call.
BATCH: Final = 32
#: A memory that changed since it was read is read again at most this often.
MAX_ATTEMPTS: Final = 3


@dataclass
class ReindexStats:
    seen: int = 0
    placed: int = 0
    already_placed: int = 0
    not_indexed: int = 0  # replaced, forgotten, staged, or without text
    changed: int = 0  # still changing after MAX_ATTEMPTS: run the re-index again

    def summary(self, version: str) -> str:
        return (
            f"{self.placed} memories placed by {version}, {self.already_placed} already were, "
            f"{self.not_indexed} not indexed (replaced or forgotten), {self.changed} still changing"
            + (" (run again)" if self.changed else "")
        )


class SemanticReindexer:
    def __init__(self, store: PlacementStore, channel: SemanticChannel) -> None:
        self._store = store
        self._channel = channel

    def reindex(
        self, project: ProjectId | None = None, progress: Callable[[ReindexStats], None] | None = None
    ) -> ReindexStats:
        """Place every memory of ``project`` (None: of every project) not placed by this model."""
        stats = ReindexStats()
        batch: list[MemoryRecord] = []
        for memory in self._store.memories(project):
            stats.seen += 1
            if not _indexed(memory):
                stats.not_indexed += 1
            elif memory.semantic is not None and memory.semantic.version == self._channel.version:
                stats.already_placed += 1
            else:
                batch.append(memory)
                if len(batch) == BATCH:
                    self._place(batch, stats)
                    batch = []
                    if progress is not None:
                        progress(stats)
        if batch:
            self._place(batch, stats)
        return stats

    def _place(self, memories: Sequence[MemoryRecord], stats: ReindexStats) -> None:
        placed = self._channel.place(memories)  # none of them placed by this model yet
        for memory, new in zip(memories, placed, strict=True):
            assert new.semantic is not None
            self._replace(memory, new.semantic, stats)

    def _replace(self, memory: MemoryRecord, placement: SemanticPlacement, stats: ReindexStats) -> None:
        current: MemoryRecord | None = memory
        for _ in range(MAX_ATTEMPTS):
            if current is None or not _indexed(current) or current.content != memory.content:
                stats.not_indexed += 1
                return
            if current.semantic is not None and current.semantic.version == placement.version:
                stats.already_placed += 1
                return
            if self._store.replace_placement(current, placement):
                stats.placed += 1
                return
            current = self._store.get(ProjectId(memory.project_id), memory.id)
        stats.changed += 1


@dataclass
class RepairStats:
    memories: int = 0  # memory items checked
    moved: int = 0  # postings moved to the side the memory's status says
    restated: int = 0  # postings written again with the memory's status, end and successor
    postings: int = 0  # postings checked
    orphans: int = 0  # postings erased: of no memory, of a forgotten or replaced one, or duplicates
    left: int = 0  # postings on the wrong side with no twin on the right one (run again)
    cursor: str | None = None  # where the next run resumes (None: the repair is finished)

    def summary(self) -> str:
        done = "finished" if self.cursor is None else f"stopped: resume with --cursor '{self.cursor}'"
        return (
            f"{self.memories} memories checked, {self.moved} moved to their side, {self.restated} "
            f"rewritten; {self.postings} postings checked, {self.orphans} orphans erased, "
            f"{self.left} left (run again); {done}"
        )


#: The index repair's two passes, in order, as its cursor names them.
_MEMORIES, _POSTINGS = "memories", "postings"


class IndexRepairer:
    """Mends term index damage left by versions before session 31, and stays safe to run on a
    healthy index while the service runs (every write is one the service itself makes, conditional
    and exactly once).

    1. Memories: each indexed memory's postings are where its status says and carry what it says.
       Committed ``active`` with its postings on the history side (recall never found it), or
       retired with them on the current side: they move. On the right side with another status,
       end or successor: they are written again. (One read per memory: the first posting of each
       of its chunks, on both sides; a chunk is always written whole.)
    2. Postings: each posting has a memory that should have it. Of no memory item and no index
       marker (an index that never finished, before markers existed), of a forgotten or replaced
       memory, or a duplicate on the wrong side of a memory whose postings are on the right one:
       erased with its document frequency, and the counters left at zero deleted. A posting
       whose memory has a marker (an index under way, or the purge's to erase) is left alone.

    The scans read ``page`` items at a time; ``max_items`` bounds the items one run reads, and
    it then returns a cursor to resume from (``RepairStats.cursor``)."""

    def __init__(self, store: IndexRepairStore, page: int = 100) -> None:
        self._store = store
        self._page = page

    def repair(
        self,
        project: ProjectId | None = None,
        cursor: str | None = None,
        max_items: int | None = None,
        progress: Callable[[RepairStats], None] | None = None,
    ) -> RepairStats:
        stats = RepairStats()
        phase, _, token = (cursor or _MEMORIES).partition(":")
        start: str | None = token or None
        page = self._page if max_items is None else max(1, min(self._page, max_items))
        read = 0  # items the scans evaluated (what they cost), of any project
        while True:
            if max_items is not None and read >= max_items:
                stats.cursor = f"{phase}:{start or ''}"
                return stats
            if phase == _MEMORIES:
                memories, start = self._store.memory_page(project, start, page)
                for memory in memories:
                    self._repair_memory(memory, stats)
            elif phase == _POSTINGS:
                refs, start = self._store.posting_page(project, start, page)
                self._repair_postings(refs, stats)
            else:
                raise ValueError(f"not a cursor of the index repair: {cursor!r}")
            read += page
            if progress is not None:
                progress(stats)
            if start is None:
                if phase == _POSTINGS:
                    return stats
                phase = _POSTINGS

    def _repair_memory(self, memory: MemoryRecord, stats: RepairStats) -> None:
        stats.memories += 1
        if not _indexed(memory):
            return
        wanted = memory_side(memory)
        assert wanted is not None
        other = "h" if wanted == "c" else "c"
        plan = memory_plan(memory)
        expected = [encode_posting(posting_of(memory, chunk[0], plan.dl)) for chunk in plan.chunks() if chunk]
        heads = self._store.chunk_heads(memory)
        stranded = [
            n for n in range(len(expected)) if heads[other][n] is not None and heads[wanted][n] is None
        ]
        if stranded:
            self._store.move_postings(memory, other, wanted)  # moves with the values it carries now
            stats.moved += 1
        elif any(
            stored is not None and stored != want
            for stored, want in zip(heads[wanted], expected, strict=True)
        ):
            self._store.restate_postings(memory, wanted)
            stats.restated += 1

    def _repair_postings(self, refs: Sequence[PostingRef], stats: RepairStats) -> None:
        stats.postings += len(refs)
        by_project: dict[str, list[PostingRef]] = {}
        for ref in refs:
            by_project.setdefault(ref.project_id, []).append(ref)
        for owner, owned in by_project.items():
            project = ProjectId(owner)
            ids = {ref.memory_id for ref in owned}
            memories = self._store.get_many(project, ids)
            marked = self._store.markers(project, ids - memories.keys())
            orphans: list[PostingRef] = []
            misplaced: list[tuple[PostingRef, PostingRef]] = []
            removed: set[str] = set()
            for ref in owned:
                memory = memories.get(ref.memory_id)
                if memory is None:
                    if ref.memory_id not in marked:
                        orphans.append(ref)
                    continue
                side = memory_side(memory) if memory.content is not None else None
                if side is None:
                    if (
                        memory.status == "tombstoned"
                        and memory.content is not None
                        and memory.id not in removed
                    ):
                        removed.add(memory.id)
                        # Its forget's own removal first (corpus counts and all); what it leaves is
                        # erased below (a posting gone already is skipped, not counted twice).
                        self._store.remove_from_index(memory)
                    orphans.append(ref)
                elif ref.side != side:
                    misplaced.append((ref, ref._replace(side=side)))
            if misplaced:
                twins = self._store.existing([twin for _, twin in misplaced])
                orphans += [ref for ref, twin in misplaced if twin in twins]
                stats.left += sum(1 for _, twin in misplaced if twin not in twins)
            if orphans:
                self._store.erase_postings(orphans)
                stats.orphans += len(orphans)


def _indexed(memory: MemoryRecord) -> bool:
    return memory.content is not None and memory.status != "staged" and memory_side(memory) is not None
