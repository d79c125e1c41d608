"""Delivering webhook events (the WebhookDispatchFunction, an SQS consumer) and relaying events a
crashed function left unrelayed (the sweeper).

- A **fan-out** message names one committed event: one **delivery** message is queued for each
  webhook that wants it (no table write: a duplicate fan-out only makes duplicate messages).
- A delivery message makes one attempt. It first **claims** the attempt on the delivery's state
  item (``claim_attempt``): a duplicate message loses the claim and is dropped, while SQS
  redelivering the same message after a crash wins it again (and so does a copy of it handed on,
  below). The POST is signed per Standard Webhooks with every active secret; 2xx settles the
  delivery; anything else queues the next attempt after the retry schedule's wait
  (``core/webhooks.py``); after the last attempt the message goes to the dead-letter queue and
  the webhook is marked ``failing``. The delivery is settled only after these: when one of them
  fails, the redelivered message makes the attempt again and redoes them (the dead-letter queue
  may get the message twice, never zero times).

A slow or dead receiver costs this function's time only: remember, recall and forget never wait
for a delivery. A delivery waits for its receiver at most its own timeout, or what is left before
the invocation's deadline when that is less (``core/deadline.py``). Running out of the invocation's
time is not the receiver's failure, and it must not spend the message's receives until SQS moves it
to the dead-letter queue with nothing recorded (``WEBHOOK_MAX_RECEIVE_COUNT``):

- A delivery that cannot start with ``MIN_DELIVERY_SECONDS`` left is **handed on**: a fresh copy
  of its message is queued (with receives of its own and a later invocation's whole time) and this
  message succeeds. The copy claims the attempt under the original message's id (``claimant``),
  which may hold the claim already from an earlier receive the deadline cut short. If queueing the
  copy fails, the message fails and SQS redelivers it.
- A delivery the deadline cut short has claimed its attempt: nothing is recorded,
  ``OutOfTimeError`` fails the message, and SQS redelivers it to a later invocation, which makes
  the same attempt again with its whole timeout. On the message's last receive the attempt is
  recorded as the receiver's timeout instead, and goes on like any failed attempt (the retry
  schedule's next attempt, or the dead-letter queue after the last), so no message reaches the
  dead-letter queue unrecorded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Final, Literal, Protocol

from kaibo_core.core import deadline as invocation
from kaibo_core.core import webhook_signing, webhooks
from kaibo_core.core.clock import Clock, format_instant, parse_instant, utc_now
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.webhooks import AttemptRecord, Delivery, FanOut, OutboxEvent, Subscription

#: The sweeper relays events still unrelayed this long after their commit.
RELAY_AFTER_SECONDS = 60
RELAY_BATCH = 100
#: A delivery starts only with this much of the invocation left (or its whole timeout, if shorter).
MIN_DELIVERY_SECONDS: Final = 1.0
#: ``SendResult.error`` of a delivery that ran out of its time (``adapters/webhook_http.py``).
TIMED_OUT: Final = "timeout"


class SendResult(Protocol):
    @property
    def status(self) -> int | None: ...
    @property
    def latency_ms(self) -> int: ...
    @property
    def error(self) -> str | None: ...


#: POST ``body`` with ``headers`` to the URL within the given seconds in all.
Send = Callable[[str, bytes, Mapping[str, str], float], SendResult]


class DispatchStore(Protocol):
    def event(self, project: ProjectId, seq: int) -> OutboxEvent | None: ...
    def subscriptions(self, project: ProjectId) -> list[Subscription]: ...
    def get(self, project: ProjectId, webhook_id: str) -> Subscription | None: ...
    def claim_attempt(
        self, project: ProjectId, webhook_id: str, seq: int, attempt: int, message_id: str
    ) -> bool: ...
    def settle(self, project: ProjectId, webhook_id: str, seq: int, status: str) -> None: ...
    def record_attempt(self, project: ProjectId, webhook_id: str, record: AttemptRecord) -> None: ...
    def set_health(self, project: ProjectId, webhook_id: str, failing_since: str | None) -> None: ...
    def unrelayed(self, before: str, limit: int) -> list[tuple[ProjectId, int]]: ...
    def mark_relayed(self, project: ProjectId, seq: int) -> None: ...


class DispatchQueue(Protocol):
    def fan_out(self, messages: list[FanOut]) -> None: ...
    def deliver(self, message: Delivery, delay_seconds: float = 0) -> None: ...
    def dead_letter(self, message: Delivery) -> None: ...


class Cipher(Protocol):
    def decrypt(self, project: str, webhook_id: str, ciphertext: str) -> str: ...


class WebhookDispatcher:
    def __init__(
        self,
        store: DispatchStore,
        queue: DispatchQueue,
        cipher: Cipher,
        send: Send,
        *,
        clock: Clock = utc_now,
        retry_scale: float = 1.0,
        timeout_seconds: float = 10.0,
    ) -> None:
        """``timeout_seconds``: how long a delivery waits for its receiver (deadline permitting)."""
        self._store = store
        self._queue = queue
        self._cipher = cipher
        self._send = send
        self._clock = clock
        self._retry_scale = retry_scale
        self._timeout_seconds = timeout_seconds

    def handle(self, message: FanOut | Delivery, message_id: str, receive_count: int | None = None) -> str:
        """Process one queue message; returns what happened (for the log line). ``receive_count``:
        SQS's ApproximateReceiveCount of the message (unknown: not its last receive)."""
        if isinstance(message, FanOut):
            return self._fan_out(message)
        return self._deliver(message, message_id, receive_count)

    # -- fan-out ----------------------------------------------------------------------------------

    def _fan_out(self, message: FanOut) -> str:
        project = ProjectId(message.project_id)
        event = self._store.event(project, message.seq)
        if event is None:
            return "event_expired"
        wanted = [sub for sub in self._store.subscriptions(project) if sub.wants(event)]
        for sub in wanted:
            self._queue.deliver(Delivery(project, sub.id, event.seq, 1))
        return f"fanned_out:{len(wanted)}"

    # -- one attempt ------------------------------------------------------------------------------

    def _deliver(self, message: Delivery, message_id: str, receive_count: int | None) -> str:
        project = ProjectId(message.project_id)
        now = self._clock()
        if message.not_before is not None:
            wait = (parse_instant(message.not_before) - now).total_seconds()
            if wait > 0:
                self._queue.deliver(message, wait)  # a wait longer than SQS's 15 minutes: another hop
                return "waiting"
        sub = self._store.get(project, message.webhook_id)
        if sub is None:
            return "webhook_deleted"
        event = self._store.event(project, message.seq)
        if event is None:
            return "event_expired"
        claimant = message.claimant or message_id
        timeout = invocation.seconds_within(self._timeout_seconds)
        if timeout < min(MIN_DELIVERY_SECONDS, self._timeout_seconds):
            # Failing this message would spend one of its receives.
            self._queue.deliver(replace(message, claimant=claimant))
            return "handed_on"
        if not self._store.claim_attempt(project, sub.id, event.seq, message.attempt, claimant):
            return "duplicate"
        body = webhooks.body(event)
        secrets = [self._cipher.decrypt(project, sub.id, c) for c in self._signing_ciphertexts(sub)]
        headers = webhook_signing.headers(secrets, event.id, int(time.time()), body)
        result = self._send(sub.url, body, headers, timeout)
        cut_short = result.error == TIMED_OUT and timeout < self._timeout_seconds
        if cut_short and not _is_last_receive(receive_count):
            # The deadline's timeout, not the receiver's: this message makes the attempt again.
            raise invocation.OutOfTimeError("the invocation's deadline cut the delivery short")
        ok = result.status is not None and 200 <= result.status < 300 and result.error is None
        at = format_instant(self._clock())
        next_delay = None if ok else webhooks.scaled_delay(message.attempt + 1, self._retry_scale)
        next_at = (
            format_instant(self._clock() + timedelta(seconds=next_delay)) if next_delay is not None else None
        )
        outcome: Literal["delivered", "retrying", "failed"] = (
            "delivered" if ok else ("retrying" if next_delay is not None else "failed")
        )
        self._store.record_attempt(
            project,
            sub.id,
            AttemptRecord(
                event_id=event.id,
                type=event.type,
                seq=event.seq,
                attempt=message.attempt,
                at=at,
                status_code=result.status,
                latency_ms=result.latency_ms,
                error=result.error,
                outcome=outcome,
                next_attempt_at=next_at,
            ),
        )
        # Settling comes last: until then the delivery stays pending, so if a write before it
        # fails, SQS's redelivery of this message wins the claim again and redoes them all.
        if ok:
            if sub.status == "failing":
                self._store.set_health(project, sub.id, None)
            self._store.settle(project, sub.id, event.seq, "delivered")
        elif next_delay is not None:
            following = Delivery(project, sub.id, event.seq, message.attempt + 1, next_at)
            self._queue.deliver(following, next_delay)
        else:
            self._queue.dead_letter(message)
            self._store.set_health(project, sub.id, at)
            self._store.settle(project, sub.id, event.seq, "failed")
        return outcome

    def _signing_ciphertexts(self, sub: Subscription) -> Sequence[str]:
        """The current secret, and the previous one during a rotation's overlap."""
        if sub.previous_until and parse_instant(sub.previous_until) > self._clock():
            return sub.secret_ciphertexts[:2]
        return sub.secret_ciphertexts[:1]

    # -- the sweeper's part -------------------------------------------------------------------------

    def relay_unrelayed(self) -> int:
        """Queue events whose function died between commit and relay (oldest first)."""
        before = format_instant(self._clock() - timedelta(seconds=RELAY_AFTER_SECONDS))
        found = self._store.unrelayed(before, RELAY_BATCH)
        if found:
            self._queue.fan_out([FanOut(project, seq) for project, seq in found])
            for project, seq in found:
                self._store.mark_relayed(project, seq)
        return len(found)


def _is_last_receive(receive_count: int | None) -> bool:
    """Does SQS move the message to the dead-letter queue if this receive fails?"""
    return receive_count is not None and receive_count >= webhooks.WEBHOOK_MAX_RECEIVE_COUNT
