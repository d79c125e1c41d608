"""Structuring jobs: one per remember call that appended events (API.md, ``GET /v1/jobs/{jobId}``).

Statuses::

    queued -> structuring -> done
                          -> failed   (after MAX_JOB_ATTEMPTS; the message is then in the DLQ)

The job item is written in the same transaction as its events, so an acknowledged
event always has a job, and a job that is not ``done`` is what the sweeper re-queues.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from kaibo_core.core.storage_keys import ProjectId

JobStatus = Literal["queued", "structuring", "done", "failed"]
#: Attempts at a job before it is marked failed (the queue's maxReceiveCount agrees).
MAX_JOB_ATTEMPTS: Final = 5


@dataclass(frozen=True, slots=True)
class EventLocation:
    event_id: str
    stream: str
    seq: int


@dataclass(frozen=True, slots=True)
class JobRecord:
    project_id: str
    id: str
    status: JobStatus
    events: tuple[EventLocation, ...]
    created_at: str
    updated_at: str
    memory_ids: tuple[str, ...] = ()
    attempts: int = 0
    error: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def event_ids(self) -> tuple[str, ...]:
        return tuple(location.event_id for location in self.events)


@dataclass(frozen=True, slots=True)
class PendingJob:
    """An unfinished job as the sweeper's list (the PendingJobs index) holds it."""

    project: ProjectId
    job_id: str
    since: str  # the instant of its place in the list, as stored (RFC 3339, UTC)
