"""Webhooks through the real handlers against the emulator (#18): management routes, tenancy and
scopes, events emitted from committed state (structuring and forget), signed deliveries to a
receiver on 127.0.0.1, retries, rotation, relay after a crash, and no text in any body."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kaibo_core.adapters.dynamodb_webhooks import DynamoWebhookStore
from kaibo_core.core import storage_keys, webhook_signing
from kaibo_core.core.errors import TooManyRequestsError
from kaibo_core.core.limits import WEBHOOK_TEST_INTERVAL_SECONDS, WEBHOOK_TESTS_PER_PROJECT
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.webhooks import FanOut, Subscription
from kaibo_core.runtime import wiring
from kaibo_core.services.webhooks import WebhooksService
from kaibo_local.workers import sqs_event
from tests.integration.api import FakeLambdaContext, Reply, call, handler_module, project_context
from tests.integration.iam_calls import checked_invocation
from tests.integration.test_forget_api import forget, remember_structured
from tests.integration.test_recall_api import get_memory
from tests.integration.test_remember_api import new_project

MARKER = "zanzibarquokka"
REASON = "customer asked for erasure 7731"
DEADLINE_SECONDS = 30.0


@dataclass
class Receiver:
    """An HTTP receiver on 127.0.0.1: answers with ``statuses`` in turn (then 200), records all."""

    statuses: list[int] = field(default_factory=list)
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    url: str = ""

    def start(self) -> ThreadingHTTPServer:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.received.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        return server

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(body) for _headers, body in self.received]


@pytest.fixture
def webhook_env(handler_env: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("KAIBO_WEBHOOKS_ALLOW_LOCAL", "1")
    monkeypatch.setenv("KAIBO_WEBHOOK_RETRY_SCALE", "0.0001")  # 5 s → 0.5 ms (SQS: 1 s at least)
    wiring.reset()
    yield handler_env
    wiring.reset()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    server = made.start()
    yield made
    server.shutdown()


def hooks(
    project: str,
    method: str,
    path: str = "",
    body: Any = None,
    scopes: str = "read write forget",
    *,
    service: WebhooksService | None = None,
) -> Reply:
    resource = "/v1/webhooks" + ("/{webhook_id}" if path else "")
    parameters = None
    if path:
        webhook_id, _, rest = path.partition("/")
        parameters = {"webhook_id": webhook_id}
        resource += f"/{rest}" if rest else ""
    return call(
        "webhooks",
        method,
        "/v1/webhooks" + (f"/{path}" if path else ""),
        resource=resource,
        path_parameters=parameters,
        body=body,
        context=project_context(project, scopes),
        services={"webhooks": service} if service else None,
    )


@dataclass
class SteppedClock:
    """A clock that moves only when told to."""

    now: datetime = field(default_factory=lambda: datetime(2026, 6, 2, 9, 30, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def clocked_service(clock: SteppedClock) -> WebhooksService:
    """The webhooks function's service as wired, on ``clock``."""
    wired = wiring.webhooks_service()
    outbox = wiring.webhook_outbox()
    assert outbox is not None
    return WebhooksService(
        wiring.webhook_store(), wiring.webhook_cipher(), outbox, wired._check_url, clock=clock
    )


def subscribe(project: str, url: str, events: list[str] | None = None) -> dict[str, Any]:
    reply = hooks(
        project, "POST", body={"url": url, "events": events or ["memory.structured", "memory.forgotten"]}
    )
    assert reply.status == 201, reply.body
    return dict(reply.body)


def pump(stack: Any, until: Any, deadline: float = DEADLINE_SECONDS) -> None:
    """Run the dispatch function on the webhook queue's messages until ``until()`` holds."""
    url = stack.queues["WebhookQueue"]
    arn = f"arn:aws:sqs:us-east-1:123456789012:{url.rsplit('/', 1)[-1]}"
    end = time.monotonic() + deadline
    while not until():
        assert time.monotonic() < end, "webhook deliveries did not arrive in time"
        messages = stack.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
            "Messages", []
        )
        if not messages:
            continue
        handler = handler_module("webhook_dispatch").lambda_handler
        result = checked_invocation(
            "webhook_dispatch", handler, sqs_event(messages, arn), FakeLambdaContext()
        )
        failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
        for m in messages:
            if m["MessageId"] not in failed:
                stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def drain(stack: Any) -> None:
    """Handle every message left on the webhook queue (none delayed: every delivery succeeded)."""
    url = stack.queues["WebhookQueue"]
    while stack.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=0, WaitTimeSeconds=1
    ).get("Messages"):
        pump(stack, lambda: not _visible(stack))


