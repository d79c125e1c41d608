"""POST /v1/remember — append events to a stream (see docs/api.md)."""

# No `from __future__ import annotations`: Powertools reads the route signatures'
# annotations at run time to validate requests and build the OpenAPI document.

from functools import lru_cache
from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.adapters.aws import dynamodb_client
from kaibo_core.adapters.dynamodb_events import DynamoEventStore
from kaibo_core.adapters.dynamodb_memories import DynamoMemoryStore
from kaibo_core.http import ERROR_RESPONSES, create_resolver, principal, resolve
from kaibo_core.models.api import EventReceipt, ProvisionalMemoryOut, RememberRequest, RememberResponse
from kaibo_core.observability import logger, metrics
from kaibo_core.services.remember import RememberService
from kaibo_core.settings import get_settings

app = create_resolver()


@lru_cache(maxsize=1)
def service() -> RememberService:
    settings = get_settings()
    client = dynamodb_client()
    return RememberService(
        DynamoEventStore(client, settings.events_table, settings.idempotency_table),
        memories=DynamoMemoryStore(client, settings.memories_table, settings.index_table),
    )


@app.post(
    "/v1/remember",
    status_code=202,
    summary="Append events to a stream",
    responses={**ERROR_RESPONSES, 202: {"description": "Events appended or replayed"}},
)
def remember(request: Annotated[RememberRequest, Body()]) -> RememberResponse:
    project = principal(app).project_with_scope("write")
    outcome = service().remember(project, request)
    metrics.add_metric("EventsAppended", MetricUnit.Count, outcome.appended)
    metrics.add_metric("EventsReplayed", MetricUnit.Count, outcome.replays)
    metrics.add_metric("HeadConflicts", MetricUnit.Count, outcome.head_conflicts)
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
    return RememberResponse(
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
        memories=[
            ProvisionalMemoryOut(id=m.id, status=m.status, type=m.type, content=m.content or "")
            for m in outcome.memories
        ],
    )


@logger.inject_lambda_context(log_event=False)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return resolve(app, event, context)
