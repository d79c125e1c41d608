"""``POST /v1/forget`` (scope ``forget``): resolve the set, append the ledger entry, tombstone at
once (kaibo_core.services.forgetting, docs/forget.md). Logs carry counts and ids only, never the
reason or any text."""

# No `from __future__ import annotations`: Powertools reads the route signatures'
# annotations at run time to validate requests and build the OpenAPI document.

# First of all: no garbage collection until the first invocation has returned (cold_start.py).
from kaibo_core.runtime import cold_start  # isort: skip

cold_start.pause_collector()

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.api import mapping
from kaibo_core.api.models import ForgetRequest, ForgetResponse
from kaibo_core.runtime import wiring
from kaibo_core.runtime.deadlines import within_remaining_time
from kaibo_core.runtime.http import create_resolver, injected, principal, resolve, responses
from kaibo_core.runtime.observability import logger, metrics
from kaibo_core.services.forgetting import ForgetService

app = create_resolver()


def forgetting() -> ForgetService:
    return injected(app, "forget", ForgetService, wiring.forget_service)


@app.post(
    "/v1/forget",
    summary="Forget memories: tombstone now, purge after the grace window, a receipt in the ledger",
    responses=responses(200, "The set (a dry run), or what was forgotten and its receipt"),
)
def forget(request: Annotated[ForgetRequest, Body()]) -> ForgetResponse:
    caller = principal(app)
    project = caller.project_with_scope("forget")
    outcome = forgetting().forget(project, mapping.forget_request(request))
    logger.info(
        "forget",
        extra={
            "dryRun": outcome.dry_run,
            "memories": len(outcome.memories),
            "events": len(outcome.event_ids),
            "receiptId": outcome.receipt.id if outcome.receipt else None,
            "replayed": outcome.replayed,
        },
    )
    forgotten = 0 if outcome.receipt is None or outcome.replayed else len(outcome.memories)
    metrics.add_metric("MemoriesForgotten", MetricUnit.Count, forgotten)
    # A dry run shows the memories' text only to a key that may read it anyway.
    return mapping.forget_response(outcome, may_read="read" in caller.scopes)


@cold_start.resume_collector_after_first_invocation
@logger.inject_lambda_context(log_event=False)
@within_remaining_time
@metrics.log_metrics
def lambda_handler(
    event: dict[str, Any],
    context: LambdaContext,
    forget: ForgetService | None = None,
) -> dict[str, Any]:
    return resolve(app, event, context, forget=forget)
