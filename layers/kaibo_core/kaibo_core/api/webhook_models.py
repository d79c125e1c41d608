"""HTTP models of the webhook routes (docs/webhooks.md), and their mapping from the domain."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kaibo_core.api.models import RequestModel, SparseWireModel
from kaibo_core.core.webhooks import MAX_DESCRIPTION_CHARS, AttemptRecord, OutboxEvent, Subscription

SubscribableEvent = Literal["memory.forgotten", "memory.structured", "memory.superseded", "memory.canceled"]


class WebhookCreateRequest(RequestModel):
    url: str = Field(
        min_length=1,
        max_length=2048,
        description="https only (the local stack may allow http://127.0.0.1, docs/webhooks.md); "
        "private, loopback, link-local and metadata addresses are refused, at creation and at "
        "every delivery after DNS resolution.",
        examples=["https://example.com/kaibo-hook"],
    )
    events: list[SubscribableEvent] = Field(min_length=1, max_length=4, examples=[["memory.forgotten"]])
    description: str = Field(default="", max_length=MAX_DESCRIPTION_CHARS)


class WebhookOut(SparseWireModel):
    id: str
    url: str
    events: list[str]
    description: str
    createdAt: str  # noqa: N815
    status: Literal["active", "failing"] = Field(
        description="failing: an event exhausted its retries (docs/webhooks.md); "
        "a success makes it active again."
    )
    failingSince: str | None = None  # noqa: N815
    previousSecretValidUntil: str | None = Field(  # noqa: N815
        default=None, description="After a rotation: the old secret also signs until then."
    )


class WebhookCreated(WebhookOut):
    secret: str = Field(description="whsec_…: shown once, never again (rotate-secret makes a new one).")


class WebhookList(SparseWireModel):
    webhooks: list[WebhookOut]


class SecretRotated(SparseWireModel):
    id: str
    secret: str = Field(description="The new secret, shown once.")
    previousSecretValidUntil: str  # noqa: N815


class EventSent(SparseWireModel):
    eventId: str  # noqa: N815
    seq: int


class DeliveryAttemptOut(SparseWireModel):
    eventId: str  # noqa: N815
    type: str
    seq: int
    attempt: int
    at: str
    statusCode: int | None = None  # noqa: N815
    latencyMs: int  # noqa: N815
    error: str | None = None
    outcome: Literal["delivered", "retrying", "failed"]
    nextAttemptAt: str | None = None  # noqa: N815


class DeliveriesPage(SparseWireModel):
    deliveries: list[DeliveryAttemptOut]


def webhook_out(sub: Subscription) -> WebhookOut:
    return WebhookOut(**_fields(sub))


def webhook_created(sub: Subscription, secret: str) -> WebhookCreated:
    return WebhookCreated(**_fields(sub), secret=secret)


def _fields(sub: Subscription) -> dict[str, object]:
    return {
        "id": sub.id,
        "url": sub.url,
        "events": list(sub.events),
        "description": sub.description,
        "createdAt": sub.created_at,
        "status": sub.status,
        "failingSince": sub.failing_since,
        "previousSecretValidUntil": sub.previous_until,
    }


def event_sent(event: OutboxEvent) -> EventSent:
    return EventSent(eventId=event.id, seq=event.seq)


def deliveries_page(records: list[AttemptRecord]) -> DeliveriesPage:
    return DeliveriesPage(
        deliveries=[
            DeliveryAttemptOut(
                eventId=r.event_id,
                type=r.type,
                seq=r.seq,
                attempt=r.attempt,
                at=r.at,
                statusCode=r.status_code,
                latencyMs=r.latency_ms,
                error=r.error,
                outcome=r.outcome,
                nextAttemptAt=r.next_attempt_at,
            )
            for r in records
        ]
    )