def _visible(stack: Any) -> int:
    attributes = stack.sqs.get_queue_attributes(
        QueueUrl=stack.queues["WebhookQueue"], AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def verified(secret: str, receiver: Receiver) -> bool:
    return all(
        webhook_signing.verify(secret, headers, body, now=int(time.time()))
        for headers, body in receiver.received
    )


# --- management, scopes, tenancy ------------------------------------------------------------------


def test_a_webhook_is_created_with_its_secret_once_listed_read_and_deleted(webhook_env: Any) -> None:
    project = new_project()
    created = subscribe(project, "https://example.com/hook")
    assert created["secret"].startswith("whsec_")
    assert created["status"] == "active"
    assert created["events"] == ["memory.structured", "memory.forgotten"]

    listed = hooks(project, "GET")
    assert listed.status == 200
    assert [w["id"] for w in listed.body["webhooks"]] == [created["id"]]
    assert "secret" not in listed.body["webhooks"][0]
    one = hooks(project, "GET", created["id"])
    assert one.status == 200
    assert "secret" not in one.body

    assert hooks(project, "DELETE", created["id"]).status == 204
    gone = hooks(project, "GET", created["id"])
    assert gone.status == 404
    assert gone.body["error"]["code"] == "webhook_not_found"
    assert hooks(project, "GET").body["webhooks"] == []


def test_another_projects_webhook_answers_exactly_as_a_missing_one(webhook_env: Any) -> None:
    owner, other = new_project(), new_project()
    created = subscribe(owner, "https://example.com/hook")
    missing = "wh_" + "0" * 20
    for path, method in [
        ("", "GET"),
        ("", "DELETE"),
        ("/rotate-secret", "POST"),
        ("/test", "POST"),
        ("/deliveries", "GET"),
    ]:
        theirs = hooks(other, method, created["id"] + path)
        nothing = hooks(other, method, missing + path)
        assert theirs.status == nothing.status == 404
        assert theirs.body["error"]["code"] == nothing.body["error"]["code"] == "webhook_not_found"
        assert (
            theirs.body["error"]["message"].replace(created["id"], missing)
            == nothing.body["error"]["message"]
        )
    assert hooks(owner, "GET", created["id"]).status == 200  # untouched


def test_a_read_key_cannot_create_or_read_webhooks(webhook_env: Any) -> None:
    project = new_project()
    reply = hooks(
        project, "POST", body={"url": "https://example.com/h", "events": ["memory.forgotten"]}, scopes="read"
    )
    assert reply.status == 403
    assert reply.body["error"]["code"] == "insufficient_scope"
    assert hooks(project, "GET", scopes="read").status == 403


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://example.com/hook", "webhook_url_not_https"),
        ("https://10.0.0.7/hook", "webhook_target_private"),
        ("https://169.254.169.254/latest/meta-data", "webhook_target_private"),
        ("https://user:pw@example.com/hook", "webhook_url_invalid"),
        ("https://127.0.0.1/hook", "webhook_target_private"),
    ],
)
def test_unsafe_targets_are_refused_on_the_aws_setting(handler_env: Any, url: str, reason: str) -> None:
    reply = hooks(new_project(), "POST", body={"url": url, "events": ["memory.forgotten"]})
    assert reply.status == 422, reply.body
    assert reply.body["error"]["code"] == "webhook_url_refused"
    assert reply.body["error"]["details"]["reason"] == reason


@pytest.mark.parametrize(
    "events", [["memory.exploded"], ["webhook.test"], [], ["memory.forgotten"] * 5, "memory.forgotten"]
)
def test_unknown_or_no_events_are_refused_with_the_webhooks_own_code(webhook_env: Any, events: Any) -> None:
    reply = hooks(new_project(), "POST", body={"url": "https://example.com/h", "events": events})
    assert reply.status == 422
    assert reply.body["error"]["code"] == "webhook_events_invalid"
    assert "memory.forgotten" in reply.body["error"]["message"]  # what it may name


# --- events from committed state, delivered and signed ----------------------------------------------


