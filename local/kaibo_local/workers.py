"""Queues, queue pollers and schedules of template.yaml, run on one machine.

Lambda's SQS trigger and EventBridge schedules do not exist in the emulator, so
the local stack does their job: each ``AWS::SQS::Queue`` is created (with its
redrive policy, so poison messages reach the DLQ), each function's ``SQS``
event gets a poller that invokes it with SQS-shaped batches and honours
``batchItemFailures`` (ReportBatchItemFailures), and each ``Schedule`` event
fires on a timer. Handlers come from a loader (kaibo_local.gateway.load_handler
or kaibo_local.containers), which decides where and how concurrently they run.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Self

from kaibo_local.gateway import ACCOUNT, REGION, Handler, LambdaContext
from kaibo_local.template import FunctionSpec, chosen, parameter_values, resources_of_type

log = logging.getLogger("kaibo_local.workers")

QUEUE_TYPE = "AWS::SQS::Queue"
#: SQS's own limit on one ReceiveMessage / DeleteMessageBatch.
SQS_MAX_BATCH = 10
_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}
_QUEUE_ATTRIBUTES = (
    "VisibilityTimeout",
    "MessageRetentionPeriod",
    "DelaySeconds",
    "ReceiveMessageWaitTimeSeconds",
    "MaximumMessageSize",
    "FifoQueue",
    "ContentBasedDeduplication",
)


def queue_name(logical_id: str, suffix: str, fifo: bool = False) -> str:
    return f"kaibo-{logical_id}-{suffix}" + (".fifo" if fifo else "")


def _get_att_resource(value: Any) -> str | None:
    """``{"Fn::GetAtt": ["Q", "Arn"]}`` (or ``"Q.Arn"``) → ``"Q"``; anything else → None."""
    if not isinstance(value, Mapping) or "Fn::GetAtt" not in value:
        return None
    argument = value["Fn::GetAtt"]
    if isinstance(argument, str):
        argument = argument.split(".", 1)
    return str(argument[0])


def _attribute_text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _queue_attributes(properties: Mapping[str, Any], arns: Mapping[str, str]) -> dict[str, str]:
    attributes = {name: _attribute_text(properties[name]) for name in _QUEUE_ATTRIBUTES if name in properties}
    redrive = properties.get("RedrivePolicy")
    if redrive:
        target = redrive.get("deadLetterTargetArn")
        dlq = _get_att_resource(target)
        if dlq is not None:
            target = arns[dlq]
        attributes["RedrivePolicy"] = json.dumps(
            {"deadLetterTargetArn": target, "maxReceiveCount": int(redrive.get("maxReceiveCount", 3))}
        )
    return attributes


def _creation_order(queues: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Logical ids with every dead-letter queue before the queues that redrive to it."""
    ordered: list[str] = []
    visiting: set[str] = set()

    def visit(logical_id: str) -> None:
        if logical_id in ordered:
            return
        if logical_id in visiting:
            raise ValueError(f"queue {logical_id}: its redrive policies form a cycle")
        visiting.add(logical_id)
        redrive = (queues[logical_id].get("Properties") or {}).get("RedrivePolicy") or {}
        dlq = _get_att_resource(redrive.get("deadLetterTargetArn"))
        if dlq is not None:
            if dlq not in queues:
                raise ValueError(f"queue {logical_id}: dead-letter queue {dlq} is not in the template")
            visit(dlq)
        visiting.discard(logical_id)
        ordered.append(logical_id)

    for logical_id in queues:
        visit(logical_id)
    return ordered


def create_queues(sqs: Any, template: Mapping[str, Any], suffix: str) -> dict[str, str]:
    """Every queue of the template (dead-letter queues first); logical id → queue URL."""
    queues = dict(resources_of_type(template, QUEUE_TYPE))
    urls: dict[str, str] = {}
    arns: dict[str, str] = {}
    for logical_id in _creation_order(queues):
        properties = queues[logical_id].get("Properties") or {}
        name = queue_name(logical_id, suffix, fifo=properties.get("FifoQueue") is True)
        url = sqs.create_queue(QueueName=name, Attributes=_queue_attributes(properties, arns))["QueueUrl"]
        urls[logical_id] = url
        arns[logical_id] = queue_arn(sqs, url)
    return urls


def queue_arn(sqs: Any, queue_url: str) -> str:
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]
    return str(attributes["QueueArn"])


@dataclass(frozen=True)
class QueueTrigger:
    function: str
    queue: str  # logical id
    batch_size: int
    reports_failures: bool


@dataclass(frozen=True)
class ScheduleTrigger:
    function: str
    name: str
    every_seconds: float


