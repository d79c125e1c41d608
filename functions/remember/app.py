"""POST /v1/remember — append events to a stream (see docs/api.md)."""

# No `from __future__ import annotations`: Powertools reads the route signatures'
# annotations at run time to validate requests and build the OpenAPI document.

# First of all: no garbage collection until the first invocation has returned (cold_start.py).
from kaibo_core import cold_start  # isort: skip

cold_start.pause_collector()

from functools import lru_cache
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.adapters.aws import dynamodb_client, sqs_client
from kaibo_core.adapters.dynamodb_events import DynamoEventStore
from kaibo_core.adapters.dynamodb_jobs import DynamoJobStore
from kaibo_core.adapters.dynamodb_memories import DynamoMemoryStore
from kaibo_core.adapters.sqs_jobs import SqsJobQueue
from kaibo_core.http import ERROR_RESPONSES, create_resolver, principal, resolve
from kaibo_core.models.api import (
    EventReceipt,
    JobOut,
    ProvisionalMemoryOut,
    RememberRequest,
    RememberResponse,
)
from kaibo_core.models.memories import MemoryRecord
from kaibo_core.observability import logger, metrics
from kaibo_core.services.jobs import JobsService
from kaibo_core.services.remember import RememberOutcome, RememberService
from kaibo_core.settings import get_settings
from kaibo_core.storage_keys import ProjectId

app = create_resolver()


@lru_cache(maxsize=1)
def stores() -> tuple[DynamoJobStore, DynamoMemoryStore]:
    settings = get_settings()
    client = dynamodb_client()
    return (
        DynamoJobStore(client, settings.jobs_table),
        DynamoMemoryStore(client, settings.memories_table, settings.index_table),
    )


@lru_cache(maxsize=1)
def service() -> RememberService:
    settings = get_settings()
    jobs, memories = stores()
    return RememberService(
        DynamoEventStore(dynamodb_client(), settings.events_table, settings.idempotency_table, jobs=jobs),
        memories=memories,
        jobs=SqsJobQueue(sqs_client(), settings.structuring_queue_url),
    )


def _memories_out(memories: list[MemoryRecord]) -> list[ProvisionalMemoryOut]:
    return [
        ProvisionalMemoryOut(id=m.id, status=m.status, type=m.type, content=m.content or "") for m in memories
    ]


def _waited(
    project: ProjectId, outcome: RememberOutcome, body: RememberResponse
) -> RememberResponse | Response[Any]:
    """``wait: true``: 200 with the structured memories once the job is done, else 202 as usual."""
    if outcome.job_id is None:
        return body
    jobs, memories = stores()
    job = JobsService(jobs).wait(project, outcome.job_id, get_settings().wait_seconds)
    if job is None:
        current = jobs.get(project, outcome.job_id)
        body.job = None if current is None else JobOut.model_validate(current.as_served())
        return body
    body.job = JobOut.model_validate(job.as_served())
    if job.status != "done":
        return body
    found = memories.get_many(project, job.memory_ids)
    body.memories = _memories_out([found[m] for m in job.memory_ids if m in found])
    return Response(status_code=200, content_type="application/json", body=body.model_dump(mode="json"))


@app.post(
    "/v1/remember",
    status_code=202,
    summary="Append events to a stream",
    responses={**ERROR_RESPONSES, 202: {"description": "Events appended or replayed"}},
)
def remember(request: Annotated[RememberRequest, Body()]) -> RememberResponse:
    # With wait: true the answer may be a 200 (a Response); Powertools passes it through.
    project = principal(app).project_with_scope("write")
    outcome = service().remember(project, request)
    metrics.add_metric("EventsAppended", MetricUnit.Count, outcome.appended)
    metrics.add_metric("EventsReplayed", MetricUnit.Count, outcome.replays)
    metrics.add_metric("HeadConflicts", MetricUnit.Count, outcome.head_conflicts)
    if outcome.enqueue_failure is not None:
        # The job exists (it was written with the events): the sweeper re-queues it.
        metrics.add_metric("JobEnqueueFailures", MetricUnit.Count, 1)
        logger.error("job message not sent", extra={"error": type(outcome.enqueue_failure).__name__})
    if outcome.index_failures:
        # The events are stored and acknowledged; a replay of the same keys completes the index.
        metrics.add_metric("ProvisionalIndexFailures", MetricUnit.Count, len(outcome.index_failures))
        logger.error(
            "provisional index failed",
            extra={
                "failures": len(outcome.index_failures),
                "error": type(outcome.index_failures[0]).__name__,
            },
        )
    logger.info(
        "remembered",
        extra={
            "appended": outcome.appended,
            "replayed": outcome.replays,
            "attempts": outcome.attempts,
            "memories": len(outcome.memories),
        },
    )
    body = RememberResponse(
        jobId=outcome.job_id,
        events=[
            EventReceipt(
                id=e.record.id,
                stream=e.record.stream,
                seq=e.record.seq,
                hash=e.record.hash,
                prevHash=e.record.prev_hash,
                idempotencyKey=e.record.idempotency_key,
                replayed=e.replayed,
            )
            for e in outcome.events
        ],
        memories=_memories_out(outcome.memories),
    )
    return _waited(project, outcome, body) if request.wait else body  # type: ignore[return-value]


@cold_start.resume_collector_after_first_invocation
@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return resolve(app, event, context)
