"""Webhooks in DynamoDB: subscriptions, the outbox of committed events, delivery states and the
attempt log. One table, string keys ``pk`` (HASH) and ``sk`` (RANGE); keys built only by
kaibo_core.core.storage_keys.

- Subscriptions: ``pk = <project>#webhooks``, ``sk = wh#<id>``: ``url``, ``events`` (L),
  ``description``, ``createdAt``, ``fromSeq`` (N), ``status``, ``failingSince``?, ``secrets``
  (L of S: the KMS ciphertexts, newest first), ``previousUntil``?, ``lastTestAt``? (when its
  last test event was sent: ``emit_test`` sends the next one only WEBHOOK_TEST_INTERVAL_SECONDS
  later, a condition in the test event's own transaction).
- Test log: same ``pk``, ``sk = tests``: ``sentAt`` (L of S: when the project's test events of
  the last WEBHOOK_TESTS_WINDOW_SECONDS were sent, whichever webhooks they went to; deleting a
  webhook leaves them), ``writes`` (N: a version, one more per test event) and ``expiresAt``
  (once its newest entry has left the window). ``emit_test`` reads it, refuses the test if the
  window is full, and otherwise rewrites it in the test event's transaction on condition that
  ``writes`` is still the one read: two tests at once cannot both take the last place.
- Outbox: ``pk = <project>#outbox``, ``sk = <seq, 12 digits>``: ``type``, ``createdAt``,
  ``data`` (JSON text: ids only), ``onlyWebhook``?, ``emittedBy``? (the token of the ``emit``
  call that wrote it); until relayed to the queue, ``relayPk =
  unrelayed`` and ``relaySk = <createdAt>#<project>#<seq>`` (the sparse ``Unrelayed`` index the
  sweeper reads). Head: same ``pk``, ``sk = head``: ``seq`` (N, the last seq given) and
  ``subscribers`` (N). Entries expire (``expiresAt``) after OUTBOX_RETENTION_DAYS.
- Delivery states: ``pk = <project>#wh#<id>#deliveries``, ``sk = e#<seq>``: ``attempt`` (N),
  ``claimedBy`` (the SQS message id of the attempt in progress), ``status``; expiring
  OUTBOX_RETENTION_DAYS after the first claim (after the outbox entry it guards).
- Attempt log: same ``pk``, ``sk = a#<time>#<seq>#<attempt>``, expiring after
  ATTEMPT_LOG_RETENTION_DAYS.

**Emitting** (``prepare``): a change that reports events reads the head (strongly consistent)
and adds to its own transaction the head's new ``seq``, conditioned on the one read, and one
outbox entry per event. Two writers that read the same head cannot both commit: the loser
re-reads and retries, like the ledger's appends. A project without subscribers emits nothing
(no head write, no entry): one read per change is all webhooks cost it.

**Retried writes.** When the SDK retries a transaction that had committed (its answer lost), the
retry fails its own conditions. Creating a subscription and emitting a test event recognise their
own first attempt in the item the failed condition returns (the subscription's secret ciphertext,
the outbox entry's ``emittedBy`` token, both made once per request) and answer as if committed,
instead of writing a second event or failing with the subscription stored.
"""

from __future__ import annotations

import json
import math
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final, Literal, cast

from botocore.exceptions import ClientError

