"""remember's service logic against the in-memory log: planning, chaining, replays, retries."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from kaibo_core.adapters.memory_events import InMemoryEventStore
from kaibo_core.api.mapping import new_events, stored_event
from kaibo_core.api.models import RememberRequest
from kaibo_core.core import chain
from kaibo_core.core.errors import (
    ConflictError,
    PayloadTooLargeError,
    TooManyRequestsError,
    UnprocessableError,
)
from kaibo_core.core.limits import MAX_PAYLOAD_BYTES
from kaibo_core.core.models.events import AppendConflictError, EventRecord, NewEvent, StreamHead
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.runtime.embedded import RecordingQueue
from kaibo_core.services.remember import RememberService

PROJECT = ProjectId("prj_01JTEST0000000000000000000")
NOW = datetime(2026, 6, 2, 9, 30, tzinfo=UTC)


def message(key: str, text: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"idempotencyKey": key, "kind": "message", "payload": {"role": "user", "text": text}, **extra}


def request(*events: dict[str, Any], stream: str = "chat-42") -> tuple[str, list[NewEvent]]:
    """The stream and events of a remember body, as the API layer hands them to the service."""
    body = RememberRequest.model_validate({"stream": stream, "events": list(events)})
    return body.stream, new_events(body)


def make_service(
    store: InMemoryEventStore | None = None, **kwargs: Any
) -> tuple[RememberService, InMemoryEventStore]:
    store = store or InMemoryEventStore()
    return RememberService(store, clock=lambda: NOW, sleep=lambda _: None, **kwargs), store


def verify(records: Sequence[EventRecord], stream: str = "chat-42") -> chain.ChainProblem | None:
    verifier = chain.ChainVerifier(stream)
    for record in records:
        verifier.feed(stored_event(record))
    return verifier.finish()


def test_given_new_stream_when_remembering_a_batch_then_seqs_start_at_one_and_chain_verifies() -> None:
    service, store = make_service()
    outcome = service.remember(PROJECT, *request(message("a"), message("b"), message("c")))
    assert [e.record.seq for e in outcome.events] == [1, 2, 3]
    assert outcome.events[0].record.prev_hash == chain.GENESIS_PREV_HASH
    assert [e.replayed for e in outcome.events] == [False, False, False]
    assert verify(store.events[(PROJECT, "chat-42")]) is None


def test_given_events_when_remembering_then_header_commits_to_salted_digest_not_payload() -> None:
    service, _ = make_service()
    record = service.remember(PROJECT, *request(message("a", "secret words"))).events[0].record
    assert "secret words" not in chain.canonicalize(record.header()).decode()
    assert record.salt is not None
    assert record.canonical_payload is not None
    assert record.payload_digest == chain.payload_digest(record.salt, record.canonical_payload.encode())


def test_given_no_occurred_at_when_remembering_then_it_defaults_to_received_time() -> None:
    service, _ = make_service()
    record = service.remember(PROJECT, *request(message("a"))).events[0].record
    assert record.occurred_at == record.received_at == "2026-06-02T09:30:00.000Z"


def test_given_offset_timestamp_when_remembering_then_occurred_at_is_normalized_to_utc_millis() -> None:
    service, _ = make_service()
    record = (
        service.remember(PROJECT, *request(message("a", occurredAt="2026-06-02T11:00:00+02:00")))
        .events[0]
        .record
    )
    assert record.occurred_at == "2026-06-02T09:00:00.000Z"


def test_given_a_used_key_when_replayed_then_original_returns_and_nothing_appends() -> None:
    service, store = make_service()
    first = service.remember(PROJECT, *request(message("a"))).events[0]
    again = service.remember(PROJECT, *request(message("a"), message("b")))
    assert again.events[0].replayed is True
    assert again.events[0].record == first.record
    assert again.events[1].replayed is False
    assert again.events[1].record.seq == 2
    assert len(store.events[(PROJECT, "chat-42")]) == 2


def test_given_a_used_key_when_sent_with_another_payload_then_409_and_nothing_of_the_batch_is_written() -> (
    None
):
    service, store = make_service()
    service.remember(PROJECT, *request(message("a", "original")))
    with pytest.raises(ConflictError) as caught:
        service.remember(PROJECT, *request(message("b"), message("a", "different")))
    assert caught.value.code == "idempotency_key_reused"
    assert caught.value.details["index"] == 1
    assert len(store.events[(PROJECT, "chat-42")]) == 1


def test_given_a_key_used_in_another_stream_when_reused_then_409() -> None:
    service, _ = make_service()
    service.remember(PROJECT, *request(message("a"), stream="one"))
    with pytest.raises(ConflictError):
        service.remember(PROJECT, *request(message("a"), stream="two"))


def test_given_keys_when_other_project_uses_them_then_they_are_independent() -> None:
    service, _ = make_service()
    service.remember(PROJECT, *request(message("a")))
    other = service.remember(ProjectId("prj_01JOTHER000000000000000000"), *request(message("a")))
    assert other.events[0].replayed is False
    assert other.events[0].record.seq == 1


def test_given_duplicate_keys_in_one_batch_then_422_before_any_write() -> None:
    service, store = make_service()
    with pytest.raises(UnprocessableError) as caught:
        service.remember(PROJECT, *request(message("a"), message("a")))
    assert caught.value.code == "duplicate_idempotency_key"
    assert store.append_calls == 0


def test_given_occurred_at_far_in_future_then_422_before_any_write() -> None:
    service, store = make_service()
    with pytest.raises(UnprocessableError) as caught:
        service.remember(PROJECT, *request(message("a", occurredAt="2026-06-02T09:36:00Z")))
    assert caught.value.code == "occurred_at_in_future"
    assert store.append_calls == 0
    assert service.remember(PROJECT, *request(message("b", occurredAt="2026-06-02T09:34:59Z"))).events


@pytest.mark.parametrize(
    "bad",
    [
        "2026-06-02T09:30:00",
        "yesterday",
        "2026-13-01T00:00:00Z",
        "0001-01-01T00:00:00+14:00",  # year 0 once in UTC: was a 500 (OverflowError)
    ],
)
def test_given_unparseable_or_naive_timestamp_then_422(bad: str) -> None:
    service, _ = make_service()
    with pytest.raises(UnprocessableError) as caught:
        service.remember(PROJECT, *request(message("a", occurredAt=bad)))
    assert caught.value.code == "invalid_timestamp"


@pytest.mark.parametrize(
    "early", ["1899-12-31T23:59:59.999Z", "0999-06-01T00:00:00Z", "0001-01-01T00:00:00Z"]
)
def test_given_occurred_at_before_1900_then_422_before_any_write(early: str) -> None:
    # Years 1-999 were accepted and hashed as "1-01-01T…", which nothing could read back.
    service, store = make_service()
    with pytest.raises(UnprocessableError) as caught:
        service.remember(PROJECT, *request(message("a", occurredAt=early)))
    assert caught.value.code == "occurred_at_too_early"
    assert store.append_calls == 0


@pytest.mark.parametrize("value", [2**53, -(2**53), "\ud800", 1e20, float("nan")])
def test_given_payload_without_canonical_form_then_422_before_any_write(value: object) -> None:
    service, store = make_service()
    event = message("a")
    event["payload"]["extra"] = value
    with pytest.raises(UnprocessableError) as caught:
        service.remember(PROJECT, *request(message("ok"), event))
    assert caught.value.code == "not_canonicalizable"
    assert store.append_calls == 0


def test_given_payload_over_the_limit_then_413_before_any_write() -> None:
    service, store = make_service()
    with pytest.raises(PayloadTooLargeError) as caught:
        service.remember(PROJECT, *request(message("a", "x" * MAX_PAYLOAD_BYTES)))
    assert caught.value.code == "event_too_large"
    assert store.append_calls == 0


class RacingStore(InMemoryEventStore):
    """Another writer appends between our head read and our append, ``races`` times."""

    def __init__(self, races: int) -> None:
        super().__init__()
        self.races = races
        self.rival = 0

    def read_head(self, project: ProjectId, stream: str) -> StreamHead:
        head = super().read_head(project, stream)
        if self.races > 0:
            self.races -= 1
            self.rival += 1
            rival, _ = make_service(self)
            self.races, saved = 0, self.races
            rival.remember(project, *request(message(f"rival-{self.rival}"), stream=stream))
            self.races = saved
        return head


def test_given_a_rival_writer_when_head_moves_then_append_retries_and_chain_stays_whole() -> None:
    store = RacingStore(races=3)
    service, _ = make_service(store)
    outcome = service.remember(PROJECT, *request(message("mine")))
    assert outcome.head_conflicts == 3
    assert outcome.attempts == 4
    records = store.events[(PROJECT, "chat-42")]
    assert [r.seq for r in records] == [1, 2, 3, 4]
    assert records[-1].idempotency_key == "mine"
    assert verify(records) is None


def test_given_endless_contention_then_429_stream_busy_with_retry_after() -> None:
    store = RacingStore(races=100)
    service, _ = make_service(store, max_attempts=5)
    with pytest.raises(TooManyRequestsError) as caught:
        service.remember(PROJECT, *request(message("mine")))
    assert caught.value.code == "stream_busy"
    assert caught.value.retry_after_seconds >= 1
    assert all(r.idempotency_key != "mine" for r in store.events[(PROJECT, "chat-42")])


class AnswerLostStore(InMemoryEventStore):
    """The first append commits and its answer is lost; the SDK sends it again. ``resent``: the
    re-sent transaction's conditions fail on what the first one wrote (the keys, the head).
    ``collided``: it is refused as colliding with the first, still finishing (a
    TransactionConflict: no key named), so remember appends again at the head it reads next."""

    def __init__(self, answer: str) -> None:
        super().__init__()
        self.answer = answer
        self.lost = True

    def append(self, *args: Any, **kwargs: Any) -> None:
        if self.lost:
            self.lost = False
            super().append(*args, **kwargs)
            if self.answer == "collided":
                raise AppendConflictError(head_moved=True, claimed={})
        super().append(*args, **kwargs)


@pytest.mark.parametrize("answer", ["resent", "collided"])
def test_given_a_commit_whose_answer_was_lost_retried_then_it_is_a_first_write_with_its_job(
    answer: str,
) -> None:
    store, queue = AnswerLostStore(answer), RecordingQueue()
    service, _ = make_service(store, jobs=queue)

    outcome = service.remember(PROJECT, *request(message("a"), message("b")))

    assert [e.replayed for e in outcome.events] == [False, False]
    assert (outcome.appended, outcome.replays) == (2, 0)
    assert outcome.head_conflicts == (1 if answer == "collided" else 0)  # a collision is retried
    assert outcome.job_created
    assert queue.sent == [(PROJECT, outcome.job_id)]
    records = store.events[(PROJECT, "chat-42")]
    assert [(r.seq, r.idempotency_key) for r in records] == [(1, "a"), (2, "b")]
    assert [e.record for e in outcome.events] == records
    assert verify(records) is None


def test_given_a_commit_resent_by_the_sdk_then_another_request_with_its_keys_is_still_a_replay() -> None:
    store, queue = AnswerLostStore("resent"), RecordingQueue()
    service, _ = make_service(store, jobs=queue)
    first = service.remember(PROJECT, *request(message("a")))

    again = service.remember(PROJECT, *request(message("a")))

    assert [e.replayed for e in again.events] == [True]
    assert again.events[0].record == first.events[0].record
    assert (again.appended, again.job_id, again.job_created) == (0, first.job_id, False)
    assert queue.sent == [(PROJECT, first.job_id)]  # the first's only
    assert len(store.events[(PROJECT, "chat-42")]) == 1
