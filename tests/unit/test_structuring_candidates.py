"""The structurer's candidate search (``CandidateFinder``): the best current memories for a
statement, their items read in waves so that a search reads no more items than it needs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from kaibo_core.adapters.memory_memories import InMemoryMemoryStore
from kaibo_core.core.models.memories import MemoryRecord, SourceEventRef
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.structuring.drafts import MAX_CANDIDATES
from kaibo_core.services.structuring import CandidateFinder

PROJECT = ProjectId("prj_candidates")


class CountingStore(InMemoryMemoryStore):
    """The in-memory store, counting the memory items each ``get_many`` reads."""

    def __init__(self) -> None:
        super().__init__()
        self.waves: list[int] = []

    def get_many(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, MemoryRecord]:
        ids = list(memory_ids)
        self.waves.append(len(ids))
        return super().get_many(project, ids)


def stored(store: CountingStore, count: int) -> list[MemoryRecord]:
    """``count`` active memories about the release target, the first the best match (shortest)."""
    memories = []
    for number in range(count):
        padding = " and more" * number  # longer texts score lower for the same terms
        memory = MemoryRecord(
            project_id=PROJECT,
            id=f"mem_{number:026d}",
            status="active",
            type="fact",
            content=f"The release target is July {number + 1}{padding}.",
            valid_from="2026-06-01T09:00:00.000Z",
            valid_to=None,
            confidence=0.8,
            stream="chat-1",
            source_events=(SourceEventRef(f"evt_{number:026d}", "chat-1", number + 1, "ab" * 32),),
            created_at="2026-06-01T09:00:00.000Z",
        )
        assert store.index_new(memory)
        memories.append(memory)
    return memories


def test_given_current_best_matches_then_one_wave_reads_only_the_candidates_returned() -> None:
    store = CountingStore()
    memories = stored(store, 25)

    found = CandidateFinder(store, store).search(PROJECT, "release target", frozenset())

    assert [c.memory_id for c in found] == [m.id for m in memories[:MAX_CANDIDATES]]
    assert store.waves == [MAX_CANDIDATES]


def test_given_retired_best_matches_then_a_second_wave_reads_just_enough_to_replace_them() -> None:
    store = CountingStore()
    memories = stored(store, 25)
    for retired in memories[:3]:  # superseded since their postings were read: postings are hints
        store.replace(replace(retired, status="superseded"))

    found = CandidateFinder(store, store).search(PROJECT, "release target", frozenset())

    assert [c.memory_id for c in found] == [m.id for m in memories[3 : 3 + MAX_CANDIDATES]]
    assert store.waves == [MAX_CANDIDATES, 3]


def test_given_fewer_current_memories_than_candidates_then_waves_stop_at_the_postings_read() -> None:
    store = CountingStore()
    memories = stored(store, 12)
    for retired in memories[:6]:
        store.replace(replace(retired, status="superseded"))

    found = CandidateFinder(store, store).search(PROJECT, "release target", frozenset())

    assert [c.memory_id for c in found] == [m.id for m in memories[6:]]
    assert store.waves == [MAX_CANDIDATES, 2]
