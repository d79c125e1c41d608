"""Read routes of memories and jobs (read-only):

- ``GET /v1/memories/{id}``: one memory in any status (tombstoned ones without content);
- ``POST /v1/explain``: the versions that led to a memory, oldest first;
- ``GET /v1/jobs/{id}``: a structuring job's status and the memories it made.
"""

# No `from __future__ import annotations`: Powertools reads the route signatures'
# annotations at run time to validate requests and build the OpenAPI document.

# First of all: no garbage collection until the first invocation has returned (cold_start.py).
from kaibo_core import cold_start  # isort: skip

cold_start.pause_collector()

from functools import lru_cache
from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.adapters.aws import dynamodb_client
from kaibo_core.adapters.dynamodb_jobs import DynamoJobStore
from kaibo_core.adapters.dynamodb_memories import DynamoMemoryStore
from kaibo_core.http import ERROR_RESPONSES, create_resolver, principal, resolve
from kaibo_core.models.api import ExplainRequest, ExplainResponse, JobOut, MemoryOut
from kaibo_core.observability import logger
from kaibo_core.services.jobs import JobsService
from kaibo_core.services.memories import MemoriesService
from kaibo_core.settings import get_settings

app = create_resolver()


@lru_cache(maxsize=1)
def service() -> MemoriesService:
    settings = get_settings()
    return MemoriesService(
        DynamoMemoryStore(dynamodb_client(), settings.memories_table, settings.index_table)
    )


@lru_cache(maxsize=1)
def jobs() -> JobsService:
    return JobsService(DynamoJobStore(dynamodb_client(), get_settings().jobs_table))


@app.get("/v1/memories/<memory_id>", summary="Get one memory (any status)", responses=ERROR_RESPONSES)
def get_memory(memory_id: str) -> MemoryOut:
    project = principal(app).project_with_scope("read")
    return MemoryOut.model_validate(service().get(project, memory_id).as_served())


@app.post(
    "/v1/explain",
    summary="Explain a memory: the versions that led to it, oldest first, with source events",
    responses=ERROR_RESPONSES,
)
def explain(request: Annotated[ExplainRequest, Body()]) -> ExplainResponse:
    project = principal(app).project_with_scope("read")
    return ExplainResponse.model_validate(service().explain(project, request.memoryId))


@app.get("/v1/jobs/<job_id>", summary="Get a structuring job", responses=ERROR_RESPONSES)
def get_job(job_id: str) -> JobOut:
    project = principal(app).project_with_scope("read")
    return JobOut.model_validate(jobs().get(project, job_id).as_served())


@cold_start.resume_collector_after_first_invocation
@logger.inject_lambda_context(log_event=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return resolve(app, event, context)