def test_structured_then_forgotten_arrive_signed_in_sequence_without_text(
    webhook_env: Any, receiver: Receiver
) -> None:
    project = new_project()
    secret = subscribe(project, receiver.url)["secret"]
    remembered = remember_structured(webhook_env, project, "s", f"The {MARKER} launch moved to July 17.")[0]
    provisional = remembered["memories"][0]["id"]
    structured_ids = get_memory(project, provisional).body["replacedBy"]

    pump(webhook_env, lambda: any(b["type"] == "memory.structured" for b in receiver.bodies()))
    reply = forget(project, {"memoryId": structured_ids[0], "reason": REASON})
    assert reply.status == 200, reply.body
    pump(webhook_env, lambda: any(b["type"] == "memory.forgotten" for b in receiver.bodies()))

    bodies = receiver.bodies()
    structured = next(b for b in bodies if b["type"] == "memory.structured")
    forgotten = next(b for b in bodies if b["type"] == "memory.forgotten")
    assert structured["data"]["memoryIds"] == structured_ids
    assert structured["data"]["jobId"] == remembered["jobId"]
    assert set(structured_ids) <= set(forgotten["data"]["memoryIds"])
    assert forgotten["data"]["receiptId"] == reply.body["receipt"]["id"]
    assert forgotten["seq"] > structured["seq"], "a mirror orders by seq"
    assert all(b["projectId"] == project for b in bodies)
    assert verified(secret, receiver)
    for headers, body in receiver.received:
        assert headers["webhook-id"] == json.loads(body)["id"]
        assert MARKER not in body.decode()
        assert MARKER.upper() not in body.decode().upper()
        assert REASON not in body.decode()


def test_a_receiver_answering_500_then_200_gets_the_event_again_and_one_delivery_succeeds(
    webhook_env: Any, receiver: Receiver
) -> None:
    project = new_project()
    created = subscribe(project, receiver.url)
    receiver.statuses = [500]
    sent = hooks(project, "POST", f"{created['id']}/test")
    assert sent.status == 202
    pump(webhook_env, lambda: len(receiver.received) >= 2)

    assert [json.loads(b)["id"] for _h, b in receiver.received] == [sent.body["eventId"]] * 2
    attempts = hooks(project, "GET", f"{created['id']}/deliveries").body["deliveries"]
    assert [(a["attempt"], a["outcome"], a.get("statusCode")) for a in reversed(attempts)] == [
        (1, "retrying", 500),
        (2, "delivered", 200),
    ]
    assert attempts[-1]["nextAttemptAt"]
    # Nothing of the delivery is kept forever: its state expires with the outbox entry it guards.
    partition = storage_keys.delivery_state_key(ProjectId(project), created["id"], sent.body["seq"])
    state = webhook_env.dynamodb.get_item(
        TableName=webhook_env.tables["WebhooksTable"], Key={name: {"S": v} for name, v in partition.items()}
    )["Item"]
    assert int(state["expiresAt"]["N"]) > time.time() + 29 * 86_400


def test_a_duplicate_relay_of_an_event_is_delivered_once(webhook_env: Any, receiver: Receiver) -> None:
    project = new_project()
    created = subscribe(project, receiver.url)
    sent = hooks(project, "POST", f"{created['id']}/test").body
    wiring.webhook_queue().fan_out([FanOut(project, sent["seq"])] * 2)
    pump(webhook_env, lambda: len(receiver.received) >= 1)
    drain(webhook_env)
    assert len(receiver.received) == 1


def test_rotation_signs_with_both_secrets_during_the_overlap_then_only_the_new_one(
    webhook_env: Any, receiver: Receiver
) -> None:
    project = new_project()
    created = subscribe(project, receiver.url)
    rotated = hooks(project, "POST", f"{created['id']}/rotate-secret")
    assert rotated.status == 200
    assert rotated.body["secret"] != created["secret"]
    clock = SteppedClock(datetime.now(UTC))
    assert hooks(project, "POST", f"{created['id']}/test", service=clocked_service(clock)).status == 202
    pump(webhook_env, lambda: len(receiver.received) >= 1)
    assert verified(created["secret"], receiver)
    assert verified(rotated.body["secret"], receiver)

    # After the overlap: a dispatcher whose clock is past previousSecretValidUntil.
    until = datetime.fromisoformat(rotated.body["previousSecretValidUntil"].replace("Z", "+00:00"))
    later = wiring.webhook_dispatcher()
    later._clock = lambda: until + timedelta(seconds=1)  # the overlap's end, without waiting a day
    clock.advance(WEBHOOK_TEST_INTERVAL_SECONDS)  # one test event per webhook per interval
    assert hooks(project, "POST", f"{created['id']}/test", service=clocked_service(clock)).status == 202
    receiver.received.clear()
    pump(webhook_env, lambda: len(receiver.received) >= 1)
    assert verified(rotated.body["secret"], receiver)
    assert not verified(created["secret"], receiver)


