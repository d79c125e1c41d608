"""POST /v1/remember — append events to a stream (see docs/api.md)."""

# No `from __future__ import annotations`: Powertools reads the route signatures'
# annotations at run time to validate requests and build the OpenAPI document.

# First of all: no garbage collection until the first invocation has returned (cold_start.py).
from kaibo_core.runtime import cold_start  # isort: skip

cold_start.pause_collector()

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.api import mapping
from kaibo_core.api.models import RememberRequest, RememberResponse
from kaibo_core.core.models.events import RememberOutcome
from kaibo_core.runtime import wiring
from kaibo_core.runtime.deadlines import within_remaining_time
from kaibo_core.runtime.http import create_resolver, injected, principal, resolve, responses
from kaibo_core.runtime.observability import logger, metrics
from kaibo_core.runtime.settings import get_settings
from kaibo_core.services.remember import RememberService

app = create_resolver()


def service() -> RememberService:
    return injected(app, "service", RememberService, wiring.remember_service)


def _observe(outcome: RememberOutcome) -> None:
    """Metrics and one log line: counts and error classes only, never text."""
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


@app.post(
    "/v1/remember",
    status_code=202,
    summary="Append events to a stream",
    responses={
        **responses(202, "Events appended or replayed"),
        200: {"description": "With wait: true, once the job is done: the structured memories and the job"},
    },
)
def remember(request: Annotated[RememberRequest, Body()]) -> RememberResponse:
    project = principal(app).project_with_scope("write")
    remembering = service()
    outcome = remembering.remember(project, request.stream, mapping.new_events(request))
    _observe(outcome)
    if request.wait:
        outcome = remembering.wait(project, outcome, get_settings().wait_seconds)
    status, body = mapping.remember_response(outcome)
    if status == 202:
        return body
    # With wait: true and the job done, a 200 (a Response; Powertools passes it through).
    return Response(  # type: ignore[return-value]
        status_code=status, content_type="application/json", body=body.model_dump(mode="json")
    )


@cold_start.resume_collector_after_first_invocation
@logger.inject_lambda_context(log_event=False)
@within_remaining_time
@metrics.log_metrics
def lambda_handler(
    event: dict[str, Any], context: LambdaContext, service: RememberService | None = None
) -> dict[str, Any]:
    return resolve(app, event, context, service=service)
