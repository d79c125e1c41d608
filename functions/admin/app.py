"""Admin routes: create projects and API keys, revoke keys. Authorized by the admin key."""

# No `from __future__ import annotations`: Powertools reads the route signatures'
# annotations at run time to validate requests and build the OpenAPI document.

# First of all: no garbage collection until the first invocation has returned (cold_start.py).
from kaibo_core.runtime import cold_start  # isort: skip

cold_start.pause_collector()

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Path
from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.api import mapping
from kaibo_core.api.models import (
    CreateKeyRequest,
    CreateKeyResponse,
    CreateProjectRequest,
    CreateProjectResponse,
)
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.runtime import wiring
from kaibo_core.runtime.deadlines import within_remaining_time
from kaibo_core.runtime.http import create_resolver, injected, principal, resolve, responses
from kaibo_core.runtime.observability import logger
from kaibo_core.services.admin import AdminService

app = create_resolver()

ProjectIdParam = Annotated[str, Path(pattern=r"^prj_[0-9A-Z]{26}$")]
KeyIdParam = Annotated[str, Path(pattern=r"^[a-z0-9]{16}$")]


def service() -> AdminService:
    return injected(app, "service", AdminService, wiring.admin_service)


@app.post(
    "/v1/admin/projects",
    status_code=201,
    summary="Create a project and its first API key",
    responses=responses(201, "Created; the API key is in the body, once"),
)
def create_project(request: Annotated[CreateProjectRequest, Body()]) -> CreateProjectResponse:
    principal(app).require_admin()
    created = service().create_project(request.name, request.timeZone)
    logger.info("project created", extra={"projectId": created.key.project_id, "keyId": created.key.key_id})
    return mapping.created_project(created)


@app.post(
    "/v1/admin/projects/<project_id>/keys",
    status_code=201,
    summary="Create another API key",
    responses=responses(201, "Created; the API key is in the body, once"),
)
def create_key(project_id: ProjectIdParam, request: Annotated[CreateKeyRequest, Body()]) -> CreateKeyResponse:
    principal(app).require_admin()
    created = service().create_key(ProjectId(project_id), request.scopes)
    logger.info("key created", extra={"projectId": project_id, "keyId": created.key_id})
    return mapping.created_key(created)


@app.delete(
    "/v1/admin/keys/<key_id>",
    summary="Revoke an API key",
    responses=responses(204, "Revoked", content={}),
)
def revoke_key(key_id: KeyIdParam) -> Response[str]:
    principal(app).require_admin()
    service().revoke_key(key_id)
    logger.info("key revoked", extra={"keyId": key_id})
    return Response(status_code=204, body="")


@cold_start.resume_collector_after_first_invocation
@logger.inject_lambda_context(log_event=False)
@within_remaining_time
def lambda_handler(
    event: dict[str, Any], context: LambdaContext, service: AdminService | None = None
) -> dict[str, Any]:
    return resolve(app, event, context, service=service)