def test_an_event_whose_function_died_before_the_relay_is_relayed_by_the_schedule(
    webhook_env: Any, receiver: Receiver
) -> None:
    project = new_project()
    subscribe(project, receiver.url, ["memory.forgotten"])
    store = DynamoWebhookStore(webhook_env.dynamodb, webhook_env.tables["WebhooksTable"])
    # A commit whose relay never happened: the event is in the outbox, flagged unrelayed.
    from kaibo_core.core import webhooks

    long_ago = (datetime.now(UTC) - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    events = store.emit(ProjectId(project), [webhooks.forgotten("rcpt_x", 1, ["m1"], ["e1"])], long_ago)
    assert events
    handler = handler_module("webhook_dispatch").lambda_handler
    relayed = checked_invocation("webhook_dispatch", handler, {"source": "aws.events"}, FakeLambdaContext())
    assert relayed["relayed"] >= 1
    pump(webhook_env, lambda: any(b["seq"] == events[0].seq for b in receiver.bodies()))


def test_no_subscriber_means_no_outbox_write(webhook_env: Any) -> None:
    project = new_project()
    remember_structured(webhook_env, project, "s", "The demo moved to Friday.")
    store = DynamoWebhookStore(webhook_env.dynamodb, webhook_env.tables["WebhooksTable"])
    assert store.head(ProjectId(project)) == (0, 0, False)


def test_a_receiver_that_never_answers_is_never_called_by_remember_structuring_or_forget(
    webhook_env: Any, receiver: Receiver
) -> None:
    """Deliveries happen only in the dispatch function: the write paths never wait for a receiver."""
    project = new_project()
    subscribe(project, receiver.url)
    made = remember_structured(webhook_env, project, "s", "The pilot moved to May 3.")[0]
    memory = get_memory(project, made["memories"][0]["id"]).body["replacedBy"][0]
    assert forget(project, {"memoryId": memory, "reason": "test"}).status == 200
    assert receiver.received == []


# --- test events: one per webhook per interval ------------------------------------------------------


def outbox_tests(stack: Any, project: str) -> list[str]:
    """The webhook ids of the project's ``webhook.test`` events in the outbox, oldest first."""
    items = stack.dynamodb.query(
        TableName=stack.tables["WebhooksTable"],
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"{project}#outbox"}},
        ConsistentRead=True,
    )["Items"]
    return [
        json.loads(item["data"]["S"])["webhookId"]
        for item in items
        if item.get("type", {}).get("S") == "webhook.test"
    ]


def test_a_second_test_event_within_the_interval_answers_429_with_the_seconds_left(webhook_env: Any) -> None:
    """Each test event makes the service POST to the subscriber's URL: at most one per webhook per
    WEBHOOK_TEST_INTERVAL_SECONDS. Sooner: 429 with the seconds left, and no event."""
    project = new_project()
    first, other = (
        subscribe(project, "https://example.com/a")["id"],
        subscribe(project, "https://example.com/b")["id"],
    )
    clock = SteppedClock()
    service = clocked_service(clock)

    assert hooks(project, "POST", f"{first}/test", service=service).status == 202
    clock.advance(3.2)
    too_soon = hooks(project, "POST", f"{first}/test", service=service)
    other_webhook = hooks(project, "POST", f"{other}/test", service=service)
    clock.advance(WEBHOOK_TEST_INTERVAL_SECONDS - 3.2 - 0.001)
    still_too_soon = hooks(project, "POST", f"{first}/test", service=service)
    clock.advance(0.001)
    on_time = hooks(project, "POST", f"{first}/test", service=service)

    assert (too_soon.status, too_soon.body["error"]["code"]) == (429, "webhook_test_too_soon")
    assert too_soon.headers["Retry-After"] == "7"  # 6.8 s left, rounded up
    assert too_soon.body["error"]["details"] == {"retryAfterSeconds": 7, "intervalSeconds": 10}
    assert other_webhook.status == 202  # the limit is per webhook
    assert (still_too_soon.status, still_too_soon.headers["Retry-After"]) == (429, "1")
    assert on_time.status == 202, on_time.body
    assert outbox_tests(webhook_env, project) == [first, other, first]