from kaibo_core.adapters.dynamodb_transactions import transact_write, transaction_busy
from kaibo_core.adapters.dynamodb_values import Item, key, n, s, string_list, strings
from kaibo_core.core import deadline as invocation
from kaibo_core.core import storage_keys, webhooks
from kaibo_core.core.clock import format_instant, parse_instant, utc_now
from kaibo_core.core.limits import WEBHOOK_TESTS_WINDOW_SECONDS
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.webhooks import (
    MAX_WEBHOOKS_PER_PROJECT,
    AttemptRecord,
    EventType,
    Notification,
    OutboxEvent,
    Subscription,
    TooManyWebhooksError,
    WebhookTestTooSoonError,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import PutTypeDef, TransactWriteItemTypeDef

UNRELAYED_INDEX: Final = "Unrelayed"
UNRELAYED_PARTITION: Final = "unrelayed"
OUTBOX_RETENTION_DAYS: Final = 30
ATTEMPT_LOG_RETENTION_DAYS: Final = 30
MAX_CREATE_ATTEMPTS: Final = 8


@dataclass(frozen=True, slots=True)
class PreparedEmit:
    """The actions that put ``events`` in the outbox, for the caller's transaction."""

    events: tuple[OutboxEvent, ...]
    actions: tuple[TransactWriteItemTypeDef, ...]


def _expires_at(now: str, days: int) -> int:
    return int((parse_instant(now) + timedelta(days=days)).timestamp())


def subscription_item(sub: Subscription) -> Item:
    item: Item = {
        **key(storage_keys.webhook_key(ProjectId(sub.project_id), sub.id)),
        "id": s(sub.id),
        "url": s(sub.url),
        "events": strings(list(sub.events)),
        "description": s(sub.description),
        "createdAt": s(sub.created_at),
        "fromSeq": n(sub.from_seq),
        "status": s(sub.status),
        "secrets": strings(list(sub.secret_ciphertexts)),
    }
    if sub.previous_until:
        item["previousUntil"] = s(sub.previous_until)
    if sub.failing_since:
        item["failingSince"] = s(sub.failing_since)
    return item


def subscription_from_item(project: ProjectId, item: dict[str, Any]) -> Subscription:
    return Subscription(
        project_id=project,
        id=item["id"]["S"],
        url=item["url"]["S"],
        events=cast("tuple[EventType, ...]", string_list(item.get("events"))),
        description=item.get("description", {}).get("S", ""),
        created_at=item["createdAt"]["S"],
        from_seq=int(item["fromSeq"]["N"]),
        status="failing" if item.get("status", {}).get("S") == "failing" else "active",
        failing_since=item.get("failingSince", {}).get("S"),
        secret_ciphertexts=string_list(item.get("secrets")),
        previous_until=item.get("previousUntil", {}).get("S"),
        last_test_at=item.get("lastTestAt", {}).get("S"),
    )


def outbox_item(event: OutboxEvent, emitted_by: str | None = None) -> Item:
    project = ProjectId(event.project_id)
    item: Item = {
        **key(storage_keys.outbox_event_key(project, event.seq)),
        "type": s(event.type),
        "createdAt": s(event.created_at),
        "data": s(json.dumps(dict(event.data), separators=(",", ":"), sort_keys=True)),
        "relayPk": s(UNRELAYED_PARTITION),
        "relaySk": s(storage_keys.work_list_sort_key(event.created_at, project, event.seq)),
        "expiresAt": n(_expires_at(event.created_at, OUTBOX_RETENTION_DAYS)),
    }
    if event.only_webhook:
        item["onlyWebhook"] = s(event.only_webhook)
    if emitted_by:
        item["emittedBy"] = s(emitted_by)
    return item


def outbox_event_from_item(project: ProjectId, item: dict[str, Any]) -> OutboxEvent:
    return OutboxEvent(
        project_id=project,
        seq=int(item["sk"]["S"]),
        type=cast("EventType", item["type"]["S"]),
        created_at=item["createdAt"]["S"],
        data=json.loads(item["data"]["S"]),
        only_webhook=item.get("onlyWebhook", {}).get("S"),
    )


def _cancellation_codes(exc: ClientError) -> list[str | None]:
    return [reason.get("Code") for reason in _cancellation_reasons(exc)]


def _cancelled(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "TransactionCanceledException"


def _cancellation_reasons(exc: ClientError) -> list[dict[str, Any]]:
    return list(exc.response.get("CancellationReasons", []))  # type: ignore[arg-type]


def _stored_by_failed_condition(reason: dict[str, Any]) -> dict[str, Any]:
    """The item a failed condition found (``ReturnValuesOnConditionCheckFailure``), or {}."""
    if reason.get("Code") != "ConditionalCheckFailed":
        return {}
    return dict(reason.get("Item") or {})


class DynamoWebhookStore:
    """Subscriptions, outbox, delivery states and attempts (see the module docstring)."""

    def __init__(
        self, client: DynamoDBClient, table_name: str, *, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self._client = client
        self._table = table_name
        self._sleep = sleep

    # -- the outbox -------------------------------------------------------------------------------

    def head(self, project: ProjectId) -> tuple[int, int, bool]:
        """``(last seq, subscribers, exists)``, strongly consistent."""
        item = self._client.get_item(
            TableName=self._table,
            Key=key(storage_keys.outbox_head_key(project)),
            ConsistentRead=True,
            ProjectionExpression="#seq, subscribers",
            ExpressionAttributeNames={"#seq": "seq"},
        ).get("Item")
        if not item:
            return 0, 0, False
        return int(item["seq"]["N"]), int(item.get("subscribers", {}).get("N", "0")), True

    def prepare(
        self,
        project: ProjectId,
        notifications: Sequence[Notification],
        now: str,
        emitted_by: str | None = None,
    ) -> PreparedEmit | None:
        """The outbox writes for ``notifications`` at the project's next seqs, or None when
        nobody can receive them (no subscriber, and no ``webhook.test``). With ``emitted_by``, the
        entries carry it and a failed condition returns the entry found."""
        if not notifications:
            return None
        last, subscribers, exists = self.head(project)
        targeted = any(note.only_webhook for note in notifications)
        if not exists or (subscribers == 0 and not targeted):
            return None
        events = tuple(
            OutboxEvent(
                project_id=project,
                seq=last + offset,
                type=note.type,
                created_at=now,
                data=note.data,
                only_webhook=note.only_webhook,
            )
            for offset, note in enumerate(notifications, 1)
        )
        head_update: TransactWriteItemTypeDef = {
            "Update": {
                "TableName": self._table,
                "Key": key(storage_keys.outbox_head_key(project)),
                "UpdateExpression": "SET #seq = :new",
                "ConditionExpression": "#seq = :last",
                "ExpressionAttributeNames": {"#seq": "seq"},
                "ExpressionAttributeValues": {":new": n(events[-1].seq), ":last": n(last)},
            }
        }
        puts = [self._outbox_put(event, emitted_by) for event in events]
        return PreparedEmit(events, (head_update, *puts))

    def _outbox_put(self, event: OutboxEvent, emitted_by: str | None) -> TransactWriteItemTypeDef:
        put: PutTypeDef = {
            "TableName": self._table,
            "Item": outbox_item(event, emitted_by),
            "ConditionExpression": "attribute_not_exists(pk)",
        }
        if emitted_by:
            put["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        return {"Put": put}

    def emit(
        self, project: ProjectId, notifications: Sequence[Notification], now: str
    ) -> tuple[OutboxEvent, ...]:
        """Emit events that report no other write, retrying lost races."""
        return self._emit(project, notifications, now, stamp=None)

    def emit_test(
        self, project: ProjectId, webhook_id: str, now: str, earliest_previous: str
    ) -> tuple[OutboxEvent, ...]:
        """The webhook's ``webhook.test`` event, with ``lastTestAt = now`` on its subscription in
        the same transaction, on condition that its previous test was at ``earliest_previous`` or
        before: WebhookTestTooSoonError (with that test's instant) otherwise; () if it is gone.
        The project's test log gains ``now`` in the same transaction: WebhookTestsTooManyError,
        and nothing written, if its window is full."""
        stamp: TransactWriteItemTypeDef = {
            "Update": {
                "TableName": self._table,
                "Key": key(storage_keys.webhook_key(project, webhook_id)),
                "UpdateExpression": "SET lastTestAt = :now",
                "ConditionExpression": "attribute_exists(pk) AND "
                "(attribute_not_exists(lastTestAt) OR lastTestAt <= :earliest)",
                "ExpressionAttributeValues": {":now": s(now), ":earliest": s(earliest_previous)},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        return self._emit(
            project,
            [webhooks.ping(webhook_id)],
            now,
            stamp=stamp,
            logged=lambda: self._log_test(project, now),
        )

    def _log_test(self, project: ProjectId, now: str) -> TransactWriteItemTypeDef:
        """The write that adds ``now`` to the project's test log, conditioned on the log as read
        (strongly consistent); WebhookTestsTooManyError if its window is full."""
        log_key = key(storage_keys.webhook_test_log_key(project))
        found = self._client.get_item(TableName=self._table, Key=log_key, ConsistentRead=True).get("Item")
        sent = webhooks.admit_project_test(
            string_list(found.get("sentAt")) if found else (), parse_instant(now)
        )
        writes = int(found["writes"]["N"]) if found else 0
        expires = parse_instant(sent[-1]) + timedelta(seconds=WEBHOOK_TESTS_WINDOW_SECONDS)
        put: PutTypeDef = {
            "TableName": self._table,
            "Item": {
                **log_key,
                "sentAt": strings(list(sent)),
                "writes": n(writes + 1),
                "expiresAt": n(math.ceil(expires.timestamp())),
            },
            "ConditionExpression": "attribute_not_exists(pk)",
        }
        if found:
            put["ConditionExpression"] = "writes = :read"
            put["ExpressionAttributeValues"] = {":read": n(writes)}
        return {"Put": put}

    def _emit(
        self,
        project: ProjectId,
        notifications: Sequence[Notification],
        now: str,
        stamp: TransactWriteItemTypeDef | None,
        logged: Callable[[], TransactWriteItemTypeDef] | None = None,
    ) -> tuple[OutboxEvent, ...]:
        """The outbox writes of ``notifications`` (then ``logged()``'s write, then ``stamp``, last)
        in one transaction, prepared again while the head or the log moves under them."""
        token = secrets.token_hex(8)
        for _ in range(MAX_CREATE_ATTEMPTS):
            prepared = self.prepare(project, notifications, now, emitted_by=token)
            if prepared is None:
                return ()
            actions = [*prepared.actions, *([logged()] if logged else []), *([stamp] if stamp else [])]
            try:
                transact_write(self._client, actions, sleep=self._sleep)
            except ClientError as exc:
                if not _cancelled(exc):
                    raise
                reasons = _cancellation_reasons(exc)
                if any(
                    _stored_by_failed_condition(reason).get("emittedBy", {}).get("S") == token
                    for reason in reasons
                ):
                    return prepared.events  # the SDK retried this very transaction: it committed
                if (
                    stamp is not None
                    and len(reasons) == len(actions)
                    and reasons[-1].get("Code") == ("ConditionalCheckFailed")
                ):
                    last = _stored_by_failed_condition(reasons[-1]).get("lastTestAt", {}).get("S")
                    if last is None:
                        return ()  # the webhook was deleted meanwhile
                    raise WebhookTestTooSoonError(last) from exc
                if not invocation.time_for(0):
                    break
                continue  # the head (or the test log) moved: another change emitted first
            return prepared.events
        raise transaction_busy()

    def event(self, project: ProjectId, seq: int) -> OutboxEvent | None:
        item = self._client.get_item(
            TableName=self._table, Key=key(storage_keys.outbox_event_key(project, seq)), ConsistentRead=True
        ).get("Item")
        return outbox_event_from_item(project, item) if item else None

    def unrelayed(self, before: str, limit: int) -> list[tuple[ProjectId, int]]:
        """Events of every project committed before ``before`` and never relayed to the queue."""
        response = self._client.query(
            TableName=self._table,
            IndexName=UNRELAYED_INDEX,
            KeyConditionExpression="relayPk = :p AND relaySk < :before",
            ExpressionAttributeValues={":p": s(UNRELAYED_PARTITION), ":before": s(before)},
            Limit=limit,
        )
        found = []
        for item in response.get("Items", []):
            found.append(storage_keys.parse_work_list_sort_key(item["relaySk"]["S"]))
        return found

    def mark_relayed(self, project: ProjectId, seq: int) -> None:
        self._client.update_item(
            TableName=self._table,
            Key=key(storage_keys.outbox_event_key(project, seq)),
            UpdateExpression="REMOVE relayPk, relaySk",
            ConditionExpression="attribute_exists(pk)",
        )

    # -- subscriptions ----------------------------------------------------------------------------

    def create(self, sub: Subscription) -> Subscription:
        """Store ``sub`` and count it on the head; its ``fromSeq`` is the head's next seq, so it
        receives exactly the events committed after it. TooManyWebhooksError past the limit."""
        project = ProjectId(sub.project_id)
        for _ in range(MAX_CREATE_ATTEMPTS):
            last, subscribers, exists = self.head(project)
            if subscribers >= MAX_WEBHOOKS_PER_PROJECT:
                raise TooManyWebhooksError(f"a project has at most {MAX_WEBHOOKS_PER_PROJECT} webhooks")
            stored = replace(sub, from_seq=last + 1)
            head: TransactWriteItemTypeDef = {
                "Update": {
                    "TableName": self._table,
                    "Key": key(storage_keys.outbox_head_key(project)),
                    "UpdateExpression": "SET #seq = :last, subscribers = :count",
                    "ConditionExpression": (
                        "#seq = :last AND subscribers = :was" if exists else "attribute_not_exists(pk)"
                    ),
                    "ExpressionAttributeNames": {"#seq": "seq"},
                    "ExpressionAttributeValues": {
                        ":last": n(last),
                        ":count": n(subscribers + 1),
                        **({":was": n(subscribers)} if exists else {}),
                    },
                }
            }
            try:
                transact_write(
                    self._client,
                    [
                        {
                            "Put": {
                                "TableName": self._table,
                                "Item": subscription_item(stored),
                                "ConditionExpression": "attribute_not_exists(pk)",
                                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                            }
                        },
                        head,
                    ],
                    sleep=self._sleep,
                )
            except ClientError as exc:
                if not _cancelled(exc):
                    raise
                found = [
                    item
                    for item in map(_stored_by_failed_condition, _cancellation_reasons(exc))
                    if string_list(item.get("secrets")) == sub.secret_ciphertexts
                ]
                if found:
                    return subscription_from_item(project, found[0])  # the SDK retried it: it committed
                if not invocation.time_for(0):
                    break
                continue  # the head moved: another webhook was created or deleted
            return stored
        raise transaction_busy()

    def get(self, project: ProjectId, webhook_id: str) -> Subscription | None:
        item = self._client.get_item(
            TableName=self._table, Key=key(storage_keys.webhook_key(project, webhook_id)), ConsistentRead=True
        ).get("Item")
        return subscription_from_item(project, item) if item else None

    def subscriptions(self, project: ProjectId) -> list[Subscription]:
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :wh)",
            ExpressionAttributeValues={":pk": s(storage_keys.webhooks_pk(project)), ":wh": s("wh#")},
            ConsistentRead=True,
        )
        subs = [subscription_from_item(project, item) for item in response.get("Items", [])]
        return sorted(subs, key=lambda sub: (sub.created_at, sub.id))

    def delete(self, project: ProjectId, webhook_id: str) -> bool:
        """Remove a subscription and uncount it; False if there was none."""
        try:
            transact_write(
                self._client,
                [
                    {
                        "Delete": {
                            "TableName": self._table,
                            "Key": key(storage_keys.webhook_key(project, webhook_id)),
                            "ConditionExpression": "attribute_exists(pk)",
                        }
                    },
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": key(storage_keys.outbox_head_key(project)),
                            "UpdateExpression": "SET subscribers = subscribers - :one",
                            "ConditionExpression": "subscribers >= :one",
                            "ExpressionAttributeValues": {":one": n(1)},
                        }
                    },
                ],
                sleep=self._sleep,
            )
        except ClientError as exc:
            codes = _cancellation_codes(exc)
            if codes[:1] == ["ConditionalCheckFailed"]:
                return False
            raise
        return True

    def set_secrets(
        self, project: ProjectId, webhook_id: str, ciphertexts: Sequence[str], previous_until: str | None
    ) -> bool:
        values: dict[str, Any] = {":secrets": strings(list(ciphertexts))}
        expression = "SET secrets = :secrets"
        if previous_until:
            expression += ", previousUntil = :until"
            values[":until"] = s(previous_until)
        else:
            expression += " REMOVE previousUntil"
        try:
            self._client.update_item(
                TableName=self._table,
                Key=key(storage_keys.webhook_key(project, webhook_id)),
                UpdateExpression=expression,
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def set_health(self, project: ProjectId, webhook_id: str, failing_since: str | None) -> None:
        """``failing`` from ``failing_since`` (kept if already failing), or ``active`` again."""
        if failing_since is None:
            expression = "SET #status = :active REMOVE failingSince"
            values: dict[str, Any] = {":active": s("active")}
        else:
            expression = "SET #status = :failing, failingSince = if_not_exists(failingSince, :since)"
            values = {":failing": s("failing"), ":since": s(failing_since)}
        try:
            self._client.update_item(
                TableName=self._table,
                Key=key(storage_keys.webhook_key(project, webhook_id)),
                UpdateExpression=expression,
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise  # else: deleted meanwhile

    # -- deliveries -------------------------------------------------------------------------------

    def claim_attempt(
        self, project: ProjectId, webhook_id: str, seq: int, attempt: int, message_id: str
    ) -> bool:
        """May the queue message ``message_id`` make attempt ``attempt`` of this delivery? Yes if
        it is the next attempt of a pending delivery, or this message's own attempt again (SQS
        redelivered it after a crash, or a copy handed on for lack of time claims under its id);
        no for a duplicate message (a second relay of the event)."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=key(storage_keys.delivery_state_key(project, webhook_id, seq)),
                # Kept as long as the outbox entry it guards (claimed after it was written, so
                # it outlives it): later, a message for the event finds no event, and is dropped.
                UpdateExpression=(
                    "SET attempt = :k, claimedBy = :m, #status = if_not_exists(#status, :pending), "
                    "expiresAt = if_not_exists(expiresAt, :expires)"
                ),
                ConditionExpression=(
                    "(attribute_not_exists(pk) AND :k = :one) "
                    "OR (attempt = :prev AND #status = :pending) "
                    "OR (attempt = :k AND claimedBy = :m AND #status = :pending)"
                ),
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    ":k": n(attempt),
                    ":prev": n(attempt - 1),
                    ":one": n(1),
                    ":m": s(message_id),
                    ":pending": s("pending"),
                    ":expires": n(_expires_at(format_instant(utc_now()), OUTBOX_RETENTION_DAYS)),
                },
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def settle(self, project: ProjectId, webhook_id: str, seq: int, status: str) -> None:
        self._client.update_item(
            TableName=self._table,
            Key=key(storage_keys.delivery_state_key(project, webhook_id, seq)),
            UpdateExpression="SET #status = :status",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={":status": s(status)},
        )

    def record_attempt(self, project: ProjectId, webhook_id: str, record: AttemptRecord) -> None:
        item: Item = {
            **key(
                storage_keys.delivery_attempt_key(project, webhook_id, record.at, record.seq, record.attempt)
            ),
            "eventId": s(record.event_id),
            "type": s(record.type),
            "seq": n(record.seq),
            "attempt": n(record.attempt),
            "at": s(record.at),
            "latencyMs": n(record.latency_ms),
            "outcome": s(record.outcome),
            "expiresAt": n(_expires_at(record.at, ATTEMPT_LOG_RETENTION_DAYS)),
        }
        if record.status_code is not None:
            item["statusCode"] = n(record.status_code)
        if record.error:
            item["error"] = s(record.error)
        if record.next_attempt_at:
            item["nextAttemptAt"] = s(record.next_attempt_at)
        self._client.put_item(TableName=self._table, Item=item)

    def attempts(self, project: ProjectId, webhook_id: str, limit: int) -> list[AttemptRecord]:
        """The newest attempts first."""
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :a)",
            ExpressionAttributeValues={
                ":pk": s(storage_keys.deliveries_pk(project, webhook_id)),
                ":a": s("a#"),
            },
            ScanIndexForward=False,
            Limit=limit,
        )
        return [
            AttemptRecord(
                event_id=item["eventId"]["S"],
                type=item["type"]["S"],
                seq=int(item["seq"]["N"]),
                attempt=int(item["attempt"]["N"]),
                at=item["at"]["S"],
                status_code=int(item["statusCode"]["N"]) if "statusCode" in item else None,
                latency_ms=int(item["latencyMs"]["N"]),
                error=item.get("error", {}).get("S"),
                outcome=cast("Literal['delivered', 'retrying', 'failed']", item["outcome"]["S"]),
                next_attempt_at=item.get("nextAttemptAt", {}).get("S"),
            )
            for item in response.get("Items", [])
        ]
