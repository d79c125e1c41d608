"""Webhook delivery (docs/webhooks.md): the webhook queue's consumer, and every minute the relay
of events whose function died between commit and relay (kaibo_core.services.webhook_dispatch).

A queue batch reports partial failures: a message whose handling raised (DynamoDB, KMS) is
retried by SQS, and after the queue's maxReceiveCount reaches its dead-letter queue. A receiver's
failure is not an exception: it schedules the next attempt itself. Each message's receive count
goes to the dispatcher: a delivery the invocation's deadline cut short on its last receive is
recorded as the receiver's timeout rather than failed once more.
"""

from __future__ import annotations

# First of all: no garbage collection until the first invocation has returned (cold_start.py).
from kaibo_core.runtime import cold_start  # isort: skip

cold_start.pause_collector()

from functools import partial
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.core.webhooks import Delivery, decode_message
from kaibo_core.runtime import wiring
from kaibo_core.runtime.deadlines import within_remaining_time
from kaibo_core.runtime.observability import failure_fields, log_failure, logger, metrics
from kaibo_core.services.webhook_dispatch import WebhookDispatcher

processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def receive_count(record: SQSRecord) -> int | None:
    """How many times SQS has delivered this message (None if the record does not say)."""
    count = record.attributes.get("ApproximateReceiveCount")
    return int(count) if isinstance(count, str) and count.isdigit() else None


def dispatch_record(record: SQSRecord, dispatcher: WebhookDispatcher) -> None:
    try:
        message = decode_message(record.body)
    except ValueError:
        logger.error("not a webhook message", extra={"messageId": record.message_id})
        raise
    ids: dict[str, Any] = {
        "projectId": message.project_id,
        "seq": message.seq,
        "messageId": record.message_id,
    }
    if isinstance(message, Delivery):
        ids |= {"webhookId": message.webhook_id, "attempt": message.attempt}
    try:
        outcome = dispatcher.handle(message, record.message_id, receive_count(record))
    except Exception as exc:
        logger.error("webhook dispatch failed", extra={**ids, **failure_fields(exc)})
        raise
    if outcome in {"delivered", "retrying", "failed"}:
        metrics.add_metric(f"WebhookAttempts{outcome.capitalize()}", MetricUnit.Count, 1)
    logger.info("webhook dispatch", extra={**ids, "outcome": outcome})


@cold_start.resume_collector_after_first_invocation
@logger.inject_lambda_context(log_event=False)
@within_remaining_time
@metrics.log_metrics
def lambda_handler(
    event: dict[str, Any],
    context: LambdaContext,
    dispatcher: WebhookDispatcher | None = None,
) -> dict[str, Any]:
    dispatcher = dispatcher or wiring.webhook_dispatcher()
    if "Records" not in event:  # the schedule: relay what a crashed function left behind
        try:
            relayed = dispatcher.relay_unrelayed()
        except Exception as exc:  # the next minute's run relays them
            raise log_failure("webhook relay", exc) from None
        if relayed:
            logger.warning("webhook events relayed by the schedule", extra={"relayed": relayed})
        return {"relayed": relayed}
    handler = partial(dispatch_record, dispatcher=dispatcher)
    return process_partial_response(  # type: ignore[return-value]  # a TypedDict of batchItemFailures
        event=event, record_handler=handler, processor=processor, context=context
    )
