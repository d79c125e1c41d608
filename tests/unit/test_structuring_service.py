"""Structuring over the in-memory stores (kaibo_core.runtime.embedded): provisional memories replaced by
structured ones (never both, never neither), supersede/cancel links both ways, ordering by
occurredAt, idempotent redelivery, forgotten events refused, explain, jobs."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from kaibo_core.core.models.jobs import MAX_RECEIVE_COUNT
from kaibo_core.core.models.memories import MemoryRecord
from kaibo_core.core.provisional import provisional_memory_id
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.runtime.embedded import EmbeddedKaibo
from kaibo_core.services.recall import one_of_each_pair
from tests.fixtures.scripted_structurer import ScriptedStructurer

PROJECT = ProjectId("prj_structuring")
NOW = datetime(2026, 7, 1, 12, 0, tzinfo=UTC)


def event(key: str, text: str, occurred: str, **extra: Any) -> dict[str, Any]:
    return {
        "idempotencyKey": key,
        "kind": "message",
        "payload": {"role": "user", "text": text},
        "occurredAt": occurred,
        **extra,
    }


def remember(kaibo: EmbeddedKaibo, *events: dict[str, Any], stream: str = "chat-1") -> tuple[str, list[str]]:
    outcome = kaibo.remember(PROJECT, {"stream": stream, "events": list(events)})
    assert outcome.job_id is not None
    return outcome.job_id, [provisional_memory_id(e.record.id) for e in outcome.events]


def memory(kaibo: EmbeddedKaibo, memory_id: str) -> MemoryRecord:
    found = kaibo.memories.get(PROJECT, memory_id)
    assert found is not None, memory_id
    return found


def texts(answer: dict[str, Any]) -> list[str]:
    return [item["text"] for item in answer["items"]]


def two_superseders_of_one_fact(kaibo: EmbeddedKaibo) -> str:
    """A structured fact, and two later events that both name it as what they supersede (not yet
    structured). Returns the fact's id."""
    remember(kaibo, event("k1", "The release target is July 13", "2026-06-01T09:00:00Z"))
    kaibo.structure_pending()
    original: str = kaibo.recall(PROJECT, {"question": "release target"})["items"][0]["memoryId"]
    for key, text, day in (("k2", "July 17", "02"), ("k3", "July 20", "03")):
        remember(
            kaibo,
            event(key, f"The release target is {text}", f"2026-06-{day}T09:00:00Z", supersedes=[original]),
        )
    return original


@pytest.fixture
def kaibo() -> EmbeddedKaibo:
    return EmbeddedKaibo(ScriptedStructurer(), clock=lambda: NOW)


def test_given_a_remembered_event_when_structured_then_its_provisional_memory_is_replaced(
    kaibo: EmbeddedKaibo,
) -> None:
    job_id, (provisional_id,) = remember(
        kaibo, event("k1", "The release target is July 13", "2026-06-01T09:00:00Z")
    )
    assert kaibo.jobs.get(PROJECT, job_id).status == "queued"  # type: ignore[union-attr]
    assert texts(kaibo.recall(PROJECT, {"question": "release target"})) == ["The release target is July 13"]

    kaibo.structure_pending()

    provisional = memory(kaibo, provisional_id)
    (structured_id,) = provisional.replaced_by
    structured = memory(kaibo, structured_id)
    assert provisional.status == "replaced"
    assert (structured.status, structured.type, structured.replaces) == ("active", "fact", provisional_id)
    assert structured.source_events == provisional.source_events
    job = kaibo.jobs.get(PROJECT, job_id)
    assert job is not None
    assert (job.status, job.memory_ids) == ("done", (structured_id,))
    answer = kaibo.recall(PROJECT, {"question": "release target"})
    assert [item["memoryId"] for item in answer["items"]] == [structured_id]
    assert kaibo.memories.corpus[PROJECT].docs == 1  # the replaced copy left the index


