"""The sweeper's policy (kaibo_core.services.sweeping), with an in-memory list of pending jobs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from kaibo_core.core import ids
from kaibo_core.core.clock import format_instant, parse_instant
from kaibo_core.core.models.jobs import PendingJob
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.services.sweeping import (
    MAX_SWEEP_WAIT,
    SEND_BATCH,
    next_since,
    sweep,
)

T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
SWEEP_AFTER = timedelta(seconds=120)
PROJECT = ProjectId("prj_01J0000000000000000000000A")


def job_id_at(moment: datetime, monkeypatch: pytest.MonkeyPatch) -> str:
    nanoseconds = int(moment.replace(microsecond=0).timestamp()) * 1_000_000_000 + moment.microsecond * 1000
    monkeypatch.setattr("kaibo_core.core.ids.time.time_ns", lambda: nanoseconds)
    made = ids.job_id()
    monkeypatch.undo()
    return made


@dataclass
class FakePendingJobs:
    """job id → its instant in the sweeper's list; finished jobs are gone from it."""

    since: dict[str, datetime] = field(default_factory=dict)
    refuse: set[str] = field(default_factory=set)  # finished or moved by someone else meanwhile

    def pending_before(self, cutoff: datetime, limit: int) -> Iterator[PendingJob]:
        due = sorted((at, job) for job, at in self.since.items() if at < cutoff)
        for at, job in due[:limit]:
            yield PendingJob(PROJECT, job, format_instant(at))

    def postpone(self, job: PendingJob, since: datetime) -> bool:
        if job.job_id in self.refuse or format_instant(self.since[job.job_id]) != job.since:
            return False
        self.since[job.job_id] = since
        return True


@dataclass
class FakeQueue:
    sent: list[list[str]] = field(default_factory=list)  # job ids, per batch

    def send_many(self, jobs: list[tuple[ProjectId, str]]) -> int:
        self.sent.append([job_id for _, job_id in jobs])
        return len(jobs)


def test_an_id_tells_when_it_was_issued_to_the_millisecond(monkeypatch: pytest.MonkeyPatch) -> None:
    moment = datetime(2026, 11, 30, 9, 15, 42, 123_000, tzinfo=UTC)
    assert ids.issued_at(job_id_at(moment, monkeypatch)) == moment


@pytest.mark.parametrize("bad", ["", "job_", "job_0123", "job_" + "!" * 26, "nounderscore"])
def test_a_text_that_is_not_an_id_has_no_issue_time(bad: str) -> None:
    with pytest.raises(ValueError, match="not a Kaibo id"):
        ids.issued_at(bad)


def test_a_requeued_job_is_due_again_after_as_long_as_its_age() -> None:
    for age, due_after in (
        (timedelta(seconds=90), SWEEP_AFTER),  # never less than sweep_after
        (timedelta(seconds=130), timedelta(seconds=130)),
        (timedelta(minutes=40), timedelta(minutes=40)),
        (timedelta(days=2), MAX_SWEEP_WAIT),
    ):
        now = T0 + age
        since = next_since(now, T0, SWEEP_AFTER)
        assert since + SWEEP_AFTER == now + due_after, age


def test_a_job_that_stays_unfinished_is_requeued_at_doubling_intervals_not_every_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A backlog (or a crashing worker) keeps a job pending for 3 hours; the sweeper runs every
    minute. One message per run would be 178; doubling gives one each time the job's age has
    about doubled (a run finds it due the minute after)."""
    job = job_id_at(T0, monkeypatch)
    jobs, queue = FakePendingJobs({job: T0}), FakeQueue()
    requeued_at: list[timedelta] = []
    for minute in range(1, 181):
        now = T0 + timedelta(minutes=minute)
        result = sweep(jobs, queue, now=now, sweep_after=SWEEP_AFTER, limit=500, has_time=lambda: True)
        if result.sent:
            requeued_at.append(now - T0)

    assert [int(at / timedelta(minutes=1)) for at in requeued_at] == [3, 7, 15, 31, 63, 127]


def test_due_jobs_are_claimed_then_sent_in_batches_and_refused_claims_are_not_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = [job_id_at(T0 + timedelta(milliseconds=i), monkeypatch) for i in range(25)]
    jobs = FakePendingJobs({job: T0 + timedelta(milliseconds=i) for i, job in enumerate(made)})
    jobs.refuse = {made[3]}  # finished between the read and the claim
    queue = FakeQueue()
    now = T0 + timedelta(minutes=5)

    result = sweep(jobs, queue, now=now, sweep_after=SWEEP_AFTER, limit=500, has_time=lambda: True)

    assert (result.due, result.claimed, result.sent, result.complete) == (25, 24, 24, True)
    assert [len(batch) for batch in queue.sent] == [SEND_BATCH - 1, SEND_BATCH, 5]
    assert made[3] not in {job for batch in queue.sent for job in batch}
    assert jobs.since[made[4]] == next_since(now, T0 + timedelta(milliseconds=4), SWEEP_AFTER)
    assert jobs.since[made[3]] == T0 + timedelta(milliseconds=3)  # untouched


def test_a_run_short_of_time_stops_between_batches_and_the_next_run_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = [job_id_at(T0, monkeypatch) for _ in range(25)]
    jobs, queue = FakePendingJobs(dict.fromkeys(made, T0)), FakeQueue()
    now = T0 + timedelta(minutes=5)
    budget = iter([True, True, False])

    first = sweep(jobs, queue, now=now, sweep_after=SWEEP_AFTER, limit=500, has_time=lambda: next(budget))
    second = sweep(jobs, queue, now=now, sweep_after=SWEEP_AFTER, limit=500, has_time=lambda: True)

    assert (first.sent, first.complete) == (2 * SEND_BATCH, False)
    assert (second.sent, second.complete) == (5, True)
    assert sorted(job for batch in queue.sent for job in batch) == sorted(made)  # each once


def test_the_stored_instant_round_trips_through_its_text() -> None:
    since = next_since(T0 + timedelta(minutes=7), T0, SWEEP_AFTER)
    assert parse_instant(format_instant(since)) == since
