"""Structuring jobs: one per remember call that appended events (API.md, ``GET /v1/jobs/{jobId}``).

Statuses::

    queued -> structuring -> done
                          -> failed  -> structuring (redriven, or another message of the job)

``failed``: a message of the job failed on its last receive (MAX_RECEIVE_COUNT), so SQS moves
it to the dead-letter queue. A job is never failed by counting the deliveries of all its
messages (the sweeper's re-queues are messages too), and a failed job is structured by the
next message that names it: a redriven dead letter, or a re-queue still on the queue.

The job item is written in the same transaction as its events, so an acknowledged
event always has a job, and a job still ``queued`` or ``structuring`` is what the sweeper
re-queues.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from kaibo_core.core.storage_keys import ProjectId

JobStatus = Literal["queued", "structuring", "done", "failed"]
#: The structuring queue's maxReceiveCount (template.yaml): receives of one message before SQS moves
#: it to the dead-letter queue. The structure function reads it from its environment
#: (KAIBO_STRUCTURING_MAX_RECEIVE_COUNT); this is the default.
MAX_RECEIVE_COUNT: Final = 5


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
    attempts: int = 0  # deliveries of any of its messages: informative, never decides failure
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
