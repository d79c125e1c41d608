"""Webhooks, the pure part: the event catalog, what each event carries, the delivery body and the
retry schedule (docs/webhooks.md).

An event is written into its project's **outbox** in the same transaction as the change it
reports, with the project's next **sequence number**: a transaction that did not commit emits
nothing, and one that did always has its event, whatever happens to the function afterwards. A
receiver orders events by ``seq`` (a mirror drops a ``memory.structured`` whose ``seq`` is lower
than the ``memory.forgotten`` it already applied for the same memory).

Events carry ids and counts only: never memory text, event text or a forget's reason.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Literal

from kaibo_core.core.clock import format_instant, parse_instant
from kaibo_core.core.limits import (
    WEBHOOK_TEST_INTERVAL_SECONDS,
    WEBHOOK_TESTS_PER_PROJECT,
    WEBHOOK_TESTS_WINDOW_SECONDS,
)

EventType = Literal[
    "memory.forgotten", "memory.structured", "memory.superseded", "memory.canceled", "webhook.test"
]

#: Every event a webhook can subscribe to (``webhook.test`` is sent by ``POST …/test`` only).
EVENT_TYPES: Final[tuple[EventType, ...]] = (
    "memory.forgotten",
    "memory.structured",
    "memory.superseded",
    "memory.canceled",
    "webhook.test",
)
SUBSCRIBABLE: Final = frozenset(EVENT_TYPES) - {"webhook.test"}

#: Most webhooks one project may have.
MAX_WEBHOOKS_PER_PROJECT: Final = 20
MAX_DESCRIPTION_CHARS: Final = 200
#: After ``rotate-secret``, the old secret keeps signing (a second signature) this long.
ROTATION_OVERLAP_SECONDS: Final = 24 * 3600

#: Seconds to wait before each attempt (Standard Webhooks' and Svix's schedule): attempt 1 at
#: once, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h — about 27.6 hours in all. Each wait
#: after the first gets ±20 % jitter, so that a receiver coming back is not hit by a wave.
RETRY_SCHEDULE_SECONDS: Final = (0, 5, 300, 1800, 7200, 18000, 36000, 36000)
JITTER_FRACTION: Final = 0.2

#: The webhook queue's maxReceiveCount (template.yaml, tests/contract/test_template.py): receives of
#: one message before SQS moves it to the dead-letter queue. On this receive a delivery the
#: invocation's deadline cut short is recorded as the receiver's timeout instead of failing again.
WEBHOOK_MAX_RECEIVE_COUNT: Final = 5

_WEBHOOK_ID: Final = re.compile(r"wh_[0-9a-z]{20}")


class TooManyWebhooksError(Exception):
    """The project has MAX_WEBHOOKS_PER_PROJECT webhooks already."""


@dataclass(frozen=True, slots=True)
class Notification:
    """One event about to be written to the outbox (its seq is given at commit)."""

    type: EventType
    data: Mapping[str, Any]
    #: Only this webhook receives it (``webhook.test``); None: every subscriber of ``type``.
    only_webhook: str | None = None


@dataclass(frozen=True, slots=True)
class OutboxEvent:
    """An event as committed: what the delivery body is built from."""

    project_id: str
    seq: int
    type: EventType
    created_at: str
    data: Mapping[str, Any]
    only_webhook: str | None = None

    @property
    def id(self) -> str:
        """The ``webhook-id``: the same on every attempt and every relay of this event, so that a
        receiver drops duplicates by it (Standard Webhooks)."""
        return event_id(self.project_id, self.seq)


@dataclass(frozen=True, slots=True)
class Subscription:
    project_id: str
    id: str
    url: str
    events: tuple[EventType, ...]
    description: str
    created_at: str
    #: Events with a lower seq were committed before the webhook existed: never sent to it.
    from_seq: int
    status: Literal["active", "failing"] = "active"
    failing_since: str | None = None
    secret_ciphertexts: tuple[str, ...] = field(default=(), repr=False)
    previous_until: str | None = None
    #: When its last test event was sent (never shown: the limits of ``POST …/test`` use it).
    last_test_at: str | None = None

    def wants(self, event: OutboxEvent) -> bool:
        if event.only_webhook is not None:
            return event.only_webhook == self.id
        return event.seq >= self.from_seq and event.type in self.events


def event_id(project_id: str, seq: int) -> str:
    digest = hashlib.sha256(f"{project_id}#{seq}".encode()).hexdigest()[:24]
    return f"msg_{digest}"


def is_webhook_id(value: str) -> bool:
    return _WEBHOOK_ID.fullmatch(value) is not None


def new_webhook_id() -> str:
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    return "wh_" + "".join(random.SystemRandom().choice(alphabet) for _ in range(20))


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One delivery attempt as the attempt log keeps it (no body, no response text)."""

    event_id: str
    type: str
    seq: int
    attempt: int
    at: str
    status_code: int | None
    latency_ms: int
    error: str | None
    outcome: Literal["delivered", "retrying", "failed"]
    next_attempt_at: str | None = None


