"""Queues, SQS pollers and schedules from a (synthetic) template, against the emulator."""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore.config import Config

from kaibo_local.stack import erased_anything
from kaibo_local.template import function_specs
from kaibo_local.workers import (
    QueuePoller,
    QueueTrigger,
    ScheduleTimer,
    ScheduleTrigger,
    create_queues,
    failed_message_ids,
    rate_seconds,
    sqs_event,
    triggers,
)
from tests.conftest import FAKE_AWS_ENV, AwsStack

DEADLINE_SECONDS = 15.0


def synthetic_template() -> dict[str, Any]:
    """A work queue (listed before its DLQ on purpose), and a function it triggers plus a schedule."""
    return {
        "Resources": {
            "WorkQueue": {
                "Type": "AWS::SQS::Queue",
                "Properties": {
                    "VisibilityTimeout": 1,
                    "RedrivePolicy": {
                        "deadLetterTargetArn": {"Fn::GetAtt": ["WorkDeadLetterQueue", "Arn"]},
                        "maxReceiveCount": 2,
                    },
                },
            },
            "WorkDeadLetterQueue": {
                "Type": "AWS::SQS::Queue",
                "Properties": {"MessageRetentionPeriod": 1209600},
            },
            "WorkerFunction": {
                "Type": "AWS::Serverless::Function",
                "Properties": {
                    "CodeUri": "functions/worker/",
                    "Handler": "app.lambda_handler",
                    "Events": {
                        "Work": {
                            "Type": "SQS",
                            "Properties": {
                                "Queue": {"Fn::GetAtt": ["WorkQueue", "Arn"]},
                                "BatchSize": 5,
                                "FunctionResponseTypes": ["ReportBatchItemFailures"],
                            },
                        },
                        "Tick": {"Type": "Schedule", "Properties": {"Schedule": "rate(1 minute)"}},
                    },
                },
            },
        }
    }


