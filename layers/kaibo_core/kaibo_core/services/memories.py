"""Reading memories: by id (``GET /v1/memories/{id}``) and their history (``POST /v1/explain``)."""

from __future__ import annotations

from typing import Final

from kaibo_core.core.errors import NotFoundError
from kaibo_core.core.models.memories import STAGED, Explanation, MemoryRecord
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.ports import MemoryGetter

#: explain returns at most this many versions (a longer history is cut at its oldest end).
MAX_EXPLAIN_VERSIONS: Final = 100


def _not_found(memory_id: str) -> NotFoundError:
    return NotFoundError(
        "memory_not_found", f"No memory {memory_id!r} in this project.", {"memoryId": memory_id}
    )


class MemoriesService:
    def __init__(self, store: MemoryGetter) -> None:
        self._store = store

    def get(self, project: ProjectId, memory_id: str) -> MemoryRecord:
        # Another project's id answers exactly like an id that does not exist: the key holds the project.
        # A staged memory (written, not yet switched on) does not exist yet for the API.
        memory = self._store.get(project, memory_id) if memory_id.startswith("mem_") else None
        if memory is None or memory.status == STAGED:
            raise _not_found(memory_id)
        return memory

    def explain(self, project: ProjectId, memory_id: str) -> Explanation:
        """The versions that led to a memory, oldest first, the asked memory last (API.md).

        Walks back along ``supersedes`` links and to the provisional memory a structured one
        replaced, one batch read per step back; each entry says what it superseded.
        """
        asked = self.get(project, memory_id)
        versions: dict[str, MemoryRecord] = {asked.id: asked}
        frontier = _earlier(asked)
        while frontier and len(versions) < MAX_EXPLAIN_VERSIONS:
            wanted = [m for m in dict.fromkeys(frontier) if m not in versions]
            found = self._store.get_many(project, wanted[: MAX_EXPLAIN_VERSIONS - len(versions)])
            frontier = []
            for memory in found.values():
                if memory.status == STAGED:
                    continue
                versions[memory.id] = memory
                frontier.extend(_earlier(memory))
        older = sorted((m for m in versions.values() if m.id != asked.id), key=lambda m: (m.valid_from, m.id))
        return Explanation(asked.id, (*older, asked))


def _earlier(memory: MemoryRecord) -> list[str]:
    return [*memory.supersedes, *([memory.replaces] if memory.replaces else [])]
