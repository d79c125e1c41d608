"""GET /v1/memories/{id} — one memory in any status (tombstoned ones without content)."""

# No `from __future__ import annotations`: Powertools reads the route signatures'
# annotations at run time to validate requests and build the OpenAPI document.

from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.adapters.aws import dynamodb_client
from kaibo_core.adapters.dynamodb_memories import DynamoMemoryStore
from kaibo_core.http import ERROR_RESPONSES, create_resolver, principal, resolve
from kaibo_core.models.api import MemoryOut
from kaibo_core.observability import logger
from kaibo_core.services.memories import MemoriesService
from kaibo_core.settings import get_settings

app = create_resolver()


@lru_cache(maxsize=1)
def service() -> MemoriesService:
    settings = get_settings()
    return MemoriesService(
        DynamoMemoryStore(dynamodb_client(), settings.memories_table, settings.index_table)
    )


@app.get("/v1/memories/<memory_id>", summary="Get one memory (any status)", responses=ERROR_RESPONSES)
def get_memory(memory_id: str) -> MemoryOut:
    project = principal(app).project_with_scope("read")
    return MemoryOut.model_validate(service().get(project, memory_id).as_served())


@logger.inject_lambda_context(log_event=False)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return resolve(app, event, context)
