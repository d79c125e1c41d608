"""Structuring queue consumer: each message names a job; its events become memories.

Batches report partial failures (Powertools batch processing): a job that fails is
retried by SQS on its own, and after the queue's maxReceiveCount it lands in the
dead-letter queue. Only then is its job marked ``failed``: on the message's last receive
(its ApproximateReceiveCount at KAIBO_STRUCTURING_MAX_RECEIVE_COUNT), never by counting the
deliveries of all the job's messages. A redriven dead letter structures the job. A message that
is not a job message is a poison message: it fails every time and so reaches the DLQ.
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

from kaibo_core.core.job_messages import parse_job_message
from kaibo_core.ports import JobStore
from kaibo_core.runtime import wiring
from kaibo_core.runtime.deadlines import within_remaining_time
from kaibo_core.runtime.observability import failure_fields, logger, metrics
from kaibo_core.runtime.settings import get_settings
from kaibo_core.services.structuring import JobFailure, StructuringService, StructuringStats

# A batch whose every record failed is reported like any partial failure (each message retried
# on its own and, after maxReceiveCount, sent to the DLQ) instead of raising.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def receive_count(record: SQSRecord) -> int | None:
    """How many times SQS has delivered this message (None if the record does not say)."""
    count = record.raw_event.get("attributes", {}).get("ApproximateReceiveCount")
    return int(count) if isinstance(count, str) and count.isdigit() else None


def is_last_receive(record: SQSRecord, max_receive_count: int) -> bool:
    """Does SQS move this message to the dead-letter queue if this receive fails? A record without
    a count (never from Lambda's trigger) is not on its last: its job is retried, never failed."""
    count = receive_count(record)
    return count is not None and count >= max_receive_count


def structure_record(
    record: SQSRecord, service: StructuringService, jobs: JobStore, max_receive_count: int
) -> None:
    try:
        project, job_id = parse_job_message(record.body)
    except ValueError:
        logger.error("not a job message", extra={"messageId": record.message_id})
        raise
    failures: list[JobFailure] = []
    last_receive = is_last_receive(record, max_receive_count)
    stats = StructuringStats()
    try:
        service.structure_job(
            project, job_id, jobs, on_failure=failures.append, last_receive=last_receive, stats=stats
        )
    except Exception as exc:
        # The batch processor reports the record as failed (retried, then the DLQ) and logs
        # nothing itself. One line, ids and the error's class only: an SDK error's message may
        # quote stored values, and event text never reaches the logs.
        ids = {
            "projectId": project,
            "jobId": job_id,
            "messageId": record.message_id,
            "receiveCount": receive_count(record),
        }
        found = failures[0].log_fields() if failures else {}  # none: starting or finishing the job failed
        logger.error("structuring failed", extra={**ids, **found, **failure_fields(exc)})
        raise
    finally:
        # What this receive did, whether the job finished or not: a model's failures on the events
        # of a job that fails later are failures all the same, and its committed memories count.
        publish_metrics(stats)
    # Numbers and ids only: event text never reaches the logs.
    logger.info("structured", extra={"projectId": project, "jobId": job_id, **stats.counts()})


def publish_metrics(stats: StructuringStats) -> None:
    metrics.add_metric("EventsStructured", MetricUnit.Count, stats.newly_structured_events)
    metrics.add_metric("MemoriesStructured", MetricUnit.Count, stats.memories)
    metrics.add_metric("MemoriesSuperseded", MetricUnit.Count, stats.superseded + stats.canceled)
    # Events the Bedrock model failed on and the rules structured instead (StructurerFallbacksAlarm).
    metrics.add_metric("StructurerFallbacks", MetricUnit.Count, stats.fallbacks)


@cold_start.resume_collector_after_first_invocation
@logger.inject_lambda_context(log_event=False)
@within_remaining_time
@metrics.log_metrics
def lambda_handler(
    event: dict[str, Any],
    context: LambdaContext,
    service: StructuringService | None = None,
    jobs: JobStore | None = None,
) -> dict[str, Any]:
    record_handler = partial(
        structure_record,
        service=service or wiring.structuring_service(),
        jobs=jobs or wiring.job_store(),
        max_receive_count=get_settings().structuring_max_receive_count,
    )
    return process_partial_response(  # type: ignore[return-value]  # a TypedDict of batchItemFailures
        event=event, record_handler=record_handler, processor=processor, context=context
    )
