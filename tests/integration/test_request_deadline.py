"""One deadline per invocation for every retry loop in it (kaibo_core/core/deadline.py): a request
whose transaction keeps racing, or whose batch read DynamoDB keeps throttling, answers 429 with
Retry-After while its Lambda time has the reserve left, not Lambda's timeout (API Gateway's
502/504); a background function's job fails in time for its queue to retry it.

The invocation's time passes only when the code under test sleeps (``InvocationClock``), and each
backoff is its longest (the jitter's upper bound): no real waits, no wall-clock luck."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from kaibo_core.adapters.dynamodb_events import DynamoEventLocator, DynamoEventStore
from kaibo_core.adapters.dynamodb_memories import DynamoMemoryStore, memory_item
from kaibo_core.adapters.dynamodb_webhooks import DynamoWebhookStore
from kaibo_core.adapters.webhook_http import DeliveryResult
from kaibo_core.core import backoff, deadline, webhooks
from kaibo_core.core.errors import TooManyRequestsError
from kaibo_core.core.limits import BATCH_GET_ROUNDS, TRANSACTION_RACE_ATTEMPTS
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.webhooks import WEBHOOK_MAX_RECEIVE_COUNT
from kaibo_core.runtime import wiring
from kaibo_core.runtime.settings import get_settings
from kaibo_core.services.memories import MemoriesService
from kaibo_core.services.webhook_dispatch import WebhookDispatcher
from kaibo_core.services.webhooks import WebhooksService
from kaibo_local.workers import sqs_event
from tests.fixtures.faults import Fault, FaultInjector, both, mentions, touches
from tests.integration.api import FakeLambdaContext, Reply, call, handler_module, project_context
from tests.integration.iam_calls import checked_invocation
from tests.integration.test_memory_index import memory
from tests.integration.test_remember_api import new_project

#: Calls a fault answers when it is meant to outlast every retry of the request.
KEEPS_RACING = 1000


@dataclass
class InvocationClock:
    """A Lambda invocation's time: it passes only while the code under test sleeps."""

    timeout_ms: int
    slept: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)

    def remaining_ms(self) -> int:
        return self.timeout_ms - round(sum(self.slept) * 1000)


@dataclass
class ClockedContext(FakeLambdaContext):
    clock: InvocationClock = field(default_factory=lambda: InvocationClock(10_000))

    def get_remaining_time_in_millis(self) -> int:
        return self.clock.remaining_ms()


