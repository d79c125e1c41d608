"""GET /v1/streams and GET /v1/streams/{stream}/events — read the event log back (for verify)."""

# No `from __future__ import annotations`: Powertools reads the route signatures'
# annotations at run time to validate requests and build the OpenAPI document.

# First of all: no garbage collection until the first invocation has returned (cold_start.py).
from kaibo_core.runtime import cold_start  # isort: skip

cold_start.pause_collector()

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.api import mapping
from kaibo_core.api.models import EventsPage, EventsPageLimit, QuerySeq, StreamsPage, StreamsPageLimit
from kaibo_core.core.limits import DEFAULT_EVENTS_PAGE, DEFAULT_STREAMS_PAGE
from kaibo_core.runtime import wiring
from kaibo_core.runtime.deadlines import within_remaining_time
from kaibo_core.runtime.http import create_resolver, injected, principal, resolve, responses
from kaibo_core.runtime.observability import logger
from kaibo_core.services.streams import StreamsService

app = create_resolver()


def service() -> StreamsService:
    return injected(app, "service", StreamsService, wiring.streams_service)


@app.get(
    "/v1/streams",
    summary="List the project's streams and their heads",
    responses=responses(200, "A page of streams, each with its head"),
)
def list_streams(
    cursor: Annotated[str | None, Query(max_length=512)] = None,
    limit: Annotated[StreamsPageLimit, Query()] = DEFAULT_STREAMS_PAGE,
) -> StreamsPage:
    project = principal(app).project_with_scope("read")
    return mapping.streams_page(service().heads_page(project, cursor, limit))


@app.get(
    "/v1/streams/<stream>/events",
    summary="Page through a stream's events",
    responses=responses(200, "A page of the stream's events, in sequence"),
)
def list_events(
    stream: str,
    fromSeq: Annotated[QuerySeq, Query()] = 1,  # noqa: N803 - wire name
    limit: Annotated[EventsPageLimit, Query()] = DEFAULT_EVENTS_PAGE,
) -> EventsPage:
    project = principal(app).project_with_scope("read")
    return mapping.events_page(service().events_page(project, stream, fromSeq, limit))


@cold_start.resume_collector_after_first_invocation
@logger.inject_lambda_context(log_event=False)
@within_remaining_time
def lambda_handler(
    event: dict[str, Any], context: LambdaContext, service: StreamsService | None = None
) -> dict[str, Any]:
    return resolve(app, event, context, service=service)