def sent_at_once(service: WebhooksService, project: str, webhook_ids: list[str]) -> list[str]:
    """Test events for ``webhook_ids`` sent at the same instant, one thread each, released
    together: what each got ("sent", or the 429's code), in the order they finished."""
    start = threading.Barrier(len(webhook_ids))
    outcomes: list[str] = []

    def send(webhook_id: str) -> None:
        start.wait(10)
        try:
            service.send_test(ProjectId(project), webhook_id)
            outcomes.append("sent")
        except TooManyRequestsError as exc:
            outcomes.append(exc.code)

    racers = [threading.Thread(target=send, args=(webhook_id,)) for webhook_id in webhook_ids]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(30)
    return outcomes


def test_test_events_sent_at_once_for_one_webhook_make_one_event(webhook_env: Any) -> None:
    """The limit is a condition in the test event's own transaction, not a read before it: two
    requests racing at the same instant, each past the read of the webhook, make one event."""
    project = new_project()
    webhook_id = subscribe(project, "https://example.com/hook")["id"]
    service = clocked_service(SteppedClock())

    outcomes = sent_at_once(service, project, [webhook_id, webhook_id])

    assert sorted(outcomes) == ["sent", "webhook_test_too_soon"]
    assert outbox_tests(webhook_env, project) == [webhook_id]


# --- test events: at most WEBHOOK_TESTS_PER_PROJECT per project in any window -------------------


def project_test_log(stack: Any, project: str) -> list[str]:
    """When the project's test events were sent, as its test log holds them."""
    item = stack.dynamodb.get_item(
        TableName=stack.tables["WebhooksTable"],
        Key={"pk": {"S": f"{project}#webhooks"}, "sk": {"S": "tests"}},
        ConsistentRead=True,
    ).get("Item", {})
    return [entry["S"] for entry in item.get("sentAt", {}).get("L", [])]


def test_deleting_and_recreating_webhooks_does_not_reset_the_project_test_limit(webhook_env: Any) -> None:
    """Given 9 test events to webhooks deleted at once and a 10th to a webhook made later, all in
    WEBHOOK_TESTS_WINDOW_SECONDS, when a new webhook is tested: 429 until the first test leaves the
    window, to the millisecond; a webhook whose own interval ends later is told to wait for that."""
    project = new_project()
    clock = SteppedClock()
    service = clocked_service(clock)
    for _ in range(WEBHOOK_TESTS_PER_PROJECT - 1):  # at 0, 1, …, 8 s
        recreated = subscribe(project, "https://example.com/hook")["id"]
        assert hooks(project, "POST", f"{recreated}/test", service=service).status == 202
        assert hooks(project, "DELETE", recreated).status == 204
        clock.advance(1)
    kept = subscribe(project, "https://example.com/hook")["id"]
    clock.advance(55 - (WEBHOOK_TESTS_PER_PROJECT - 1))
    assert hooks(project, "POST", f"{kept}/test", service=service).status == 202  # the 10th, at 55 s
    log = project_test_log(webhook_env, project)

    clock.advance(1)  # 56 s: the window holds 10 tests, the oldest (0 s) leaves it at 60 s
    fresh = subscribe(project, "https://example.com/hook")["id"]
    refused = hooks(project, "POST", f"{fresh}/test", service=service)
    kept_refused = hooks(project, "POST", f"{kept}/test", service=service)
    clock.advance(3.999)
    still_refused = hooks(project, "POST", f"{fresh}/test", service=service)
    clock.advance(0.001)
    on_time = hooks(project, "POST", f"{fresh}/test", service=service)

    assert (refused.status, refused.body["error"]["code"]) == (429, "webhook_tests_too_many")
    assert refused.headers["Retry-After"] == "4"
    assert refused.body["error"]["details"] == {"retryAfterSeconds": 4, "limit": 10, "windowSeconds": 60}
    assert (kept_refused.status, kept_refused.headers["Retry-After"]) == (429, "9")  # its own: 65 s
    assert kept_refused.body["error"]["code"] == "webhook_tests_too_many"
    assert (still_refused.status, still_refused.headers["Retry-After"]) == (429, "1")
    assert on_time.status == 202, on_time.body
    assert len(outbox_tests(webhook_env, project)) == WEBHOOK_TESTS_PER_PROJECT + 1
    assert len(log) == WEBHOOK_TESTS_PER_PROJECT
    # the refusals wrote nothing; the test at 60 s took the place of the one at 0 s
    assert project_test_log(webhook_env, project) == [*log[1:], "2026-06-02T09:31:00.000Z"]


