"""POST /v1/recall — the smallest cited set of memories answering a question, or abstain.

With ``Accept: text/event-stream`` the answer comes as server-sent events
``candidates``, ``packed`` and ``final`` (docs/streaming.md): on the local stack
``candidates`` reaches the client before packing is done; on AWS, API Gateway and
the Python runtime deliver the whole stream at once when the function returns.
"""

# No `from __future__ import annotations`: Powertools reads the route signatures'
# annotations at run time to validate requests and build the OpenAPI document.

# First of all: no garbage collection until the first invocation has returned (cold_start.py).
from kaibo_core.runtime import cold_start  # isort: skip

cold_start.pause_collector()

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.api import mapping
from kaibo_core.api.models import RecallRequest, RecallResponse
from kaibo_core.core.models.recall import RecallAnswer
from kaibo_core.runtime import wiring
from kaibo_core.runtime.deadlines import within_remaining_time
from kaibo_core.runtime.http import create_resolver, injected, principal, resolve, responses
from kaibo_core.runtime.observability import logger
from kaibo_core.runtime.streaming import SseWriter, response_stream, wants_event_stream
from kaibo_core.services.recall import RecallService, RecallStats

app = create_resolver()


def service() -> RecallService:
    return injected(app, "service", RecallService, wiring.recall_service)


def _log(stats: RecallStats, answer: RecallAnswer) -> None:
    # Numbers only: questions and memories are people's words and never reach the logs.
    logger.info(
        "recalled",
        extra={
            "terms": stats.terms,
            "postingsRead": stats.postings_read,
            "truncatedTerms": stats.truncated_terms,
            "candidates": stats.candidates,
            "fetched": stats.fetched,
            "selected": stats.selected,
            "cells": stats.cells,
            "cellPostingsRead": stats.cell_postings_read,
            "semanticCandidates": stats.semantic_candidates,
            "contextEvents": stats.context_events,
            "contextCandidates": stats.context_candidates,
            "outdatedDropped": stats.outdated_dropped,
            "olderMarked": stats.older_marked,
            "items": len(answer.items),
            "usedTokens": answer.used_tokens,
            "abstainReason": answer.abstain_reason,
        },
    )


@app.post(
    "/v1/recall",
    summary="Recall the smallest cited set of memories that answers a question",
    responses=responses(
        200,
        "Items best first, or an explicit abstain. With Accept: text/event-stream, "
        "the events candidates, packed and final (final = this JSON).",
        content={
            "application/json": {"model": RecallResponse},
            "text/event-stream": {"schema": {"type": "string"}},
        },
    ),
)
def recall(request: Annotated[RecallRequest, Body()]) -> RecallResponse | str:
    # ``| str``: the event stream's text, returned in a Response with its own content type.
    project = principal(app).project_with_scope("read")
    query = mapping.recall_query(request)
    if not wants_event_stream(app.current_event.headers.get("accept")):
        answer, stats = service().recall(project, query)
        _log(stats, answer)
        return mapping.recall_response(answer)
    sse = SseWriter(response_stream(app.lambda_context))
    answer, stats = service().recall(
        project, query, on_candidates=lambda found: sse.emit("candidates", mapping.candidates_event(found))
    )
    body = mapping.recall_body(answer)
    sse.emit("packed", mapping.packed_event(body))
    sse.emit("final", RecallResponse.model_validate(body).model_dump(mode="json"))
    _log(stats, answer)
    return Response(  # type: ignore[return-value]  # Powertools passes a Response through
        status_code=200,
        content_type="text/event-stream; charset=utf-8",
        body=sse.body(),
        headers={"Cache-Control": "no-cache"},
    )


@cold_start.resume_collector_after_first_invocation
@logger.inject_lambda_context(log_event=False)
@within_remaining_time
def lambda_handler(
    event: dict[str, Any], context: LambdaContext, service: RecallService | None = None
) -> dict[str, Any]:
    return resolve(app, event, context, service=service)