# --- what each change emits ---------------------------------------------------------------------


def forgotten(
    receipt_id: str, ledger_seq: int, memory_ids: Sequence[str], event_ids: Sequence[str]
) -> Notification:
    return Notification(
        "memory.forgotten",
        {
            "receiptId": receipt_id,
            "ledgerSeq": ledger_seq,
            "memoryIds": sorted(memory_ids),
            "eventIds": sorted(event_ids),
        },
    )


def structured(
    job_id: str | None,
    source_event_id: str | None,
    memory_ids: Sequence[str],
    retired: Iterable[tuple[str, Literal["superseded", "canceled"], str]],
) -> list[Notification]:
    """A structuring commit: ``memory.structured`` for its memories, then one
    ``memory.superseded`` / ``memory.canceled`` per older memory it retired ``(id, status, by)``."""
    made = [
        Notification(
            "memory.structured",
            {"jobId": job_id, "eventId": source_event_id, "memoryIds": list(memory_ids)},
        )
    ]
    for old, status, by in retired:
        kind: EventType = "memory.canceled" if status == "canceled" else "memory.superseded"
        made.append(Notification(kind, {"memoryId": old, "byMemoryId": by}))
    return made


def ping(webhook_id: str) -> Notification:
    """The ``webhook.test`` event ``POST /v1/webhooks/{id}/test`` sends to one webhook."""
    return Notification("webhook.test", {"webhookId": webhook_id}, only_webhook=webhook_id)


class WebhookTestTooSoonError(Exception):
    """The webhook's previous test event was sent at ``last_sent_at``, less than
    WEBHOOK_TEST_INTERVAL_SECONDS before this one."""

    def __init__(self, last_sent_at: str) -> None:
        super().__init__(f"previous test event at {last_sent_at}")
        self.last_sent_at = last_sent_at


def earliest_previous_test(now: datetime) -> datetime:
    """A test event may be sent at ``now`` if the webhook's previous one was sent at this instant
    or before."""
    return now - timedelta(seconds=WEBHOOK_TEST_INTERVAL_SECONDS)


def seconds_until_next_test(last_sent_at: str, now: datetime) -> int:
    """Whole seconds until the next test event is allowed (1 at least; never more than the
    interval, whatever another container's clock said)."""
    interval = timedelta(seconds=WEBHOOK_TEST_INTERVAL_SECONDS)
    return seconds_until(parse_instant(last_sent_at) + interval, now, WEBHOOK_TEST_INTERVAL_SECONDS)


class WebhookTestsTooManyError(Exception):
    """The project was sent WEBHOOK_TESTS_PER_PROJECT test events in the last
    WEBHOOK_TESTS_WINDOW_SECONDS; the next one may be sent at ``next_allowed_at``."""

    def __init__(self, next_allowed_at: datetime) -> None:
        super().__init__(f"next test event allowed at {format_instant(next_allowed_at)}")
        self.next_allowed_at = next_allowed_at