@pytest.fixture
def webhook_env(handler_env: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("KAIBO_WEBHOOKS_ALLOW_LOCAL", "1")
    monkeypatch.setattr(backoff, "random", SimpleNamespace(uniform=lambda _low, high: high))
    wiring.reset()
    yield handler_env
    wiring.reset()


@pytest.fixture
def faults(webhook_env: Any) -> Iterator[FaultInjector]:
    injector = FaultInjector(wiring.dynamodb(), webhook_env.dynamodb)
    yield injector
    injector.remove()


def service_sleeping_on(clock: InvocationClock) -> WebhooksService:
    """The webhooks function's service as wired, its store's waits on ``clock``."""
    wired = wiring.webhooks_service()
    outbox = wiring.webhook_outbox()
    assert outbox is not None
    store = DynamoWebhookStore(wiring.dynamodb(), get_settings().webhooks_table, sleep=clock.sleep)
    return WebhooksService(store, wiring.webhook_cipher(), outbox, wired._check_url)


def create_webhook(project: str, clock: InvocationClock) -> Reply:
    return call(
        "webhooks",
        "POST",
        "/v1/webhooks",
        resource="/v1/webhooks",
        body={"url": "https://example.com/hook", "events": ["memory.structured"]},
        context=project_context(project, "write"),
        services={"webhooks": service_sleeping_on(clock)},
        lambda_context=ClockedContext(clock=clock),
    )


def racing(stack: Any, project: str, times: int) -> Fault:
    """The webhook's creation loses every race for ``times`` calls (``TransactionConflict``)."""
    return Fault(
        "TransactWriteItems",
        "conflict",
        times=times,
        when=both(mentions(project), touches(stack.tables["WebhooksTable"])),
    )


def test_a_transaction_racing_past_the_invocations_time_answers_429_with_the_reserve_left(
    webhook_env: Any, faults: FaultInjector
) -> None:
    """Given 500 ms left and a creation that keeps racing, its backoffs (20, 40, 80, 160 ms, then
    320) would outlast the function; it stops while its reserve (125 ms) is still there."""
    project = new_project()
    clock = InvocationClock(timeout_ms=500)
    fault = faults.add(racing(webhook_env, project, KEEPS_RACING))

    busy = create_webhook(project, clock)

    assert (busy.status, busy.body["error"]["code"]) == (429, "transaction_busy")
    assert busy.headers["Retry-After"] == "1"
    assert clock.remaining_ms() >= deadline.reserve_for(0.5) * 1000, clock.slept
    assert len(fault.fired) < TRANSACTION_RACE_ATTEMPTS  # stopped by the deadline, not the attempts
    assert deadline.current() is None  # the invocation's deadline ended with it


def test_each_invocation_gets_its_own_deadline(webhook_env: Any, faults: FaultInjector) -> None:
    """The next invocation, with 10 s, retries past the first one's deadline and is created."""
    project = new_project()
    short = InvocationClock(timeout_ms=500)
    faults.add(racing(webhook_env, project, KEEPS_RACING))
    assert create_webhook(project, short).status == 429
    faults.clear()
    fault = faults.add(racing(webhook_env, project, TRANSACTION_RACE_ATTEMPTS - 1))
    generous = InvocationClock(timeout_ms=10_000)

    created = create_webhook(project, generous)

    assert created.status == 201, created.body
    assert len(fault.fired) == TRANSACTION_RACE_ATTEMPTS - 1
    assert sum(generous.slept) > sum(short.slept) + short.remaining_ms() / 1000  # past the first's time


def test_without_a_lambda_context_clock_the_retries_keep_their_own_limits() -> None:
    """Tools and tests without a deadline: every wait is allowed."""
    assert deadline.current() is None
    assert deadline.time_for(3600.0)
    with deadline.bounded_by(lambda: 2_000):
        assert deadline.time_for(1.4)  # 2 s less the reserve (0.5 s)
        assert not deadline.time_for(1.5)
    assert deadline.time_for(3600.0)


# --- BatchGetItem's unprocessed keys ----------------------------------------------------------------


def throttled_reads(project: str) -> Fault:
    """Every BatchGetItem of the project's keys leaves them all unprocessed, as a throttled table
    answers."""
    return Fault("BatchGetItem", "unprocessed", times=KEEPS_RACING, when=mentions(project))


def test_a_batch_read_throttled_past_the_invocations_time_answers_429_with_the_reserve_left(
    webhook_env: Any, faults: FaultInjector
) -> None:
    """explain reads a memory's earlier version with BatchGetItem; DynamoDB keeps its key
    unprocessed, and the backoffs between rounds (10, 20, 40, 80, 160 ms, then 320) would outlast
    the function's 500 ms: it stops while its reserve (125 ms) is still there."""
    project = ProjectId(new_project())
    settings = get_settings()
    later = memory(project, 2, "the release is on July 17", status="active", replaces=f"mem_{1:026d}")
    wiring.dynamodb().put_item(TableName=settings.memories_table, Item=memory_item(later, dl=2))
    clock = InvocationClock(timeout_ms=500)
    store = DynamoMemoryStore(
        wiring.dynamodb(), settings.memories_table, settings.index_table, sleep=clock.sleep
    )
    fault = faults.add(throttled_reads(project))

    busy = call(
        "memories",
        "POST",
        "/v1/explain",
        body={"memoryId": later.id},
        context=project_context(project, "read"),
        services={"memories": MemoriesService(store)},
        lambda_context=ClockedContext(clock=clock),
    )

    assert (busy.status, busy.body["error"]["code"]) == (429, "table_busy")
    assert busy.headers["Retry-After"] == "1"
    assert clock.remaining_ms() >= deadline.reserve_for(0.5) * 1000, clock.slept
    assert 1 < len(fault.fired) < BATCH_GET_ROUNDS  # retried, then stopped by the deadline


def test_a_jobs_events_read_throttled_past_the_invocations_time_fails_in_time(
    webhook_env: Any, faults: FaultInjector
) -> None:
    """The structure function reads a job's events with BatchGetItem: kept unprocessed, the read
    gives up with the reserve left (the job fails, for SQS to retry) instead of asking again until
    Lambda stops the function."""
    project = ProjectId(new_project())
    settings = get_settings()
    clock = InvocationClock(timeout_ms=500)
    events = DynamoEventStore(
        wiring.dynamodb(), settings.events_table, settings.idempotency_table, sleep=clock.sleep
    )
    fault = faults.add(throttled_reads(project))

    with deadline.bounded_by(clock.remaining_ms), pytest.raises(TooManyRequestsError) as busy:
        events.get_events(project, [("chat-1", 1), ("chat-1", 2)])

    assert busy.value.code == "table_busy"
    assert clock.remaining_ms() >= deadline.reserve_for(0.5) * 1000, clock.slept
    assert 1 < len(fault.fired) < BATCH_GET_ROUNDS


def test_without_a_deadline_a_throttled_events_read_ends_after_its_rounds(
    webhook_env: Any, faults: FaultInjector
) -> None:
    project = ProjectId(new_project())
    settings = get_settings()
    events = DynamoEventStore(
        wiring.dynamodb(), settings.events_table, settings.idempotency_table, sleep=lambda _: None
    )
    fault = faults.add(throttled_reads(project))

    with pytest.raises(TooManyRequestsError, match="throttled"):
        events.get_events(project, [("chat-1", 1)])

    assert len(fault.fired) == BATCH_GET_ROUNDS


def test_recalls_context_read_throttled_near_the_deadline_does_without_it(
    webhook_env: Any, faults: FaultInjector
) -> None:
    """Recall's context (neighbouring events) is optional: kept unprocessed, its read stops
    waiting before the deadline and recall goes on without it (no error)."""
    project = ProjectId(new_project())
    clock = InvocationClock(timeout_ms=150)
    locator = DynamoEventLocator(wiring.dynamodb(), get_settings().events_table, sleep=clock.sleep)
    fault = faults.add(throttled_reads(project))

    with deadline.bounded_by(clock.remaining_ms):
        found = locator.event_ids(project, [("chat-1", 1), ("chat-1", 2)])

    assert found == {}
    assert clock.remaining_ms() >= deadline.reserve_for(0.15) * 1000, clock.slept
    assert len(fault.fired) > 1


# --- webhook deliveries ------------------------------------------------------------------------------


@dataclass
class SlowReceiver:
    """``send`` for the dispatcher: a receiver that never answers, so each delivery times out
    after all the time it was given (recorded)."""

    given: list[float] = field(default_factory=list)

    def __call__(self, url: str, body: bytes, headers: Any, timeout: float) -> DeliveryResult:
        self.given.append(timeout)
        return DeliveryResult(None, round(timeout * 1000), "timeout")


#: The webhook queue's ARN in the SQS events of these tests (the dispatcher does not read it).
WEBHOOK_QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:webhooks"


def pending_delivery(stack: Any, project: ProjectId, attempt: int = 1) -> tuple[str, dict[str, Any]]:
    """A webhook of ``project`` and the queue message of attempt ``attempt`` of its delivery of a
    committed event (as ReceiveMessage returns it); the attempts before it were made."""
    webhook_id = create_webhook(project, InvocationClock(timeout_ms=10_000)).body["id"]
    store = DynamoWebhookStore(wiring.dynamodb(), get_settings().webhooks_table)
    [event] = store.emit(
        project, [webhooks.forgotten("rcpt_x", 1, ["m1"], ["e1"])], "2026-06-02T09:30:00.000Z"
    )
    for earlier in range(1, attempt):
        assert store.claim_attempt(project, webhook_id, event.seq, earlier, f"earlier-{earlier}")
    body = webhooks.encode_message(webhooks.Delivery(project, webhook_id, event.seq, attempt))
    return webhook_id, {"MessageId": f"msg-{webhook_id}", "ReceiptHandle": "rh", "Body": body}


def received(message: dict[str, Any], receive_count: int) -> dict[str, Any]:
    """The SQS event of ``message`` on its ``receive_count``-th receive."""
    counted = {**message, "Attributes": {"ApproximateReceiveCount": str(receive_count)}}
    return sqs_event([counted], WEBHOOK_QUEUE_ARN)


def take_deliveries(stack: Any, project: ProjectId) -> list[dict[str, Any]]:
    """The messages of ``project``'s deliveries visible on the webhook queue, taken off it."""
    url = stack.queues["WebhookQueue"]
    taken: list[dict[str, Any]] = []
    while batch := stack.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        for m in batch:
            stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
            if webhooks.decode_message(m["Body"]).project_id == project:
                taken.append(m)
    return taken


def dispatch(sqs: dict[str, Any], clock: InvocationClock, receiver: SlowReceiver) -> list[str]:
    """The dispatch function on ``sqs`` with ``clock``'s time (10 s per delivery); the ids of the
    messages it failed (for SQS to deliver again)."""
    dispatcher = WebhookDispatcher(
        wiring.webhook_store(),
        wiring.webhook_queue(),
        wiring.webhook_cipher(),
        receiver,
        timeout_seconds=10.0,
    )
    handler = handler_module("webhook_dispatch").lambda_handler
    result = checked_invocation(
        "webhook_dispatch", handler, sqs, ClockedContext(clock=clock), dispatcher=dispatcher
    )
    return [failure["itemIdentifier"] for failure in result.get("batchItemFailures", [])]


@pytest.mark.parametrize("receive", [1, WEBHOOK_MAX_RECEIVE_COUNT - 1])
def test_a_delivery_near_the_deadline_waits_only_the_time_left_and_is_made_again_later(
    webhook_env: Any, receive: int
) -> None:
    """4 s left: the receiver gets 4 s less the reserve (1 s), not its 10. Cut short by the
    deadline, the attempt is not the receiver's failure: nothing is recorded, the webhook stays
    healthy, and the message fails for SQS to deliver again (the same attempt) while it has a
    receive left before the dead-letter queue."""
    project = ProjectId(new_project())
    webhook_id, message = pending_delivery(webhook_env, project)
    receiver = SlowReceiver()

    failed = dispatch(received(message, receive), InvocationClock(timeout_ms=4_000), receiver)

    assert receiver.given == [3.0]
    assert failed == [f"msg-{webhook_id}"]
    assert wiring.webhook_store().attempts(project, webhook_id, 10) == []
    hook = wiring.webhook_store().get(project, webhook_id)
    assert hook is not None
    assert hook.status == "active"

    redelivered = dispatch(  # SQS's redelivery
        received(message, receive + 1), InvocationClock(timeout_ms=60_000), receiver
    )

    assert receiver.given == [3.0, 10.0]  # its whole timeout: now the receiver's own failure
    assert redelivered == []
    [attempt] = wiring.webhook_store().attempts(project, webhook_id, 10)
    assert (attempt.attempt, attempt.error, attempt.outcome) == (1, "timeout", "retrying")


@pytest.mark.parametrize(
    ("attempt", "outcome", "status"),
    [(1, "retrying", "active"), (len(webhooks.RETRY_SCHEDULE_SECONDS), "failed", "failing")],
)
def test_a_delivery_cut_short_on_its_messages_last_receive_is_recorded_as_the_receivers_timeout(
    webhook_env: Any, attempt: int, outcome: str, status: str
) -> None:
    """Failed once more, the message would reach the dead-letter queue with nothing recorded: on
    its last receive, the attempt the deadline cut short counts as the receiver's timeout, and goes
    on as any failed attempt (the retry schedule's next one; after the last, ``failing``)."""
    project = ProjectId(new_project())
    webhook_id, message = pending_delivery(webhook_env, project, attempt)
    receiver = SlowReceiver()

    failed = dispatch(
        received(message, WEBHOOK_MAX_RECEIVE_COUNT), InvocationClock(timeout_ms=4_000), receiver
    )

    assert (failed, receiver.given) == ([], [3.0])
    [made] = wiring.webhook_store().attempts(project, webhook_id, 10)
    assert (made.attempt, made.error, made.outcome) == (attempt, "timeout", outcome)
    assert (made.next_attempt_at is not None) == (outcome == "retrying")
    hook = wiring.webhook_store().get(project, webhook_id)
    assert hook is not None
    assert hook.status == status


def test_a_delivery_with_too_little_time_left_is_handed_on_to_a_fresh_message(webhook_env: Any) -> None:
    """1 s left (0.75 s less the reserve): the delivery does not start, and its message does not
    fail either (that would spend one of its receives). A fresh copy of the message is queued,
    and a later invocation with its whole time makes the attempt with it."""
    project = ProjectId(new_project())
    webhook_id, message = pending_delivery(webhook_env, project)
    receiver = SlowReceiver()

    failed = dispatch(received(message, 1), InvocationClock(timeout_ms=1_000), receiver)

    assert (failed, receiver.given) == ([], [])
    assert wiring.webhook_store().attempts(project, webhook_id, 10) == []
    [handed_on] = take_deliveries(webhook_env, project)
    claimed_as_original = {**json.loads(message["Body"]), "claimant": f"msg-{webhook_id}"}
    assert json.loads(handed_on["Body"]) == claimed_as_original

    made = dispatch(received(handed_on, 1), InvocationClock(timeout_ms=60_000), receiver)

    assert (made, receiver.given) == ([], [10.0])
    [attempt] = wiring.webhook_store().attempts(project, webhook_id, 10)
    assert (attempt.attempt, attempt.error, attempt.outcome) == (1, "timeout", "retrying")


def test_a_delivery_cut_short_then_handed_on_is_made_under_the_claim_of_its_first_receive(
    webhook_env: Any,
) -> None:
    """Receive 1 claims the attempt and is cut short; receive 2 comes too late in its invocation
    and is handed on. The copy makes the attempt under the original message's claim: under its own
    id it would lose the claim as a duplicate, and the delivery would stay pending, unrecorded."""
    project = ProjectId(new_project())
    webhook_id, message = pending_delivery(webhook_env, project)
    receiver = SlowReceiver()
    assert dispatch(received(message, 1), InvocationClock(timeout_ms=4_000), receiver) == [
        f"msg-{webhook_id}"
    ]
    assert dispatch(received(message, 2), InvocationClock(timeout_ms=1_000), receiver) == []
    [handed_on] = take_deliveries(webhook_env, project)

    made = dispatch(received(handed_on, 1), InvocationClock(timeout_ms=60_000), receiver)

    assert (made, receiver.given) == ([], [3.0, 10.0])
    [attempt] = wiring.webhook_store().attempts(project, webhook_id, 10)
    assert (attempt.attempt, attempt.error, attempt.outcome) == (1, "timeout", "retrying")


def test_a_delivery_that_cannot_be_handed_on_fails_its_message(webhook_env: Any) -> None:
    """Queueing the fresh copy fails: the message fails, for SQS to deliver it again."""
    project = ProjectId(new_project())
    webhook_id, message = pending_delivery(webhook_env, project)
    sqs_faults = FaultInjector(wiring.sqs(), webhook_env.sqs)
    try:
        sqs_faults.add(Fault("SendMessage", "unavailable", when=mentions(webhook_id)))
        receiver = SlowReceiver()

        failed = dispatch(received(message, 1), InvocationClock(timeout_ms=1_000), receiver)
    finally:
        sqs_faults.remove()

    assert (failed, receiver.given) == ([f"msg-{webhook_id}"], [])
    assert wiring.webhook_store().attempts(project, webhook_id, 10) == []
    assert take_deliveries(webhook_env, project) == []
