"""The whole service in one process, in memory: remember, structure, recall, explain.

What tests and benchmarks drive when they need the pipeline's behaviour without the
emulator: the same services over the in-memory stores, with a job queue that only
records job ids until ``structure_pending`` (or ``structure(job_id)``) runs them, so a
test decides the order and the timing of structuring.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kaibo_core.adapters.memory_events import InMemoryEventStore
from kaibo_core.adapters.memory_jobs import InMemoryJobStore
from kaibo_core.adapters.memory_memories import InMemoryMemoryStore
from kaibo_core.api import mapping
from kaibo_core.api.models import RecallRequest, RememberRequest
from kaibo_core.core.clock import Clock, utc_now
from kaibo_core.core.models.events import RememberOutcome
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.ports import Structurer
from kaibo_core.services.memories import MemoriesService
from kaibo_core.services.recall import RecallParams, RecallService
from kaibo_core.services.remember import RememberService
from kaibo_core.services.semantic import SemanticChannel
from kaibo_core.services.structuring import StructuringService, StructuringStats


@dataclass
class RecordingQueue:
    sent: list[tuple[ProjectId, str]] = field(default_factory=list)

    def send(self, project: ProjectId, job_id: str) -> None:
        self.sent.append((project, job_id))


class EmbeddedKaibo:
    def __init__(
        self,
        structurer: Structurer,
        clock: Clock = utc_now,
        recall_params: RecallParams | None = None,
        project_time_zones: dict[str, str] | None = None,
        semantic: SemanticChannel | None = None,
    ) -> None:
        self.events = InMemoryEventStore()
        self.memories = InMemoryMemoryStore()
        self.jobs = InMemoryJobStore(self.events.jobs)
        self.queue = RecordingQueue()
        self.clock = clock
        self.remember_service = RememberService(
            self.events,
            self.memories,
            jobs=self.queue,
            clock=self._now,
            sleep=lambda _: None,
            semantic=semantic,
        )
        self.structuring = StructuringService(
            self.events,
            self.memories,
            self.memories,
            structurer,
            clock=self._now,
            project_time_zone=(project_time_zones or {}).get,
            semantic=semantic,
        )
        self.recall_service = RecallService(
            self.memories,
            self.memories,
            clock=self._now,
            params=recall_params,
            semantic=semantic,
            events=self.events,
        )
        self.reader = MemoriesService(self.memories)

    def _now(self) -> datetime:
        return self.clock()  # read at each call: a test may move the clock

    def remember(self, project: ProjectId, body: dict[str, Any]) -> RememberOutcome:
        request = RememberRequest.model_validate(body)
        return self.remember_service.remember(project, request.stream, mapping.new_events(request))

    def structure(self, project: ProjectId, job_id: str, *, last_receive: bool = False) -> StructuringStats:
        """The job's message, delivered (``last_receive``: for the last time before the DLQ)."""
        return self.structuring.structure_job(project, job_id, self.jobs, last_receive=last_receive)

    def structure_pending(
        self, order: Callable[[list[tuple[ProjectId, str]]], list[tuple[ProjectId, str]]] | None = None
    ) -> StructuringStats:
        """Structure every job sent so far (in ``order`` if given), and forget them."""
        pending, self.queue.sent = self.queue.sent, []
        total = StructuringStats()
        for project, job_id in order(pending) if order else pending:
            total.add(self.structure(project, job_id))
        return total

    def recall(self, project: ProjectId, body: dict[str, Any]) -> dict[str, Any]:
        """The JSON ``POST /v1/recall`` answers with."""
        query = mapping.recall_query(RecallRequest.model_validate(body))
        answer, _ = self.recall_service.recall(project, query)
        return mapping.recall_body(answer)

    def explain(self, project: ProjectId, memory_id: str) -> dict[str, Any]:
        """The JSON ``POST /v1/explain`` answers with."""
        return mapping.explain_response(self.reader.explain(project, memory_id)).model_dump(mode="json")