def admit_project_test(recent: Sequence[str], now: datetime) -> tuple[str, ...]:
    """The project's test log once a test event is sent at ``now``: the instants of ``recent``
    still inside the window, oldest first, then ``now``. WebhookTestsTooManyError if the window
    holds WEBHOOK_TESTS_PER_PROJECT of them already: a test sent at ``t`` counts until
    ``t + WEBHOOK_TESTS_WINDOW_SECONDS``, excluded."""
    window = timedelta(seconds=WEBHOOK_TESTS_WINDOW_SECONDS)
    inside = sorted(sent for sent in map(parse_instant, recent) if sent > now - window)
    if len(inside) >= WEBHOOK_TESTS_PER_PROJECT:
        # Once this one leaves the window, WEBHOOK_TESTS_PER_PROJECT - 1 are left in it.
        raise WebhookTestsTooManyError(inside[-WEBHOOK_TESTS_PER_PROJECT] + window)
    return (*map(format_instant, inside), format_instant(now))


def seconds_until(moment: datetime, now: datetime, at_most: int) -> int:
    """Whole seconds from ``now`` to ``moment``, rounded up: 1 at least, ``at_most`` at most
    (whatever another container's clock said)."""
    return min(at_most, max(1, math.ceil((moment - now).total_seconds())))


# --- the delivery -----------------------------------------------------------------------------


def body(event: OutboxEvent) -> bytes:
    """The JSON body of every delivery of ``event`` (the same bytes on every attempt)."""
    envelope = {
        "id": event.id,
        "type": event.type,
        "projectId": event.project_id,
        "seq": event.seq,
        "timestamp": event.created_at,
        "data": dict(event.data),
    }
    return json.dumps(envelope, separators=(",", ":"), sort_keys=True).encode()


def delay_before(attempt: int, rng: random.Random | None = None) -> float | None:
    """Seconds to wait before attempt number ``attempt`` (1-based), jittered; None: no attempt
    left (the delivery has failed for good)."""
    if not 1 <= attempt <= len(RETRY_SCHEDULE_SECONDS):
        return None
    base = RETRY_SCHEDULE_SECONDS[attempt - 1]
    if base == 0:
        return 0.0
    spread = (rng or random).uniform(-JITTER_FRACTION, JITTER_FRACTION)
    return base * (1 + spread)


def scaled_delay(attempt: int, scale: float, rng: random.Random | None = None) -> float | None:
    """``delay_before`` times ``scale`` (a deployment setting; tests and the local stack shrink the
    schedule to seconds)."""
    delay = delay_before(attempt, rng)
    return None if delay is None else delay * scale


# --- queue messages (ids only) ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FanOut:
    """Send event ``seq`` of ``project`` to every webhook that wants it."""

    project_id: str
    seq: int


@dataclass(frozen=True, slots=True)
class Delivery:
    """Attempt ``attempt`` of sending event ``seq`` to one webhook, not before ``not_before``.

    ``claimant``: the queue message whose claim on the attempt this message makes it under (set on
    a copy handed on for lack of time: its original may have claimed the attempt already, on an
    earlier receive); None, the message's own."""

    project_id: str
    webhook_id: str
    seq: int
    attempt: int
    not_before: str | None = None
    claimant: str | None = None


def encode_message(message: FanOut | Delivery) -> str:
    if isinstance(message, FanOut):
        return json.dumps({"kind": "fanout", "projectId": message.project_id, "seq": message.seq})
    fields: dict[str, Any] = {
        "kind": "deliver",
        "projectId": message.project_id,
        "webhookId": message.webhook_id,
        "seq": message.seq,
        "attempt": message.attempt,
        "notBefore": message.not_before,
    }
    if message.claimant is not None:
        fields["claimant"] = message.claimant
    return json.dumps(fields)


def decode_message(text: str) -> FanOut | Delivery:
    """A queue message (ValueError if it is not one of ours)."""
    try:
        raw = json.loads(text)
        if raw["kind"] == "fanout":
            return FanOut(str(raw["projectId"]), int(raw["seq"]))
        if raw["kind"] == "deliver":
            return Delivery(
                str(raw["projectId"]),
                str(raw["webhookId"]),
                int(raw["seq"]),
                int(raw["attempt"]),
                raw.get("notBefore"),
                raw.get("claimant"),
            )
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not a webhook queue message: {exc}") from exc
    raise ValueError(f"unknown webhook message kind {raw.get('kind')!r}")
