"""Re-indexing by meaning: every memory placed by the model recall uses now.

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

from kaibo_core.core.indexing import memory_side
from kaibo_core.core.storage_keys import ProjectId

if TYPE_CHECKING:
    from kaibo_core.core.models.memories import MemoryRecord, SemanticPlacement
    from kaibo_core.ports import PlacementStore
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


def _indexed(memory: MemoryRecord) -> bool:
    return memory.content is not None and memory.status != "staged" and memory_side(memory) is not None
