"""Webhook routes (scope ``write``; docs/webhooks.md):
- ``POST /v1/webhooks``: subscribe a URL to events; the signing secret is returned once;
- ``GET /v1/webhooks``, ``GET /v1/webhooks/{id}``, ``DELETE /v1/webhooks/{id}``;
- ``POST /v1/webhooks/{id}/rotate-secret``: a new secret; the old one keeps signing for the overlap;
- ``POST /v1/webhooks/{id}/test``: a ``webhook.test`` event to this webhook only;
- ``GET /v1/webhooks/{id}/deliveries``: recent attempts (status, latency, attempt, next retry).
Logs carry ids only: never a secret or a URL's query string.
"""

# No `from __future__ import annotations`: Powertools reads the route signatures'
# annotations at run time to validate requests and build the OpenAPI document.

# First of all: no garbage collection until the first invocation has returned (cold_start.py).
from kaibo_core.runtime import cold_start  # isort: skip

cold_start.pause_collector()

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.utilities.typing import LambdaContext

from kaibo_core.api import webhook_models as wire
from kaibo_core.api.models import DeliveriesPageLimit
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.runtime import wiring
from kaibo_core.runtime.deadlines import within_remaining_time
from kaibo_core.runtime.http import create_resolver, injected, principal, resolve, responses
from kaibo_core.runtime.observability import logger
from kaibo_core.services.webhooks import WebhooksService

app = create_resolver()

WebhookId = Annotated[str, Path(min_length=1, max_length=64, examples=["wh_0123456789abcdefghij"])]


def service() -> WebhooksService:
    return injected(app, "webhooks", WebhooksService, wiring.webhooks_service)


def project() -> ProjectId:
    return principal(app).project_with_scope("write")


@app.post(
    "/v1/webhooks",
    status_code=201,
    summary="Subscribe a URL to webhook events (the signing secret is shown once)",
    responses=responses(201, "Created; the secret is in the body, once"),
)
def create_webhook(request: Annotated[wire.WebhookCreateRequest, Body()]) -> wire.WebhookCreated:
    owner = project()
    created = service().create(owner, request.url, request.events, request.description)
    logger.info("webhook created", extra={"webhookId": created.webhook.id, "events": request.events})
    return wire.webhook_created(created.webhook, created.secret)


@app.get("/v1/webhooks", summary="List the project's webhooks", responses=responses(200, "The webhooks"))
def list_webhooks() -> wire.WebhookList:
    return wire.WebhookList(webhooks=[wire.webhook_out(sub) for sub in service().subscriptions(project())])


@app.get("/v1/webhooks/<webhook_id>", summary="Get one webhook", responses=responses(200, "The webhook"))
def get_webhook(webhook_id: WebhookId) -> wire.WebhookOut:
    return wire.webhook_out(service().get(project(), webhook_id))


@app.delete(
    "/v1/webhooks/<webhook_id>", summary="Delete a webhook", responses=responses(204, "Deleted", content={})
)
def delete_webhook(webhook_id: WebhookId) -> Response[str]:
    service().delete(project(), webhook_id)
    logger.info("webhook deleted", extra={"webhookId": webhook_id})
    return Response(status_code=204, body="")


@app.post(
    "/v1/webhooks/<webhook_id>/rotate-secret",
    summary="Rotate the signing secret (the old one also signs during the overlap)",
    responses=responses(200, "The new secret, shown once"),
)
def rotate_secret(webhook_id: WebhookId) -> wire.SecretRotated:
    _sub, secret, until = service().rotate_secret(project(), webhook_id)
    logger.info("webhook secret rotated", extra={"webhookId": webhook_id})
    return wire.SecretRotated(id=webhook_id, secret=secret, previousSecretValidUntil=until)


@app.post(
    "/v1/webhooks/<webhook_id>/test",
    status_code=202,
    summary="Send a webhook.test event to this webhook",
    responses=responses(202, "Queued for delivery"),
)
def send_test(webhook_id: WebhookId) -> wire.EventSent:
    return wire.event_sent(service().send_test(project(), webhook_id))


@app.get(
    "/v1/webhooks/<webhook_id>/deliveries",
    summary="Recent delivery attempts, newest first",
    responses=responses(200, "A page of delivery attempts"),
)
def deliveries(
    webhook_id: WebhookId, limit: Annotated[DeliveriesPageLimit, Query()] = 50
) -> wire.DeliveriesPage:
    return wire.deliveries_page(service().deliveries(project(), webhook_id, limit))


@cold_start.resume_collector_after_first_invocation
@logger.inject_lambda_context(log_event=False)
@within_remaining_time
def lambda_handler(
    event: dict[str, Any],
    context: LambdaContext,
    webhooks: WebhooksService | None = None,
) -> dict[str, Any]:
    return resolve(app, event, context, webhooks=webhooks)
