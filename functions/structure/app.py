"""Structuring queue consumer: each message names a job; its events become memories.

Batches report partial failures (Powertools batch processing): a job that fails is
retried by SQS on its own, and after the queue's maxReceiveCount it lands in the
dead-letter queue (its job marked ``failed`` on the last attempt). A message that is
not a job message is a poison message: it fails every time and so reaches the DLQ.
"""

from __future__ import annotations

# First of all: no garbage collection until the first invocation has returned (cold_start.py).
from kaibo_core import cold_start  # isort: skip

cold_start.pause_collector()

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.adapters.aws import dynamodb_client
from kaibo_core.adapters.dynamodb_events import DynamoEventStore
from kaibo_core.adapters.dynamodb_index import DynamoTermIndex
from kaibo_core.adapters.dynamodb_jobs import DynamoJobStore
from kaibo_core.adapters.dynamodb_projects import DynamoProjectStore
from kaibo_core.adapters.dynamodb_structuring import DynamoStructuringStore
from kaibo_core.adapters.sqs_jobs import parse_job_message
from kaibo_core.observability import logger, metrics
from kaibo_core.services.structuring import StructuringService
from kaibo_core.settings import get_settings
from kaibo_core.structuring.choice import configured_structurer

# A batch whose every record failed is reported like any partial failure (each message retried
# on its own and, after maxReceiveCount, sent to the DLQ) instead of raising.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


@lru_cache(maxsize=1)
def service() -> tuple[StructuringService, DynamoJobStore]:
    settings = get_settings()
    client = dynamodb_client()
    projects = DynamoProjectStore(client, settings.projects_table)
    structuring = StructuringService(
        DynamoEventStore(client, settings.events_table, settings.idempotency_table),
        DynamoStructuringStore(client, settings.memories_table, settings.index_table),
        DynamoTermIndex(client, settings.index_table),
        configured_structurer(settings),
        project_time_zone=lru_cache(maxsize=1024)(projects.time_zone),  # set at creation, never changed
    )
    return structuring, DynamoJobStore(client, settings.jobs_table)


def structure_record(record: SQSRecord) -> None:
    project, job_id = parse_job_message(record.body)
    structuring, jobs = service()
    stats = structuring.structure_job(project, job_id, jobs)
    metrics.add_metric("EventsStructured", MetricUnit.Count, stats.events)
    metrics.add_metric("MemoriesStructured", MetricUnit.Count, stats.memories)
    metrics.add_metric("MemoriesSuperseded", MetricUnit.Count, stats.superseded + stats.canceled)
    # Numbers and ids only: event text never reaches the logs.
    logger.info("structured", extra={"jobId": job_id, **stats.counts()})


@cold_start.resume_collector_after_first_invocation
@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return process_partial_response(  # type: ignore[return-value]  # a TypedDict of batchItemFailures
        event=event, record_handler=structure_record, processor=processor, context=context
    )