class RecordingSqs:
    """The SQS client, recording the names of the queues it creates, in order."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.created: list[str] = []

    def create_queue(self, **kwargs: Any) -> Any:
        self.created.append(kwargs["QueueName"])
        return self._client.create_queue(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.fixture(scope="module")
def sqs(aws_stack: AwsStack) -> Any:
    return boto3.client(
        "sqs",
        endpoint_url=aws_stack.endpoint_url,
        region_name=FAKE_AWS_ENV["AWS_REGION"],
        aws_access_key_id=FAKE_AWS_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=FAKE_AWS_ENV["AWS_SECRET_ACCESS_KEY"],
        config=Config(retries={"max_attempts": 1}),
    )


@dataclass
class Queues:
    work: str
    dead_letters: str
    trigger: QueueTrigger


@pytest.fixture
def queues(sqs: Any) -> Queues:
    template = synthetic_template()
    urls = create_queues(sqs, template, secrets.token_hex(4))
    (trigger,), _ = triggers(template, function_specs(template))
    return Queues(urls["WorkQueue"], urls["WorkDeadLetterQueue"], trigger)


@dataclass
class RecordingHandler:
    """A queue consumer: records each batch; ``answer`` decides what it returns (or raises)."""

    answer: Callable[[dict[str, Any]], Any] = lambda _event: None
    batches: list[dict[str, Any]] = field(default_factory=list)
    contexts: list[Any] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        with self.lock:
            self.batches.append(event)
            self.contexts.append(context)
        return self.answer(event)

    def bodies(self) -> list[list[str]]:
        return [[r["body"] for r in batch["Records"]] for batch in self.batches]

    def delivered(self, body: str) -> int:
        return sum(batch.count(body) for batch in self.bodies())


def send(sqs: Any, url: str, *bodies: str, **kwargs: Any) -> list[str]:
    return [sqs.send_message(QueueUrl=url, MessageBody=body, **kwargs)["MessageId"] for body in bodies]


def counts(sqs: Any, url: str) -> tuple[int, int]:
    """(visible, in flight) messages of a queue."""
    attributes = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


def poll_until(condition: Callable[[], bool], step: Callable[[], Any] = lambda: None) -> None:
    """Run ``step`` until ``condition`` holds, or fail at the deadline."""
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        step()
        threading.Event().wait(0.02)


def report_failures_of(*bodies: str) -> Callable[[dict[str, Any]], Any]:
    def answer(event: dict[str, Any]) -> Any:
        return {
            "batchItemFailures": [
                {"itemIdentifier": r["messageId"]} for r in event["Records"] if r["body"] in bodies
            ]
        }

    return answer


# --- Queues and triggers from the template ----------------------------------------------------


def test_given_a_queue_listed_before_its_dlq_when_created_then_the_dlq_comes_first_and_redrive_is_set(
    sqs: Any,
) -> None:
    recording = RecordingSqs(sqs)
    suffix = secrets.token_hex(4)

    urls = create_queues(recording, synthetic_template(), suffix)

    assert recording.created == [f"kaibo-WorkDeadLetterQueue-{suffix}", f"kaibo-WorkQueue-{suffix}"]
    assert set(urls) == {"WorkQueue", "WorkDeadLetterQueue"}
    work = sqs.get_queue_attributes(QueueUrl=urls["WorkQueue"], AttributeNames=["All"])["Attributes"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=urls["WorkDeadLetterQueue"], AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    assert json.loads(work["RedrivePolicy"]) == {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2}
    assert work["VisibilityTimeout"] == "1"
    dlq = sqs.get_queue_attributes(QueueUrl=urls["WorkDeadLetterQueue"], AttributeNames=["All"])["Attributes"]
    assert dlq["MessageRetentionPeriod"] == "1209600"
    assert "RedrivePolicy" not in dlq


def test_given_a_fifo_queue_then_it_is_created_as_fifo(sqs: Any) -> None:
    template = {"Resources": {"Ordered": {"Type": "AWS::SQS::Queue", "Properties": {"FifoQueue": True}}}}

    url = create_queues(sqs, template, secrets.token_hex(4))["Ordered"]

    assert url.endswith(".fifo")
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["FifoQueue"])["Attributes"]
    assert attributes["FifoQueue"] == "true"


def test_given_the_template_then_triggers_name_the_sqs_event_and_the_schedule() -> None:
    template = synthetic_template()

    queue_triggers, schedule_triggers = triggers(template, function_specs(template))

    assert queue_triggers == [QueueTrigger("WorkerFunction", "WorkQueue", 5, reports_failures=True)]
    assert schedule_triggers == [ScheduleTrigger("WorkerFunction", "Tick", 60.0)]


def test_given_disabled_events_and_no_failure_reporting_then_triggers_reflect_them() -> None:
    template = synthetic_template()
    events = template["Resources"]["WorkerFunction"]["Properties"]["Events"]
    events["Work"]["Properties"].pop("FunctionResponseTypes")
    events["Work"]["Properties"].pop("BatchSize")
    events["Tick"]["Properties"]["Enabled"] = False

    queue_triggers, schedule_triggers = triggers(template, function_specs(template))

    assert queue_triggers == [QueueTrigger("WorkerFunction", "WorkQueue", 10, reports_failures=False)]
    assert schedule_triggers == []


@pytest.mark.parametrize(("structurer", "batch_size"), [(None, 5), ("rules", 5), ("bedrock", 1)])
def test_given_a_batch_size_chosen_by_a_condition_then_the_trigger_takes_the_parameters_branch(
    structurer: str | None, batch_size: int
) -> None:
    template = synthetic_template()
    template["Parameters"] = {"Structurer": {"Type": "String", "Default": "rules"}}
    template["Conditions"] = {
        "BedrockStructurer": {"Fn::Equals": [{"Ref": "Structurer"}, "bedrock"]},
        "NotBedrock": {"Fn::Not": [{"Condition": "BedrockStructurer"}]},
    }
    work = template["Resources"]["WorkerFunction"]["Properties"]["Events"]["Work"]["Properties"]
    work["BatchSize"] = {"Fn::If": ["NotBedrock", 5, 1]}
    given = {} if structurer is None else {"Structurer": structurer}

    queue_triggers, _ = triggers(template, function_specs(template), given)

    assert [t.batch_size for t in queue_triggers] == [batch_size]


def test_given_the_real_template_then_its_queues_and_schedules_are_the_triggers() -> None:
    from kaibo_local.template import load_template

    template = load_template()
    queue_triggers, schedule_triggers = triggers(template, function_specs(template))
    assert queue_triggers == [
        QueueTrigger("StructureFunction", "StructuringQueue", 5, reports_failures=True),
        QueueTrigger("WebhookDispatchFunction", "WebhookQueue", 5, reports_failures=True),
    ]
    assert schedule_triggers == [
        ScheduleTrigger("SweeperFunction", "Sweep", 60.0),
        ScheduleTrigger("PurgeFunction", "Purge", 300.0),
        ScheduleTrigger("WebhookDispatchFunction", "Relay", 60.0),
    ]


# --- The poller ---------------------------------------------------------------------------------


def test_given_messages_when_polled_then_the_handler_gets_sqs_records_and_they_are_deleted(
    sqs: Any, queues: Queues
) -> None:
    ids = send(
        sqs,
        queues.work,
        "one",
        "two",
        MessageAttributes={"kind": {"DataType": "String", "StringValue": "test"}},
    )
    handler = RecordingHandler()
    poller = QueuePoller(sqs, queues.trigger, queues.work, handler)

    poll_until(lambda: sum(len(b) for b in handler.bodies()) >= 2, lambda: poller.poll_once(wait_seconds=0))

    records = [record for batch in handler.batches for record in batch["Records"]]
    assert sorted(r["messageId"] for r in records) == sorted(ids)
    work_arn = sqs.get_queue_attributes(QueueUrl=queues.work, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    for record in records:
        assert record["eventSource"] == "aws:sqs"
        assert record["eventSourceARN"] == work_arn
        assert record["receiptHandle"]
        assert record["body"] in ("one", "two")
        assert record["attributes"]["ApproximateReceiveCount"] == "1"
        assert record["messageAttributes"]["kind"]["stringValue"] == "test"
        assert record["messageAttributes"]["kind"]["dataType"] == "String"
        assert len(record["md5OfBody"]) == 32
    assert handler.contexts[0].function_name == "WorkerFunction"
    assert counts(sqs, queues.work) == (0, 0)


def test_given_a_batch_then_the_handler_gets_at_most_batch_size_records(sqs: Any, queues: Queues) -> None:
    send(sqs, queues.work, *[f"m{i}" for i in range(7)])
    handler = RecordingHandler()
    poller = QueuePoller(sqs, queues.trigger, queues.work, handler)

    poll_until(lambda: sum(len(b) for b in handler.bodies()) == 7, lambda: poller.poll_once(wait_seconds=0))

    assert max(len(b) for b in handler.bodies()) <= 5


def test_given_reported_item_failures_then_only_those_stay_and_are_redelivered(
    sqs: Any, queues: Queues
) -> None:
    send(sqs, queues.work, "ok-1", "fails", "ok-2")
    handler = RecordingHandler(answer=report_failures_of("fails"))
    poller = QueuePoller(sqs, queues.trigger, queues.work, handler)

    poll_until(lambda: sum(len(b) for b in handler.bodies()) >= 3, lambda: poller.poll_once(wait_seconds=0))
    assert counts(sqs, queues.work) == (0, 1)  # the two others are deleted, "fails" is in flight

    handler.answer = lambda _event: None
    poll_until(lambda: handler.delivered("fails") == 2, lambda: poller.poll_once(wait_seconds=0))

    redelivery = next(
        batch for batch in handler.batches[1:] if "fails" in [r["body"] for r in batch["Records"]]
    )
    (record,) = redelivery["Records"]
    assert record["attributes"]["ApproximateReceiveCount"] == "2"
    assert handler.delivered("ok-1") == handler.delivered("ok-2") == 1
    assert counts(sqs, queues.work) == (0, 0)


def test_given_a_poison_message_then_it_reaches_the_dlq_after_max_receive_count(
    sqs: Any, queues: Queues
) -> None:
    send(sqs, queues.work, "poison")
    handler = RecordingHandler(answer=report_failures_of("poison"))
    poller = QueuePoller(sqs, queues.trigger, queues.work, handler)
    in_dlq: list[dict[str, Any]] = []

    def step() -> None:
        poller.poll_once(wait_seconds=0)
        in_dlq.extend(
            sqs.receive_message(QueueUrl=queues.dead_letters, WaitTimeSeconds=0).get("Messages", [])
        )

    poll_until(lambda: bool(in_dlq), step)

    assert [m["Body"] for m in in_dlq] == ["poison"]
    assert handler.delivered("poison") == 2  # maxReceiveCount
    assert counts(sqs, queues.work) == (0, 0)


def test_given_a_handler_that_raises_then_the_whole_batch_is_redelivered(sqs: Any, queues: Queues) -> None:
    send(sqs, queues.work, "a", "b")

    def explode(_event: dict[str, Any]) -> Any:
        raise RuntimeError("the worker crashed")

    handler = RecordingHandler(answer=explode)
    poller = QueuePoller(sqs, queues.trigger, queues.work, handler)

    poll_until(lambda: sum(len(b) for b in handler.bodies()) >= 2, lambda: poller.poll_once(wait_seconds=0))
    assert counts(sqs, queues.work) == (0, 2)  # nothing deleted

    handler.answer = lambda _event: None
    poll_until(
        lambda: handler.delivered("a") == 2 and handler.delivered("b") == 2,
        lambda: poller.poll_once(wait_seconds=0),
    )
    assert counts(sqs, queues.work) == (0, 0)


def test_given_an_invalid_failure_report_then_the_whole_batch_is_redelivered(
    sqs: Any, queues: Queues
) -> None:
    send(sqs, queues.work, "x")
    handler = RecordingHandler(
        answer=lambda _event: {"batchItemFailures": [{"itemIdentifier": "not-in-batch"}]}
    )
    poller = QueuePoller(sqs, queues.trigger, queues.work, handler)

    poll_until(lambda: handler.delivered("x") == 1, lambda: poller.poll_once(wait_seconds=0))

    assert counts(sqs, queues.work) == (0, 1)


def test_given_a_trigger_without_failure_reporting_then_a_report_is_ignored_and_all_are_deleted(
    sqs: Any, queues: Queues
) -> None:
    send(sqs, queues.work, "p", "q")
    trigger = QueueTrigger("WorkerFunction", "WorkQueue", 5, reports_failures=False)
    handler = RecordingHandler(answer=report_failures_of("p", "q"))
    poller = QueuePoller(sqs, trigger, queues.work, handler)

    poll_until(lambda: sum(len(b) for b in handler.bodies()) >= 2, lambda: poller.poll_once(wait_seconds=0))

    assert counts(sqs, queues.work) == (0, 0)


def test_given_an_empty_queue_then_poll_once_returns_zero_without_invoking(sqs: Any, queues: Queues) -> None:
    handler = RecordingHandler()
    assert QueuePoller(sqs, queues.trigger, queues.work, handler).poll_once(wait_seconds=0) == 0
    assert handler.batches == []


def test_given_a_started_poller_then_it_delivers_in_the_background_until_stopped(
    sqs: Any, queues: Queues
) -> None:
    handler = RecordingHandler()
    poller = QueuePoller(sqs, queues.trigger, queues.work, handler).start()
    try:
        send(sqs, queues.work, "background")
        poll_until(lambda: handler.delivered("background") == 1)
    finally:
        poller.stop()
    assert counts(sqs, queues.work) == (0, 0)


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (None, set()),
        ({}, set()),
        ({"batchItemFailures": None}, set()),
        ({"batchItemFailures": []}, set()),
        ({"batchItemFailures": [{"itemIdentifier": "b"}]}, {"b"}),
        ({"batchItemFailures": [{"itemIdentifier": ""}]}, {"a", "b"}),
        ({"batchItemFailures": [{"itemIdentifier": None}]}, {"a", "b"}),
        ({"batchItemFailures": [{"id": "a"}]}, {"a", "b"}),
        ({"batchItemFailures": [{"itemIdentifier": "zzz"}]}, {"a", "b"}),
        ({"batchItemFailures": "a"}, {"a", "b"}),
        ("not a response", {"a", "b"}),
    ],
)
def test_given_a_failure_report_then_failed_ids_are_read_as_lambda_reads_them(
    result: Any, expected: set[str]
) -> None:
    assert failed_message_ids(result, ["a", "b"]) == expected


def test_given_binary_message_attributes_then_records_carry_them_base64_in_lambdas_shape() -> None:
    event = sqs_event(
        [
            {
                "MessageId": "m",
                "ReceiptHandle": "r",
                "Body": "b",
                "MessageAttributes": {"blob": {"DataType": "Binary", "BinaryValue": b"\x00\xff"}},
            }
        ],
        "arn:aws:sqs:us-east-1:123456789012:q",
    )

    assert event["Records"][0]["messageAttributes"]["blob"] == {
        "binaryValue": "AP8=",
        "dataType": "Binary",
        "stringListValues": [],
        "binaryListValues": [],
    }


# --- Schedules ----------------------------------------------------------------------------------

TICK = ScheduleTrigger("WorkerFunction", "Tick", 60.0)


def test_given_a_schedule_when_fired_then_the_handler_gets_an_eventbridge_scheduled_event() -> None:
    handler = RecordingHandler()
    timer = ScheduleTimer(TICK, handler)

    timer.fire()

    (event,) = handler.batches
    assert event["source"] == "aws.events"
    assert event["detail-type"] == "Scheduled Event"
    assert event["detail"] == {}
    assert event["resources"] == ["arn:aws:events:us-east-1:123456789012:rule/Tick"]
    assert event["time"].endswith("Z")
    assert event["id"]
    assert handler.contexts[0].function_name == "WorkerFunction"
    assert timer.fired == 1


def test_given_a_failing_scheduled_function_then_fire_logs_and_counts_it() -> None:
    def explode(_event: dict[str, Any]) -> Any:
        raise RuntimeError("purge failed")

    timer = ScheduleTimer(TICK, RecordingHandler(answer=explode))
    timer.fire()
    assert timer.fired == 1


def test_given_an_after_run_hook_then_it_gets_what_the_function_returned_and_never_after_a_failure() -> None:
    seen: list[Any] = []
    timer = ScheduleTimer(
        TICK, RecordingHandler(answer=lambda _event: {"memories": 2}), after_run=seen.append
    )
    timer.fire()
    assert seen == [{"memories": 2}]

    def explode(_event: dict[str, Any]) -> Any:
        raise RuntimeError("purge failed")

    ScheduleTimer(TICK, RecordingHandler(answer=explode), after_run=seen.append).fire()
    assert seen == [{"memories": 2}]


@pytest.mark.parametrize(
    ("purge_result", "compact"),
    [
        ({"applied": 0, "entries": 0, "memories": 0, "events": 0, "complete": True}, False),
        ({"applied": 1, "entries": 1, "memories": 0, "events": 0, "complete": True}, True),
        ({"applied": 0, "entries": 3, "memories": 2, "events": 0, "complete": False}, True),
        ({"applied": 0, "entries": 0, "memories": 0, "events": 5, "complete": True}, True),
        (None, True),  # an answer that cannot be read: erased text must never stay on disk
        ({"complete": True}, True),
    ],
)
def test_the_folder_is_compacted_after_a_purge_run_only_when_it_erased_anything(
    purge_result: Any, compact: bool
) -> None:
    assert erased_anything(purge_result) is compact


@pytest.fixture
def running_timer() -> Iterator[tuple[ScheduleTimer, RecordingHandler]]:
    handler = RecordingHandler()
    timer = ScheduleTimer(TICK, handler, every_seconds=0.05).start()
    yield timer, handler
    timer.stop()


def test_given_a_started_timer_then_it_fires_repeatedly_until_stopped(
    running_timer: tuple[ScheduleTimer, RecordingHandler],
) -> None:
    timer, handler = running_timer

    poll_until(lambda: timer.fired >= 3)
    timer.stop()
    stopped_at = timer.fired
    threading.Event().wait(0.3)  # six intervals: a timer still running would fire again

    assert timer.fired == stopped_at
    assert len(handler.batches) == stopped_at
    assert len({event["id"] for event in handler.batches}) == stopped_at


#: "At once": well under one poll round (a 1 s long poll) and the 5 s a stop waits for a running loop.
STOP_AT_ONCE_SECONDS = 0.5


def test_given_timers_and_pollers_never_started_then_stop_returns_at_once_and_runs_nothing(
    sqs: Any, queues: Queues
) -> None:
    """The stack stops what it started so far when its start fails (kaibo_local/stack.py): a stop
    must not wait for a loop that never ran, nor run one (no thread, no invocation, no receive)."""
    send(sqs, queues.work, "untouched")
    timer_handler, poller_handler = RecordingHandler(), RecordingHandler()
    timer = ScheduleTimer(TICK, timer_handler, every_seconds=0.01)
    poller = QueuePoller(sqs, queues.trigger, queues.work, poller_handler)
    loop_names = {"schedule-Tick", f"poll-{queues.trigger.queue}"}
    before = set(threading.enumerate())

    deadline = time.monotonic() + STOP_AT_ONCE_SECONDS
    timer.stop()
    poller.stop()
    assert time.monotonic() < deadline, "stop waited for a loop that was never started"

    threading.Event().wait(0.2)  # twenty timer intervals: a loop started by stop would have run
    assert [t.name for t in set(threading.enumerate()) - before if t.name in loop_names] == []
    assert (timer.fired, timer_handler.batches, poller_handler.batches) == (0, [], [])
    assert counts(sqs, queues.work) == (1, 0)  # still visible: nothing received it


def test_given_a_non_positive_interval_then_the_timer_refuses_it() -> None:
    with pytest.raises(ValueError, match="positive"):
        ScheduleTimer(TICK, RecordingHandler(), every_seconds=0)


@pytest.mark.parametrize(
    ("expression", "seconds"),
    [
        ("rate(5 minutes)", 300),
        ("rate(1 minute)", 60),
        ("rate(1 hour)", 3600),
        ("rate(12 hours)", 43200),
        ("rate(2 days)", 172800),
        (" rate(1 day) ", 86400),
    ],
)
def test_given_a_rate_expression_then_its_interval_in_seconds(expression: str, seconds: float) -> None:
    assert rate_seconds(expression) == seconds


@pytest.mark.parametrize(
    "expression",
    [
        "cron(0 12 * * ? *)",
        "rate(0 minutes)",
        "rate(1 minutes)",  # AWS refuses a plural unit for 1...
        "rate(5 minute)",  # ...and a singular one for more
        "rate(5 seconds)",
        "rate(-1 hours)",
        "rate(five minutes)",
        "",
    ],
)
def test_given_anything_but_a_valid_rate_then_rate_seconds_refuses_it(expression: str) -> None:
    with pytest.raises(ValueError, match="rate"):
        rate_seconds(expression)
