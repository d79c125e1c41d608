"""Reading memories by id (``GET /v1/memories/{id}``; explain will follow their links)."""

from __future__ import annotations

from typing import Protocol

from kaibo_core.errors import NotFoundError
from kaibo_core.models.memories import MemoryRecord
from kaibo_core.storage_keys import ProjectId


class MemoryGetter(Protocol):
    def get(self, project: ProjectId, memory_id: str) -> MemoryRecord | None: ...


class MemoriesService:
    def __init__(self, store: MemoryGetter) -> None:
        self._store = store

    def get(self, project: ProjectId, memory_id: str) -> MemoryRecord:
        # Another project's id answers exactly like an id that does not exist: the key holds the project.
        memory = self._store.get(project, memory_id) if memory_id.startswith("mem_") else None
        if memory is None:
            raise NotFoundError(
                "memory_not_found",
                f"No memory {memory_id!r} in this project.",
                {"memoryId": memory_id},
            )
        return memory
