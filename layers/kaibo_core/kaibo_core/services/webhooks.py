"""Webhooks as a project manages them: create (the secret shown once), list, get, delete, rotate
the secret, send a test event, read the delivery attempts (docs/webhooks.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from kaibo_core.core import webhook_signing, webhooks
from kaibo_core.core.clock import Clock, format_instant, utc_now
from kaibo_core.core.errors import NotFoundError, TooManyRequestsError, UnprocessableError
from kaibo_core.core.limits import (
    WEBHOOK_TEST_INTERVAL_SECONDS,
    WEBHOOK_TESTS_PER_PROJECT,
    WEBHOOK_TESTS_WINDOW_SECONDS,
)
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.webhooks import AttemptRecord, EventType, OutboxEvent, Subscription


class WebhookStore(Protocol):
    def create(self, sub: Subscription) -> Subscription: ...
    def get(self, project: ProjectId, webhook_id: str) -> Subscription | None: ...
    def subscriptions(self, project: ProjectId) -> list[Subscription]: ...
    def delete(self, project: ProjectId, webhook_id: str) -> bool: ...
    def set_secrets(
        self, project: ProjectId, webhook_id: str, ciphertexts: Sequence[str], previous_until: str | None
    ) -> bool: ...
    def emit_test(
        self, project: ProjectId, webhook_id: str, now: str, earliest_previous: str
    ) -> tuple[OutboxEvent, ...]: ...
    def attempts(self, project: ProjectId, webhook_id: str, limit: int) -> list[AttemptRecord]: ...


class SecretCipher(Protocol):
    def encrypt(self, project: str, webhook_id: str, secret: str) -> str: ...
    def decrypt(self, project: str, webhook_id: str, ciphertext: str) -> str: ...


class Relay(Protocol):
    def relay(self, events: Sequence[OutboxEvent]) -> None: ...


@dataclass(frozen=True, slots=True)
class CreatedWebhook:
    webhook: Subscription
    secret: str


def _missing(webhook_id: str) -> NotFoundError:
    return NotFoundError("webhook_not_found", f"No webhook {webhook_id!r} in this project.")


class WebhooksService:
    def __init__(
        self,
        store: WebhookStore,
        cipher: SecretCipher,
        relay: Relay,
        check_url: Callable[[str], None],
        *,
        clock: Clock = utc_now,
    ) -> None:
        self._store = store
        self._cipher = cipher
        self._relay = relay
        self._check_url = check_url
        self._clock = clock

    def create(
        self, project: ProjectId, url: str, events: Sequence[EventType], description: str = ""
    ) -> CreatedWebhook:
        self._refuse_bad_url(url)
        unknown = sorted(set(events) - webhooks.SUBSCRIBABLE)
        if unknown or not events:
            raise UnprocessableError(
                "webhook_events_invalid",
                f"events must name one or more of {', '.join(sorted(webhooks.SUBSCRIBABLE))}"
                + (f" (not {', '.join(unknown)})" if unknown else ""),
            )
        webhook_id = webhooks.new_webhook_id()
        secret = webhook_signing.new_secret()
        draft = Subscription(
            project_id=project,
            id=webhook_id,
            url=url,
            events=tuple(dict.fromkeys(events)),
            description=description,
            created_at=self._now(),
            from_seq=0,
            secret_ciphertexts=(self._cipher.encrypt(project, webhook_id, secret),),
        )
        try:
            stored = self._store.create(draft)
        except webhooks.TooManyWebhooksError as exc:
            raise UnprocessableError("too_many_webhooks", f"{exc}; delete one first.") from exc
        return CreatedWebhook(stored, secret)

    def subscriptions(self, project: ProjectId) -> list[Subscription]:
        return self._store.subscriptions(project)

    def get(self, project: ProjectId, webhook_id: str) -> Subscription:
        found = self._store.get(project, webhook_id) if webhooks.is_webhook_id(webhook_id) else None
        if found is None:
            raise _missing(webhook_id)
        return found

    def delete(self, project: ProjectId, webhook_id: str) -> None:
        if not webhooks.is_webhook_id(webhook_id) or not self._store.delete(project, webhook_id):
            raise _missing(webhook_id)

    def rotate_secret(self, project: ProjectId, webhook_id: str) -> tuple[Subscription, str, str]:
        """A new secret; the current one keeps signing (a second signature) for the overlap.
        Returns the webhook, the new secret, and when the old one stops signing."""
        current = self.get(project, webhook_id)
        secret = webhook_signing.new_secret()
        until = format_instant(self._clock() + timedelta(seconds=webhooks.ROTATION_OVERLAP_SECONDS))
        ciphertexts = (self._cipher.encrypt(project, webhook_id, secret), *current.secret_ciphertexts[:1])
        if not self._store.set_secrets(project, webhook_id, ciphertexts, until):
            raise _missing(webhook_id)
        return current, secret, until

    def send_test(self, project: ProjectId, webhook_id: str) -> OutboxEvent:
        """A ``webhook.test`` event to this webhook, at most one per WEBHOOK_TEST_INTERVAL_SECONDS
        (``429 webhook_test_too_soon``) and WEBHOOK_TESTS_PER_PROJECT per project in any
        WEBHOOK_TESTS_WINDOW_SECONDS (``429 webhook_tests_too_many``), with the seconds left in
        ``Retry-After``."""
        webhook = self.get(project, webhook_id)
        now = self._clock()
        try:
            events = self._store.emit_test(
                project, webhook_id, format_instant(now), format_instant(webhooks.earliest_previous_test(now))
            )
        except webhooks.WebhookTestTooSoonError as exc:
            wait = webhooks.seconds_until_next_test(exc.last_sent_at, now)
            raise TooManyRequestsError(
                "webhook_test_too_soon",
                f"Webhook {webhook_id!r} was sent a test event less than {WEBHOOK_TEST_INTERVAL_SECONDS} "
                f"seconds ago; send the next one in {wait} seconds.",
                retry_after_seconds=wait,
                details={"retryAfterSeconds": wait, "intervalSeconds": WEBHOOK_TEST_INTERVAL_SECONDS},
            ) from exc
        except webhooks.WebhookTestsTooManyError as exc:
            wait = webhooks.seconds_until(exc.next_allowed_at, now, WEBHOOK_TESTS_WINDOW_SECONDS)
            if webhook.last_test_at is not None:  # then this webhook's own interval must be over too
                wait = max(wait, webhooks.seconds_until_next_test(webhook.last_test_at, now))
            raise TooManyRequestsError(
                "webhook_tests_too_many",
                f"This project's webhooks were sent {WEBHOOK_TESTS_PER_PROJECT} test events in the last "
                f"{WEBHOOK_TESTS_WINDOW_SECONDS} seconds; send the next one in {wait} seconds.",
                retry_after_seconds=wait,
                details={
                    "retryAfterSeconds": wait,
                    "limit": WEBHOOK_TESTS_PER_PROJECT,
                    "windowSeconds": WEBHOOK_TESTS_WINDOW_SECONDS,
                },
            ) from exc
        if not events:
            raise _missing(webhook_id)  # deleted meanwhile
        self._relay.relay(events)
        return events[0]

    def deliveries(self, project: ProjectId, webhook_id: str, limit: int) -> list[AttemptRecord]:
        self.get(project, webhook_id)
        return self._store.attempts(project, webhook_id, limit)

    def _refuse_bad_url(self, url: str) -> None:
        try:
            self._check_url(url)
        except ValueError as exc:
            reason = str(getattr(exc, "code", "invalid"))
            raise UnprocessableError("webhook_url_refused", str(exc), {"reason": reason}) from exc

    def _now(self) -> str:
        return format_instant(self._clock())
