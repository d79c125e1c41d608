"""Read routes of memories and jobs (read-only):

- ``GET /v1/memories/{id}``: one memory in any status (tombstoned ones without content);
- ``POST /v1/explain``: the versions that led to a memory, oldest first;
- ``GET /v1/jobs/{id}``: a structuring job's status and the memories it made;
- ``GET /v1/ledger``: the deletion ledger's entries in order; ``GET /v1/receipts/{id}``: one
  forget's receipt and its state (docs/forget.md).
"""

# No `from __future__ import annotations`: Powertools reads the route signatures'
# annotations at run time to validate requests and build the OpenAPI document.

# First of all: no garbage collection until the first invocation has returned (cold_start.py).
from kaibo_core.runtime import cold_start  # isort: skip

cold_start.pause_collector()

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Body, Query
from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.api import mapping
from kaibo_core.api.models import (
    ExplainRequest,
    ExplainResponse,
    JobOut,
    LedgerPage,
    MemoryOut,
    QuerySeq,
    ReceiptStateOut,
)
from kaibo_core.runtime import wiring
from kaibo_core.runtime.deadlines import within_remaining_time
from kaibo_core.runtime.http import create_resolver, injected, principal, resolve, responses
from kaibo_core.runtime.observability import logger
from kaibo_core.services.jobs import JobsService
from kaibo_core.services.ledger import LedgerService
from kaibo_core.services.memories import MemoriesService

app = create_resolver()


def memories() -> MemoriesService:
    return injected(app, "memories", MemoriesService, wiring.memories_service)


def jobs() -> JobsService:
    return injected(app, "jobs", JobsService, wiring.jobs_service)


def ledger() -> LedgerService:
    return injected(app, "ledger", LedgerService, wiring.ledger_service)


@app.get(
    "/v1/memories/<memory_id>",
    summary="Get one memory (any status)",
    responses=responses(200, "The memory (no content once tombstoned)"),
)
def get_memory(memory_id: str) -> MemoryOut:
    project = principal(app).project_with_scope("read")
    return mapping.memory_out(memories().get(project, memory_id))


@app.post(
    "/v1/explain",
    summary="Explain a memory: the versions that led to it, oldest first, with source events",
    responses=responses(200, "The chain of versions, oldest first"),
)
def explain(request: Annotated[ExplainRequest, Body()]) -> ExplainResponse:
    project = principal(app).project_with_scope("read")
    return mapping.explain_response(memories().explain(project, request.memoryId))


@app.get("/v1/jobs/<job_id>", summary="Get a structuring job", responses=responses(200, "The job"))
def get_job(job_id: str) -> JobOut:
    project = principal(app).project_with_scope("read")
    return mapping.job_out(jobs().get(project, job_id))


@app.get(
    "/v1/ledger",
    summary="Page through the deletion ledger, oldest first",
    responses=responses(200, "A page of ledger entries"),
)
def get_ledger(
    fromSeq: Annotated[QuerySeq, Query()] = 1,  # noqa: N803 - wire name
) -> LedgerPage:
    project = principal(app).project_with_scope("read")
    return mapping.ledger_page(*ledger().page(project, fromSeq))


@app.get(
    "/v1/receipts/<receipt_id>",
    summary="Get a forget's receipt and its state",
    responses=responses(200, "The receipt's ledger entry and its state"),
)
def get_receipt(receipt_id: str) -> ReceiptStateOut:
    project = principal(app).project_with_scope("read")
    return mapping.receipt_state_out(*ledger().receipt(project, receipt_id))


@cold_start.resume_collector_after_first_invocation
@logger.inject_lambda_context(log_event=False)
@within_remaining_time
def lambda_handler(
    event: dict[str, Any],
    context: LambdaContext,
    memories: MemoriesService | None = None,
    jobs: JobsService | None = None,
    ledger: LedgerService | None = None,
) -> dict[str, Any]:
    return resolve(app, event, context, memories=memories, jobs=jobs, ledger=ledger)