def triggers(
    template: Mapping[str, Any], specs: Iterable[FunctionSpec], parameters: Mapping[str, str] | None = None
) -> tuple[list[QueueTrigger], list[ScheduleTrigger]]:
    """The enabled SQS and Schedule/ScheduleV2 events of ``specs``' functions; a setting chosen by a
    condition (``!If``) takes the branch ``parameters`` choose (template defaults for the others)."""
    values = parameter_values(template, parameters)
    queue_triggers: list[QueueTrigger] = []
    schedule_triggers: list[ScheduleTrigger] = []
    for spec in specs:
        events = (template["Resources"][spec.logical_id].get("Properties") or {}).get("Events") or {}
        for name, event in events.items():
            props = event.get("Properties") or {}
            if props.get("Enabled") is False or props.get("State") == "DISABLED":
                continue
            if event.get("Type") == "SQS":
                queue = _get_att_resource(props.get("Queue"))
                if queue is None:
                    raise ValueError(
                        f"{spec.logical_id}.Events.{name}: Queue must be !GetAtt <Queue>.Arn of this template"
                    )
                queue_triggers.append(
                    QueueTrigger(
                        spec.logical_id,
                        queue,
                        int(chosen(props.get("BatchSize", 10), template, values)),
                        "ReportBatchItemFailures" in (props.get("FunctionResponseTypes") or []),
                    )
                )
            elif event.get("Type") in ("Schedule", "ScheduleV2"):
                expression = str(props.get("Schedule") or props.get("ScheduleExpression"))
                schedule_triggers.append(ScheduleTrigger(spec.logical_id, name, rate_seconds(expression)))
    return queue_triggers, schedule_triggers


def rate_seconds(expression: str) -> float:
    """Seconds between runs of an EventBridge ``rate(...)`` expression (as strict as AWS about units)."""
    match = _RATE.match(expression.strip())
    if not match:
        raise ValueError(f"only rate(...) schedules run locally, not {expression!r}")
    value, unit = int(match.group(1)), match.group(2)
    if value <= 0 or (value == 1) == unit.endswith("s"):
        singular = unit.rstrip("s")
        raise ValueError(f"{expression!r}: write rate(1 {singular}) or rate(N {singular}s) with N > 1")
    return value * _UNIT_SECONDS[unit.rstrip("s")]


def _lambda_message_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """SQS's MessageAttributes as Lambda delivers them (camelCase keys, binary as base64)."""
    converted: dict[str, Any] = {}
    for name, attribute in attributes.items():
        value: dict[str, Any] = {
            "stringListValues": list(attribute.get("StringListValues") or []),
            "binaryListValues": [
                base64.b64encode(v).decode() for v in attribute.get("BinaryListValues") or []
            ],
            "dataType": attribute.get("DataType"),
        }
        if "StringValue" in attribute:
            value["stringValue"] = attribute["StringValue"]
        if "BinaryValue" in attribute:
            raw = attribute["BinaryValue"]
            value["binaryValue"] = base64.b64encode(raw).decode() if isinstance(raw, bytes) else raw
        converted[name] = value
    return converted


def sqs_event(messages: list[dict[str, Any]], queue_arn: str) -> dict[str, Any]:
    """The event Lambda's SQS trigger sends for ``messages`` (as ReceiveMessage returned them)."""
    records = []
    for m in messages:
        record = {
            "messageId": m["MessageId"],
            "receiptHandle": m["ReceiptHandle"],
            "body": m["Body"],
            "attributes": dict(m.get("Attributes") or {}),
            "messageAttributes": _lambda_message_attributes(m.get("MessageAttributes") or {}),
            "md5OfBody": m.get("MD5OfBody")
            or hashlib.md5(m["Body"].encode(), usedforsecurity=False).hexdigest(),
            "eventSource": "aws:sqs",
            "eventSourceARN": queue_arn,
            "awsRegion": REGION,
        }
        if m.get("MD5OfMessageAttributes"):
            record["md5OfMessageAttributes"] = m["MD5OfMessageAttributes"]
        records.append(record)
    return {"Records": records}


def failed_message_ids(result: Any, message_ids: list[str]) -> set[str]:
    """Which messages to leave on the queue, from a ReportBatchItemFailures response.

    As Lambda reads it: no response, or an empty or null ``batchItemFailures``, is a full success;
    an invalid response (not an object, an item without a non-empty ``itemIdentifier``, an id
    not in the batch) fails the whole batch.
    """
    if result is None:
        return set()
    if not isinstance(result, Mapping):
        return set(message_ids)
    failures = result.get("batchItemFailures") or []
    if not isinstance(failures, list):
        return set(message_ids)
    failed: set[str] = set()
    for failure in failures:
        identifier = failure.get("itemIdentifier") if isinstance(failure, Mapping) else None
        if not isinstance(identifier, str) or identifier not in message_ids:
            return set(message_ids)
        failed.add(identifier)
    return failed


