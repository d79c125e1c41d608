"""Webhook events around a change's commit: ``prepare`` gives the outbox writes for the change's
own transaction; ``relay`` (after the commit) queues them for fan-out and marks them relayed. A
relay that fails is left to the sweeper, which queues every event still unrelayed a minute
later: committed events are never lost, and a duplicate relay is dropped at delivery."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger

from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.webhooks import FanOut, Notification, OutboxEvent

if TYPE_CHECKING:
    from kaibo_core.adapters.dynamodb_webhooks import DynamoWebhookStore, PreparedEmit
    from kaibo_core.adapters.sqs_webhooks import SqsWebhookQueue

logger = Logger(service="kaibo", child=True)


class WebhookOutbox:
    def __init__(self, store: DynamoWebhookStore, queue: SqsWebhookQueue) -> None:
        self._store = store
        self._queue = queue

    def prepare(
        self, project: ProjectId, notifications: Sequence[Notification], now: str
    ) -> PreparedEmit | None:
        return self._store.prepare(project, notifications, now)

    def relay(self, events: Sequence[OutboxEvent]) -> None:
        """Best effort: the change is committed whatever happens here."""
        if not events:
            return
        try:
            self._queue.fan_out([FanOut(e.project_id, e.seq) for e in events])
            for event in events:
                self._store.mark_relayed(ProjectId(event.project_id), event.seq)
        except Exception as exc:
            logger.warning(
                "webhook relay deferred to the sweeper",
                extra={"error": type(exc).__name__, "seqs": [e.seq for e in events]},
            )
