"""Jobs: reading one (``GET /v1/jobs/{jobId}``) and waiting for one (remember with ``wait``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from kaibo_core.core import deadline as invocation
from kaibo_core.core.errors import NotFoundError
from kaibo_core.core.models.jobs import JobRecord
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.ports import JobReader

#: Polling the job item while waiting: first after this long, then growing to the cap.
FIRST_POLL_SECONDS: Final = 0.05
MAX_POLL_SECONDS: Final = 0.5


class JobsService:
    def __init__(
        self,
        jobs: JobReader,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._jobs = jobs
        self._sleep = sleep
        self._monotonic = monotonic

    def find(self, project: ProjectId, job_id: str) -> JobRecord | None:
        return self._jobs.get(project, job_id) if job_id.startswith("job_") else None

    def get(self, project: ProjectId, job_id: str) -> JobRecord:
        job = self.find(project, job_id)
        if job is None:
            raise NotFoundError("job_not_found", f"No job {job_id!r} in this project.", {"jobId": job_id})
        return job

    def wait(self, project: ProjectId, job_id: str, timeout_seconds: float) -> JobRecord | None:
        """The job once it is finished (``done`` or ``failed``); None if it is not within the timeout."""
        deadline = self._monotonic() + timeout_seconds
        pause = FIRST_POLL_SECONDS
        while True:
            job = self._jobs.get(project, job_id)
            if job is not None and job.status in {"done", "failed"}:
                return job
            remaining = deadline - self._monotonic()
            if remaining <= 0 or not invocation.time_for(min(pause, remaining)):
                return None
            self._sleep(min(pause, remaining))
            pause = min(MAX_POLL_SECONDS, pause * 2)