class _BackgroundLoop:
    """A daemon thread running ``_run`` until ``stop``; stopping one never started is harmless."""

    def __init__(self, name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop after the current round, waiting ``timeout`` at most for it to end."""
        self.request_stop()
        self.join(timeout)

    def request_stop(self) -> None:
        """Ask the loop to end after its current round; don't wait (see ``join``)."""
        self._stop.set()

    def join(self, timeout: float) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout=timeout)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _run(self) -> None:
        raise NotImplementedError


class QueuePoller(_BackgroundLoop):
    """Lambda's SQS event source mapping: receive, invoke, delete what succeeded."""

    def __init__(self, sqs: Any, trigger: QueueTrigger, queue_url: str, handler: Handler) -> None:
        self._sqs = sqs
        self._trigger = trigger
        self._url = queue_url
        self._arn = queue_arn(sqs, queue_url)
        self._handler = handler
        super().__init__(name=f"poll-{trigger.queue}")

    def poll_once(self, wait_seconds: int = 1) -> int:
        """One receive/invoke/delete round; the number of messages received.

        A handler that raises leaves the whole batch for redelivery after the visibility
        timeout; with ReportBatchItemFailures, the messages it reports stay and the rest go.
        """
        messages = self._sqs.receive_message(
            QueueUrl=self._url,
            MaxNumberOfMessages=max(1, min(self._trigger.batch_size, SQS_MAX_BATCH)),
            WaitTimeSeconds=wait_seconds,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        if not messages:
            return 0
        try:
            result = self._handler(sqs_event(messages, self._arn), LambdaContext(self._trigger.function))
        except Exception:
            # While the stack stops, a batch cut short is expected: no traceback for it.
            (log.debug if self.stopping else log.exception)(
                "%s failed a batch of %d; messages return after the visibility timeout",
                self._trigger.function,
                len(messages),
            )
            return len(messages)
        failed = (
            failed_message_ids(result, [m["MessageId"] for m in messages])
            if self._trigger.reports_failures
            else set()
        )
        done = [m for m in messages if m["MessageId"] not in failed]
        for start in range(0, len(done), SQS_MAX_BATCH):
            answer = self._sqs.delete_message_batch(
                QueueUrl=self._url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(done[start : start + SQS_MAX_BATCH])
                ],
            )
            for failure in answer.get("Failed") or []:
                log.warning("could not delete a message from %s: %s", self._trigger.queue, failure)
        return len(messages)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except Exception:
                (log.debug if self.stopping else log.exception)("poller for %s", self._trigger.queue)
                self._stop.wait(1)


class ScheduleTimer(_BackgroundLoop):
    """An EventBridge schedule: invoke the function every ``every_seconds`` (at a fixed rate)."""

    def __init__(
        self,
        trigger: ScheduleTrigger,
        handler: Handler,
        every_seconds: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        after_run: Callable[[Any], None] | None = None,
    ) -> None:
        self._trigger = trigger
        self._handler = handler
        self._after_run = after_run
        self._every = every_seconds if every_seconds is not None else trigger.every_seconds
        if not self._every > 0:
            raise ValueError(f"schedule {trigger.name}: the interval must be positive, not {self._every}")
        self._clock = clock
        self._count_lock = threading.Lock()
        self.fired = 0
        super().__init__(name=f"schedule-{trigger.name}")

    def event(self) -> dict[str, Any]:
        """The scheduled event EventBridge would send now."""
        return {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": ACCOUNT,
            "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": REGION,
            "resources": [f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{self._trigger.name}"],
            "detail": {},
        }

    def fire(self) -> None:
        """Invoke the function once with a scheduled event, then ``after_run`` with what it
        returned, if given (a failure of either is logged, not raised)."""
        try:
            result = self._handler(self.event(), LambdaContext(self._trigger.function))
            if self._after_run is not None:
                self._after_run(result)
        except Exception:
            (log.debug if self.stopping else log.exception)("scheduled %s failed", self._trigger.function)
        with self._count_lock:
            self.fired += 1

    def _run(self) -> None:
        due = self._clock() + self._every
        while not self._stop.wait(max(0.0, due - self._clock())):
            self.fire()
            # A fixed rate, not a fixed pause: a run longer than the interval skips the missed ticks.
            due += self._every
            now = self._clock()
            if due <= now:
                due += (math.floor((now - due) / self._every) + 1) * self._every