def test_given_memories_this_run_staged_then_their_postings_are_not_read_back_but_a_redelivery_s_are(
    kaibo: EmbeddedKaibo, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[list[str]] = []
    read = kaibo.memories.posted_records

    def counted(project: ProjectId, memory_ids: Iterable[str]) -> dict[str, str | None]:
        asked.append(list(memory_ids))
        return read(project, memory_ids)

    monkeypatch.setattr(kaibo.memories, "posted_records", counted)
    job_id, _ = remember(kaibo, event("k1", "The release target is July 13", "2026-06-01T09:00:00Z"))
    first = kaibo.structure(PROJECT, job_id)
    assert asked == []  # staged by this run: it knows the side (one read per event saved)

    kaibo.jobs.jobs[(PROJECT, job_id)] = replace(kaibo.jobs.jobs[(PROJECT, job_id)], status="queued")
    kaibo.structure(PROJECT, job_id)
    assert asked == [list(first.memory_ids)]  # another run staged them: read back


def test_given_a_job_delivered_again_when_structured_then_nothing_is_made_or_counted_twice(
    kaibo: EmbeddedKaibo,
) -> None:
    job_id, _ = remember(kaibo, event("k1", "The release target is July 13", "2026-06-01T09:00:00Z"))
    first = kaibo.structure(PROJECT, job_id)
    kaibo.jobs.jobs[(PROJECT, job_id)] = replace(kaibo.jobs.jobs[(PROJECT, job_id)], status="queued")
    again = kaibo.structure(PROJECT, job_id)
    assert again.memory_ids == first.memory_ids
    assert again.memories == 0
    assert again.replays == 1
    assert (first.newly_structured_events, again.newly_structured_events) == (1, 0)
    assert kaibo.memories.corpus[PROJECT].docs == 1


def test_given_a_structurer_that_answers_differently_each_time_then_the_first_stored_plan_wins() -> None:
    structurer = ScriptedStructurer()
    kaibo = EmbeddedKaibo(structurer, clock=lambda: NOW)
    _, (provisional_id,) = remember(kaibo, event("k1", "Ship on Friday", "2026-06-01T09:00:00Z"))
    event_record = kaibo.events.get_events(PROJECT, [("chat-1", 1)])[0]
    plan_before = kaibo.structuring._plan(PROJECT, event_record, memory(kaibo, provisional_id))
    structurer.variant = 7  # a second worker's model says something else
    kaibo.structure_pending()
    (structured_id,) = memory(kaibo, provisional_id).replaced_by
    assert plan_before is not None
    assert memory(kaibo, structured_id).content == plan_before[0].content == "Ship on Friday"


def test_given_an_explicit_supersedes_then_the_old_memory_is_retired_and_linked_both_ways(
    kaibo: EmbeddedKaibo,
) -> None:
    remember(kaibo, event("k1", "The release target is July 13", "2026-06-01T09:00:00Z"))
    kaibo.structure_pending()
    old_id = kaibo.recall(PROJECT, {"question": "release target"})["items"][0]["memoryId"]
    remember(kaibo, event("k2", "The release target is July 17", "2026-06-02T09:30:00Z", supersedes=[old_id]))
    stats = kaibo.structure_pending()

    old = memory(kaibo, old_id)
    (new_id,) = old.superseded_by
    new = memory(kaibo, new_id)
    assert stats.superseded == 1
    assert (old.status, old.valid_to) == ("superseded", new.valid_from)
    assert new.supersedes == (old_id,)
    assert new.status == "active"
    assert texts(kaibo.recall(PROJECT, {"question": "release target"})) == ["The release target is July 17"]
    past = kaibo.recall(PROJECT, {"question": "release target", "asOf": "2026-06-01T12:00:00Z"})
    assert texts(past) == ["The release target is July 13"]
    # Its postings moved to the history side: at asOf=now the current side no longer holds it.
    assert all(
        old_id not in entries for (_, side, _), entries in kaibo.memories.postings.items() if side == "c"
    )


def test_given_a_cancel_then_the_old_memory_is_canceled(kaibo: EmbeddedKaibo) -> None:
    remember(kaibo, event("k1", "Design review on Friday", "2026-06-01T09:00:00Z"))
    kaibo.structure_pending()
    old_id = kaibo.recall(PROJECT, {"question": "design review"})["items"][0]["memoryId"]
    remember(kaibo, event("k2", "The design review is off", "2026-06-02T09:00:00Z", cancels=[old_id]))
    assert kaibo.structure_pending().canceled == 1
    assert memory(kaibo, old_id).status == "canceled"
    assert texts(kaibo.recall(PROJECT, {"question": "design review"})) == ["The design review is off"]


def test_given_an_older_statement_arriving_late_then_it_becomes_history_and_never_replaces_the_newer(
    kaibo: EmbeddedKaibo,
) -> None:
    remember(kaibo, event("k2", "The release target is July 17", "2026-06-02T09:30:00Z"))
    kaibo.structure_pending()
    newer_id = kaibo.recall(PROJECT, {"question": "release target"})["items"][0]["memoryId"]
    # Backfilled later: said before the newer statement, and it names the same subject.
    remember(kaibo, event("k1", "Actually the release target is July 13", "2026-06-01T09:00:00Z"))
    assert kaibo.structure_pending().filed_as_history == 1

    newer = memory(kaibo, newer_id)
    (older_id,) = newer.supersedes
    older = memory(kaibo, older_id)
    assert newer.status == "active"
    assert newer.valid_to is None
    assert (older.status, older.valid_to, older.superseded_by) == (
        "superseded",
        newer.valid_from,
        (newer_id,),
    )
    assert texts(kaibo.recall(PROJECT, {"question": "release target"})) == ["The release target is July 17"]


def test_given_two_racing_superseders_of_one_memory_then_one_wins_and_the_other_re_resolves(
    kaibo: EmbeddedKaibo,
) -> None:
    # Both name the original: the second, structured after the first won, re-resolves to the winner.
    original = two_superseders_of_one_fact(kaibo)
    kaibo.structure_pending()

    first = memory(kaibo, original)
    (second_id,) = first.superseded_by
    second = memory(kaibo, second_id)
    (third_id,) = second.superseded_by
    third = memory(kaibo, third_id)
    assert [first.status, second.status, third.status] == ["superseded", "superseded", "active"]
    assert third.supersedes == (second_id,)
    explained = kaibo.explain(PROJECT, third_id)["chain"]
    structured = [v for v in explained if v["status"] != "replaced"]
    assert [v["memoryId"] for v in structured] == [original, second_id, third_id]
    assert [v["validFrom"][:10] for v in structured] == ["2026-06-01", "2026-06-02", "2026-06-03"]
    assert explained[-1]["memoryId"] == third_id
    assert explained[-1]["sourceEvents"][0]["seq"] == 3


def test_given_a_superseder_whose_commit_conflicts_then_it_re_resolves_against_the_winner(
    kaibo: EmbeddedKaibo,
) -> None:
    original = two_superseders_of_one_fact(kaibo)
    (_, second_job), (_, third_job) = kaibo.queue.sent
    store = kaibo.memories
    commit = store.commit
    raced: list[bool] = []

    def commit_after_a_rival(project: ProjectId, change: Any, *rest: Any) -> Any:
        if not raced and change.retire:  # the third's commit: let the second win just before it
            raced.append(True)
            kaibo.structure(PROJECT, second_job)
        return commit(project, change, *rest)

    store.commit = commit_after_a_rival  # type: ignore[method-assign,assignment]
    stats = kaibo.structure(PROJECT, third_job)
    assert stats.conflicts == 1
    assert stats.superseded == 1
    assert memory(kaibo, original).status == "superseded"
    assert len(memory(kaibo, original).superseded_by) == 1  # retired once


def test_given_a_forgotten_event_when_structuring_then_nothing_is_switched_on(kaibo: EmbeddedKaibo) -> None:
    job_id, (provisional_id,) = remember(kaibo, event("k1", "My card PIN is 1234", "2026-06-01T09:00:00Z"))
    provisional = memory(kaibo, provisional_id)
    kaibo.memories.replace(
        replace(provisional, status="tombstoned", content=None)
    )  # forget, before structuring
    stats = kaibo.structure(PROJECT, job_id)
    assert stats.refused == 1
    assert stats.memory_ids == []
    assert [m for (_, _), m in kaibo.memories.memories.items() if m.status in {"active", "staged"}] == []


def test_given_a_forget_between_staging_and_commit_then_the_commit_is_refused_and_the_staged_one_tombstoned(
    kaibo: EmbeddedKaibo,
) -> None:
    job_id, (provisional_id,) = remember(kaibo, event("k1", "My card PIN is 1234", "2026-06-01T09:00:00Z"))
    store = kaibo.memories
    stage = store.stage

    def stage_then_forget(staged: MemoryRecord) -> bool:
        done = stage(staged)
        store.replace(replace(memory(kaibo, provisional_id), status="tombstoned", content=None))
        return done

    store.stage = stage_then_forget  # type: ignore[method-assign,assignment]
    assert kaibo.structure(PROJECT, job_id).refused == 1
    left = [m for m in store.memories.values() if m.id != provisional_id]
    # Tombstoned, never served; its text stays for the purge of the event's ledger entry, which
    # needs it to find the postings a staged memory already has.
    assert [m.status for m in left] == ["tombstoned"]
    assert kaibo.recall(PROJECT, {"question": "card PIN"})["abstain"]["abstained"] is True


def test_given_failures_before_the_last_receive_then_the_job_is_never_failed_however_many(
    kaibo: EmbeddedKaibo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweeper's re-queues are messages of their own: deliveries of different messages never
    add up to a failed job (each message fails the job only on its own last receive)."""
    job_id, _ = remember(kaibo, event("k1", "Ship it", "2026-06-01T09:00:00Z"))
    structure_event = kaibo.structuring.structure_event

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("store down")

    monkeypatch.setattr(kaibo.structuring, "structure_event", broken)
    for _ in range(3 * MAX_RECEIVE_COUNT):
        with pytest.raises(RuntimeError):
            kaibo.structure(PROJECT, job_id)
        job = kaibo.jobs.get(PROJECT, job_id)
        assert job is not None
        assert job.status == "structuring"
    monkeypatch.setattr(kaibo.structuring, "structure_event", structure_event)

    assert kaibo.structure(PROJECT, job_id).events == 1
    job = kaibo.jobs.get(PROJECT, job_id)
    assert job is not None
    assert job.status == "done"


def test_given_a_failure_on_the_last_receive_then_the_job_is_failed_and_its_redrive_structures_it(
    kaibo: EmbeddedKaibo, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id, _ = remember(kaibo, event("k1", "Ship it", "2026-06-01T09:00:00Z"))
    structure_event = kaibo.structuring.structure_event

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("store down")

    monkeypatch.setattr(kaibo.structuring, "structure_event", broken)
    with pytest.raises(RuntimeError):
        kaibo.structure(PROJECT, job_id, last_receive=True)
    failed = kaibo.jobs.get(PROJECT, job_id)
    assert failed is not None
    assert (failed.status, failed.error) == ("failed", "structuring failed: RuntimeError")
    monkeypatch.setattr(kaibo.structuring, "structure_event", structure_event)

    assert kaibo.structure(PROJECT, job_id).events == 1  # the dead letter, redriven
    done = kaibo.jobs.get(PROJECT, job_id)
    assert done is not None
    assert (done.status, done.error) == ("done", None)
    assert kaibo.structure(PROJECT, job_id, last_receive=True).events == 0  # done: nothing twice


def test_given_a_replayed_batch_then_remember_returns_the_original_job(kaibo: EmbeddedKaibo) -> None:
    job_id, _ = remember(kaibo, event("k1", "Ship it", "2026-06-01T09:00:00Z"))
    replayed = kaibo.remember(
        PROJECT, {"stream": "chat-1", "events": [event("k1", "Ship it", "2026-06-01T09:00:00Z")]}
    )
    assert replayed.job_id == job_id
    assert not replayed.job_created
    assert len(kaibo.queue.sent) == 1


def _pair(provisional_status: str, structured_status: str) -> dict[str, MemoryRecord]:
    base = MemoryRecord(
        project_id=PROJECT,
        id="mem_P",
        status="provisional",
        type="episode",
        content="x",
        valid_from="2026-06-01T09:00:00.000Z",
        valid_to=None,
        confidence=0.5,
        stream="s",
        source_events=(),
        created_at="2026-06-01T09:00:00.000Z",
    )
    provisional = replace(base, status=provisional_status)  # type: ignore[arg-type]
    structured = replace(
        base,
        id="mem_P-1",
        status=structured_status,  # type: ignore[arg-type]
        becomes="active" if structured_status == "staged" else None,
        replaces="mem_P",
    )
    return {m.id: m for m in (provisional, structured)}


@pytest.mark.parametrize(
    ("provisional_status", "structured_status"),
    list(itertools.product(["provisional", "replaced"], ["staged", "active"])),
)
def test_given_any_interleaving_of_the_switch_and_a_batch_read_then_exactly_one_of_the_pair_shows(
    provisional_status: str, structured_status: str
) -> None:
    """Each item is read before or after the switch: the pair is never both and never neither."""
    seen = one_of_each_pair(_pair(provisional_status, structured_status))
    shown = [m.id for m in seen.values() if m.status in {"provisional", "active"}]
    assert len(shown) == 1, (provisional_status, structured_status, shown)


def test_given_a_later_statement_winning_the_race_then_the_earlier_one_re_resolves_into_history(
    kaibo: EmbeddedKaibo,
) -> None:
    """k2 (June 2) stages as the new current fact, but k3 (June 3) commits first: k2's second
    round files it behind k3 — its final state (not the staged one) is what the commit writes."""
    original = two_superseders_of_one_fact(kaibo)
    (_, second_job), (_, third_job) = kaibo.queue.sent
    store = kaibo.memories
    commit = store.commit
    raced: list[bool] = []

    def rival_commits_first(project: ProjectId, change: Any, *rest: Any) -> Any:
        if not raced:
            raced.append(True)
            kaibo.structure(PROJECT, third_job)
        return commit(project, change, *rest)

    store.commit = rival_commits_first  # type: ignore[method-assign,assignment]
    stats = kaibo.structure(PROJECT, second_job)
    assert stats.conflicts == 1
    assert stats.filed_as_history == 1
    third_id = memory(kaibo, original).superseded_by[-1]
    third = memory(kaibo, third_id)
    (second_id,) = [m for m in third.supersedes if m != original]
    second = memory(kaibo, second_id)
    assert (second.status, second.valid_to, second.superseded_by) == (
        "superseded",
        third.valid_from,
        (third_id,),
    )
    assert second.supersedes == ()  # its staged link to the original was dropped on re-resolution
    assert third.status == "active"
    # Its postings went to the history side with the final validTo.
    history = [
        p
        for (_, side, _), entries in store.postings.items()
        if side == "h"
        for m, (_, p) in entries.items()
        if m == second_id
    ]
    assert history
    assert all(p.valid_to_ms is not None for p in history)


@pytest.mark.parametrize(
    ("event_zone", "project_zone", "resolved"),
    [
        (None, None, "June 3, 2026"),  # the documented default: UTC
        (None, "Asia/Tokyo", "June 4, 2026"),  # already June 3 in Tokyo: tomorrow is the 4th
        ("America/Los_Angeles", "Asia/Tokyo", "June 3, 2026"),  # the event's own zone wins
    ],
)
def test_given_time_zones_then_tomorrow_resolves_in_the_event_then_project_then_default_zone(
    event_zone: str | None, project_zone: str | None, resolved: str
) -> None:
    from kaibo_core.core.structuring.rules import RuleStructurer

    zones: dict[str, str] = {PROJECT: project_zone} if project_zone else {}
    kaibo = EmbeddedKaibo(RuleStructurer(), clock=lambda: NOW, project_time_zones=zones)
    extra = {"timeZone": event_zone} if event_zone else {}
    remember(kaibo, event("k1", "The demo is tomorrow", "2026-06-02T23:30:00Z", **extra))
    (memory_id,) = kaibo.structure_pending().memory_ids
    assert resolved in (memory(kaibo, memory_id).content or "")
