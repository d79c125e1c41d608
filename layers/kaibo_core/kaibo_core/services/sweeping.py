"""The sweeper's work (functions/sweeper): re-queue structuring jobs whose message may be lost.

A job is written with its events, so an acknowledged event always has one; its message is sent
after the commit and can be lost (SQS unreachable then, a worker that crashed). Every unfinished
job has a place in the sweeper's list (the sparse PendingJobs index), sorted by an instant: when
it was created, at first. The sweeper re-queues the jobs whose instant is older than
``sweep_after``.

It cannot tell a lost message from one still waiting in a long queue, so each re-queue moves the
job's instant on, and its next wait doubles with its age: a job re-queued at age A is due again
A later, so one that stays unfinished (a backlog, a worker that keeps crashing) gets a message
about ``sweep_after``, 2x, 4x ... after remember, never one per run, and at most one every
``MAX_SWEEP_WAIT``. A re-queue is claimed first (the move is conditioned on the instant read),
so two sweepers never both send one. Structuring is idempotent: a duplicate message costs one
job read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice
from typing import Final

from kaibo_core.core.ids import issued_at
from kaibo_core.core.models.jobs import PendingJob
from kaibo_core.ports import JobRequeue, PendingJobs

#: The longest a job that stays unfinished waits between two re-queues.
MAX_SWEEP_WAIT: Final = timedelta(hours=6)
#: Re-queued per batch of messages (SQS's SendMessageBatch limit).
SEND_BATCH: Final = 10


@dataclass(frozen=True, slots=True)
class SweepResult:
    due: int  # jobs found due (those seen before the time ran out)
    claimed: int  # of which this run moved on (the others finished or moved meanwhile)
    sent: int  # messages SQS accepted
    complete: bool  # False if the run stopped for lack of time (the next run goes on)


def next_since(now: datetime, created: datetime, sweep_after: timedelta) -> datetime:
    """The instant to store for a job re-queued at ``now``: due again at ``now`` plus its age
    (at least ``sweep_after``, at most ``MAX_SWEEP_WAIT``)."""
    wait = min(max(now - created, sweep_after), MAX_SWEEP_WAIT)
    return now + wait - sweep_after


def sweep(
    jobs: PendingJobs,
    queue: JobRequeue,
    *,
    now: datetime,
    sweep_after: timedelta,
    limit: int,
    has_time: Callable[[], bool],
) -> SweepResult:
    """Re-queue the due jobs (at most ``limit`` per shard), in batches, while ``has_time()``."""
    due = claimed = sent = 0
    pending = iter(jobs.pending_before(now - sweep_after, limit))
    while True:
        if not has_time():
            return SweepResult(due, claimed, sent, complete=False)
        batch = list(islice(pending, SEND_BATCH))
        if not batch:
            return SweepResult(due, claimed, sent, complete=True)
        due += len(batch)
        mine = list(_claim(jobs, batch, now, sweep_after))
        claimed += len(mine)
        if mine:
            sent += queue.send_many([(job.project, job.job_id) for job in mine])


@dataclass(frozen=True, slots=True)
class Sweeper:
    """The sweeper function's service: ``sweep`` over its own job list and queue."""

    jobs: PendingJobs
    queue: JobRequeue

    def sweep(
        self, *, now: datetime, sweep_after: timedelta, limit: int, has_time: Callable[[], bool]
    ) -> SweepResult:
        return sweep(self.jobs, self.queue, now=now, sweep_after=sweep_after, limit=limit, has_time=has_time)


def _claim(
    jobs: PendingJobs, batch: Iterable[PendingJob], now: datetime, sweep_after: timedelta
) -> Iterator[PendingJob]:
    for job in batch:
        if jobs.postpone(job, next_since(now, issued_at(job.job_id), sweep_after)):
            yield job
