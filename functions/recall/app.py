"""POST /v1/recall — the smallest cited set of memories answering a question, or abstain.

With ``Accept: text/event-stream`` the answer comes as server-sent events
``candidates``, ``packed`` and ``final`` (docs/streaming.md): on the local stack
``candidates`` reaches the client before packing is done; on AWS, API Gateway and
the Python runtime deliver the whole stream at once when the function returns.
"""

# No `from __future__ import annotations`: Powertools reads the route signatures'
# annotations at run time to validate requests and build the OpenAPI document.

# First of all: no garbage collection until the first invocation has returned (cold_start.py).
from kaibo_core import cold_start  # isort: skip

cold_start.pause_collector()

from functools import lru_cache
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.adapters.aws import dynamodb_client, dynamodb_reads
from kaibo_core.adapters.dynamodb_index import DynamoTermIndex
from kaibo_core.adapters.dynamodb_memories import DynamoMemoryStore
from kaibo_core.http import ERROR_RESPONSES, create_resolver, principal, resolve
from kaibo_core.models.api import RecallRequest, RecallResponse
from kaibo_core.observability import logger
from kaibo_core.services.recall import RecallService, RecallStats
from kaibo_core.settings import get_settings
from kaibo_core.streaming import SseWriter, response_stream, wants_event_stream

app = create_resolver()


@lru_cache(maxsize=1)
def service() -> RecallService:
    settings = get_settings()
    client = dynamodb_client()
    reads = dynamodb_reads(settings.direct_reads)
    return RecallService(
        DynamoTermIndex(reads, settings.index_table),
        DynamoMemoryStore(client, settings.memories_table, settings.index_table, reads=reads),
    )


def _log(stats: RecallStats, answer: dict[str, Any]) -> None:
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
            "items": len(answer["items"]),
            "usedTokens": answer["usedTokens"],
            "abstainReason": answer["abstain"].get("reason"),
        },
    )


@app.post(
    "/v1/recall",
    summary="Recall the smallest cited set of memories that answers a question",
    responses={
        **ERROR_RESPONSES,
        200: {
            "description": "Items best first, or an explicit abstain. With Accept: text/event-stream, "
            "the events candidates, packed and final (final = this JSON).",
            "content": {"application/json": {}, "text/event-stream": {}},
        },
    },
)
def recall(request: Annotated[RecallRequest, Body()]) -> RecallResponse | str:
    # ``| str``: the event stream's text, returned in a Response with its own content type.
    project = principal(app).project_with_scope("read")
    if not wants_event_stream(app.current_event.headers.get("accept")):
        answer, stats = service().recall(project, request)
        _log(stats, answer)
        return RecallResponse.model_validate(answer)
    sse = SseWriter(response_stream(app.lambda_context))
    answer, stats = service().recall(
        project, request, on_candidates=lambda data: sse.emit("candidates", data)
    )
    sse.emit("packed", {"items": answer["items"], "usedTokens": answer["usedTokens"]})
    sse.emit("final", RecallResponse.model_validate(answer).model_dump(mode="json"))
    _log(stats, answer)
    return Response(  # type: ignore[return-value]  # Powertools passes a Response through
        status_code=200,
        content_type="text/event-stream; charset=utf-8",
        body=sse.body(),
        headers={"Cache-Control": "no-cache"},
    )


@cold_start.resume_collector_after_first_invocation
@logger.inject_lambda_context(log_event=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return resolve(app, event, context)
