"""Structuring jobs in memory, with DynamoJobStore's semantics (tests, benchmarks)."""

from __future__ import annotations

import threading
from dataclasses import replace

from kaibo_core.core.models.jobs import JobRecord
from kaibo_core.core.storage_keys import ProjectId


class InMemoryJobStore:
    """``jobs`` may be shared with an InMemoryEventStore, which creates them at append."""

    def __init__(self, jobs: dict[tuple[str, str], JobRecord] | None = None) -> None:
        self._lock = threading.Lock()
        self.jobs: dict[tuple[str, str], JobRecord] = {} if jobs is None else jobs

    def get(self, project: ProjectId, job_id: str) -> JobRecord | None:
        with self._lock:
            return self.jobs.get((project, job_id))

    def start(self, project: ProjectId, job_id: str, now: str) -> JobRecord | None:
        with self._lock:
            job = self.jobs.get((project, job_id))
            if job is None or job.status == "done":
                return None
            started = replace(
                job, status="structuring", attempts=job.attempts + 1, updated_at=now, error=None
            )
            self.jobs[(project, job_id)] = started
            return started

    def finish(self, project: ProjectId, job_id: str, memory_ids: list[str], now: str) -> None:
        with self._lock:
            job = self.jobs[(project, job_id)]
            self.jobs[(project, job_id)] = replace(
                job, status="done", memory_ids=tuple(memory_ids), updated_at=now, error=None
            )

    def fail(self, project: ProjectId, job_id: str, error: str, now: str) -> None:
        with self._lock:
            job = self.jobs.get((project, job_id))
            if job is not None and job.status != "done":
                self.jobs[(project, job_id)] = replace(job, status="failed", error=error, updated_at=now)