def test_two_webhooks_share_the_project_test_limit_and_it_frees_as_the_window_slides(
    webhook_env: Any,
) -> None:
    """Two webhooks tested in turn every 5 s, each within its own interval: the project's 11th test
    event in WEBHOOK_TESTS_WINDOW_SECONDS is refused; at 60 s the first has left the window and one
    more is sent; the one at 5 s still counts until 65 s."""
    project = new_project()
    pair = [subscribe(project, f"https://example.com/{name}")["id"] for name in "ab"]
    clock = SteppedClock()
    service = clocked_service(clock)
    sent = []
    for n in range(WEBHOOK_TESTS_PER_PROJECT):  # at 0, 5, …, 45 s
        sent.append(hooks(project, "POST", f"{pair[n % 2]}/test", service=service).status)
        clock.advance(5)

    eleventh = [hooks(project, "POST", f"{webhook}/test", service=service) for webhook in pair]  # 50 s
    clock.advance(10)
    after_the_first_left = hooks(project, "POST", f"{pair[0]}/test", service=service)  # 60 s
    clock.advance(1)
    next_one = hooks(project, "POST", f"{pair[1]}/test", service=service)  # 61 s

    assert sent == [202] * WEBHOOK_TESTS_PER_PROJECT
    assert [(r.status, r.body["error"]["code"], r.headers["Retry-After"]) for r in eleventh] == [
        (429, "webhook_tests_too_many", "10")
    ] * 2
    assert after_the_first_left.status == 202, after_the_first_left.body
    assert (next_one.status, next_one.headers["Retry-After"]) == (429, "4")  # the one at 5 s: 65 s
    assert outbox_tests(webhook_env, project) == [pair[n % 2] for n in range(11)]


def test_test_events_for_two_webhooks_at_once_for_the_last_place_make_one_event(webhook_env: Any) -> None:
    """The project's limit is a condition in the test event's own transaction too: with one place
    left in the window, two webhooks tested at the same instant make one event."""
    project = new_project()
    clock = SteppedClock()
    service = clocked_service(clock)
    for _ in range(WEBHOOK_TESTS_PER_PROJECT - 1):
        recreated = subscribe(project, "https://example.com/hook")["id"]
        assert hooks(project, "POST", f"{recreated}/test", service=service).status == 202
        assert hooks(project, "DELETE", recreated).status == 204
    pair = [subscribe(project, f"https://example.com/{name}")["id"] for name in "ab"]

    outcomes = sent_at_once(service, project, pair)

    assert sorted(outcomes) == ["sent", "webhook_tests_too_many"]
    assert len(outbox_tests(webhook_env, project)) == WEBHOOK_TESTS_PER_PROJECT
    assert len(project_test_log(webhook_env, project)) == WEBHOOK_TESTS_PER_PROJECT


def test_a_test_event_for_a_webhook_deleted_meanwhile_is_404_and_no_event(
    webhook_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = new_project()
    webhook_id = subscribe(project, "https://example.com/hook")["id"]
    service = clocked_service(SteppedClock())
    wired_get = service.get

    def get_then_delete(owner: ProjectId, wanted: str) -> Subscription:
        found = wired_get(owner, wanted)
        assert wiring.webhook_store().delete(owner, wanted)  # another request, between read and write
        return found

    monkeypatch.setattr(service, "get", get_then_delete)
    gone = hooks(project, "POST", f"{webhook_id}/test", service=service)

    assert (gone.status, gone.body["error"]["code"]) == (404, "webhook_not_found")
    assert outbox_tests(webhook_env, project) == []
