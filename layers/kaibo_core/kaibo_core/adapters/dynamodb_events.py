"""The event log in DynamoDB: events, stream heads and idempotency keys.

Layout (keys built only by kaibo_core.core.storage_keys):

- Events table: ``pk = project#stream``, ``seq`` (N). seq 0 is the stream's
  head item (``headSeq``, ``headHash``; sparse index StreamHeads on
  ``headsPk = project``, ``headsSk = stream`` lists a project's heads).
- Idempotency table: ``pk = project#key`` → the stream and seq it claimed.

An append is one TransactWriteItems: every idempotency key (``attribute_not_exists``),
every event (``attribute_not_exists``) and the head (``headSeq = expected`` or
absent for a new stream). A failed condition is reported as ``AppendConflictError``, built from
the positional cancellation reasons, for the service to retry; a ``TransactionConflict`` with a
concurrent transaction, or the SDK's retry meeting the first attempt still in progress, is retried
by ``dynamodb_transactions.transact_write`` (``429 stream_busy`` if it does not end in time).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from kaibo_core.adapters import dynamodb_values as values
from kaibo_core.adapters.dynamodb_batch_reads import batch_get
from kaibo_core.adapters.dynamodb_jobs import DynamoJobStore
from kaibo_core.adapters.dynamodb_transactions import transact_write
from kaibo_core.adapters.dynamodb_values import Item
from kaibo_core.core import storage_keys
from kaibo_core.core.errors import PayloadTooLargeError
from kaibo_core.core.limits import DYNAMODB_MAX_ITEM_BYTES, DYNAMODB_MAX_TRANSACTION_BYTES
from kaibo_core.core.models.events import (
    AppendConflictError,
    EventRecord,
    IdempotencyClaim,
    StreamHead,
    stream_busy,
)
from kaibo_core.core.models.jobs import JobRecord
from kaibo_core.core.storage_keys import ProjectId

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

    from kaibo_core.adapters.aws import DynamoReads

STREAM_HEADS_INDEX = "StreamHeads"

_s = values.s
_n = values.n
_key = values.key
item_size = values.item_size


def event_item(record: EventRecord) -> Item:
    item: Item = {
        **_key(storage_keys.event_key(ProjectId(record.project_id), record.stream, record.seq)),
        "v": _n(record.v),
        "projectId": _s(record.project_id),
        "stream": _s(record.stream),
        "id": _s(record.id),
        "kind": _s(record.kind),
        "idempotencyKey": _s(record.idempotency_key),
        "occurredAt": _s(record.occurred_at),
        "receivedAt": _s(record.received_at),
        "payloadDigest": _s(record.payload_digest),
        "hash": _s(record.hash),
        "prevHash": _s(record.prev_hash),
    }
    if record.canonical_payload is not None and record.salt is not None:
        item["payload"] = _s(record.canonical_payload)
        item["salt"] = _s(record.salt)
    if record.job_id is not None:
        item["jobId"] = _s(record.job_id)
    if record.time_zone is not None:
        item["timeZone"] = _s(record.time_zone)
    if record.supersedes:
        item["supersedes"] = values.strings(record.supersedes)
    if record.cancels:
        item["cancels"] = values.strings(record.cancels)
    return item


def record_from_item(item: dict[str, Any]) -> EventRecord:
    return EventRecord(
        project_id=item["projectId"]["S"],
        stream=item["stream"]["S"],
        seq=int(item["seq"]["N"]),
        id=item["id"]["S"],
        kind=item["kind"]["S"],
        idempotency_key=item["idempotencyKey"]["S"],
        occurred_at=item["occurredAt"]["S"],
        received_at=item["receivedAt"]["S"],
        payload_digest=item["payloadDigest"]["S"],
        hash=item["hash"]["S"],
        prev_hash=item["prevHash"]["S"],
        canonical_payload=item["payload"]["S"] if "payload" in item else None,
        salt=item["salt"]["S"] if "salt" in item else None,
        v=int(item["v"]["N"]),
        job_id=item["jobId"]["S"] if "jobId" in item else None,
        time_zone=item["timeZone"]["S"] if "timeZone" in item else None,
        supersedes=values.string_list(item.get("supersedes")),
        cancels=values.string_list(item.get("cancels")),
    )


class DynamoEventStore:
    def __init__(
        self,
        client: DynamoDBClient,
        events_table: str,
        idempotency_table: str,
        jobs: DynamoJobStore | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client = client
        self._events = events_table
        self._idempotency = idempotency_table
        self._jobs = jobs
        self._sleep = sleep

    # -- writes ---------------------------------------------------------------------------------

    def read_head(self, project: ProjectId, stream: str) -> StreamHead:
        response = self._client.get_item(
            TableName=self._events,
            Key=_key(storage_keys.head_key(project, stream)),
            ConsistentRead=True,
            ProjectionExpression="headSeq, headHash",
        )
        item = response.get("Item")
        if not item:
            return StreamHead.genesis()
        return StreamHead(seq=int(item["headSeq"]["N"]), hash=item["headHash"]["S"])

    def append(
        self,
        project: ProjectId,
        stream: str,
        expected: StreamHead,
        records: Sequence[EventRecord],
        received_at: str,
        *,
        job: JobRecord | None = None,
    ) -> None:
        """Append ``records`` (seqs expected.seq+1...) in one transaction, or raise AppendConflictError.

        ``job`` (the structuring job of these events) is created in the same transaction, last.
        """
        actions: list[TransactWriteItemTypeDef] = []
        for record in records:
            actions.append(
                {
                    "Put": {
                        "TableName": self._idempotency,
                        "Item": {
                            **_key(storage_keys.idempotency_key(project, record.idempotency_key)),
                            "stream": _s(record.stream),
                            "seq": _n(record.seq),
                            "eventId": _s(record.id),
                            "createdAt": _s(received_at),
                        },
                        "ConditionExpression": "attribute_not_exists(pk)",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                }
            )
        for record in records:
            actions.append(
                {
                    "Put": {
                        "TableName": self._events,
                        "Item": event_item(record),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                }
            )
        actions.append(self._head_action(project, stream, expected, records[-1], received_at))
        if job is not None:
            if self._jobs is None:
                raise ValueError("this event store was built without a job store")
            actions.append(self._jobs.put_action(job))
        self._check_sizes(actions)
        try:
            transact_write(self._client, actions, busy=lambda: stream_busy(stream, attempts=1))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            raise self._conflict(exc, records) from exc

    def _head_action(
        self,
        project: ProjectId,
        stream: str,
        expected: StreamHead,
        last: EventRecord,
        received_at: str,
    ) -> TransactWriteItemTypeDef:
        head_item: Item = {
            **_key(storage_keys.head_key(project, stream)),
            "headSeq": _n(last.seq),
            "headHash": _s(last.hash),
            "stream": _s(stream),
            "headsPk": _s(storage_keys.stream_heads_partition(project)),
            "headsSk": _s(stream),
            "updatedAt": _s(received_at),
        }
        if expected.seq == 0:
            return {
                "Put": {
                    "TableName": self._events,
                    "Item": head_item,
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
        return {
            "Put": {
                "TableName": self._events,
                "Item": head_item,
                "ConditionExpression": "headSeq = :expected",
                "ExpressionAttributeValues": {":expected": _n(expected.seq)},
            }
        }

    @staticmethod
    def _check_sizes(actions: Sequence[TransactWriteItemTypeDef]) -> None:
        total = 0
        for action in actions:
            size = item_size(action["Put"]["Item"])
            if size > DYNAMODB_MAX_ITEM_BYTES:
                raise PayloadTooLargeError(
                    "event_too_large",
                    f"An event would take {size} bytes as stored; the limit is {DYNAMODB_MAX_ITEM_BYTES}.",
                    {"bytes": size, "limit": DYNAMODB_MAX_ITEM_BYTES},
                )
            total += size
        if total > DYNAMODB_MAX_TRANSACTION_BYTES:
            raise PayloadTooLargeError(
                "batch_too_large",
                f"The batch would take {total} bytes as stored; one remember call holds at most "
                f"{DYNAMODB_MAX_TRANSACTION_BYTES}. Send fewer events per call.",
                {"bytes": total, "limit": DYNAMODB_MAX_TRANSACTION_BYTES},
            )

    @staticmethod
    def _conflict(exc: ClientError, records: Sequence[EventRecord]) -> AppendConflictError:
        reasons: list[dict[str, Any]] = list(exc.response.get("CancellationReasons", []))  # type: ignore[arg-type]
        n = len(records)
        claimed: dict[str, IdempotencyClaim] = {}
        for record, reason in zip(records, reasons[:n], strict=False):
            if reason.get("Code") == "ConditionalCheckFailed" and "Item" in reason:
                old = reason["Item"]
                claimed[record.idempotency_key] = IdempotencyClaim(
                    idempotency_key=record.idempotency_key,
                    stream=old["stream"]["S"],
                    seq=int(old["seq"]["N"]),
                    event_id=old["eventId"]["S"],
                )
        head_reason = reasons[2 * n] if len(reasons) > 2 * n else {}
        event_reasons = reasons[n : 2 * n]
        head_moved = head_reason.get("Code") == "ConditionalCheckFailed" or any(
            r.get("Code") == "ConditionalCheckFailed" for r in event_reasons
        )
        # Another transaction held one of the items (a concurrent append to the head, or one with
        # the same key): a lost race like a moved head, retried after re-reading the head.
        collided = any(r.get("Code") == "TransactionConflict" for r in reasons)
        if not claimed and not head_moved and not collided:
            codes = [r.get("Code") for r in reasons]
            raise RuntimeError(f"transaction cancelled for an unexpected reason: {codes}") from exc
        return AppendConflictError(head_moved or collided, claimed)

    # -- reads ----------------------------------------------------------------------------------

    def get_events(self, project: ProjectId, locations: Sequence[tuple[str, int]]) -> list[EventRecord]:
        """Events by (stream, seq), strongly consistent, in the order asked; missing ones skipped."""
        wanted = {(stream, seq) for stream, seq in locations}
        keys = [_key(storage_keys.event_key(project, stream, seq)) for stream, seq in wanted]
        items = batch_get(
            self._client, self._events, keys, options={"ConsistentRead": True}, sleep=self._sleep
        )
        found = {(record.stream, record.seq): record for record in map(record_from_item, items)}
        return [found[loc] for loc in locations if loc in found]

    def page_events(
        self, project: ProjectId, stream: str, from_seq: int, limit: int, max_bytes: int
    ) -> tuple[list[EventRecord], int | None]:
        """Events from ``from_seq`` on, at most ``limit`` and about ``max_bytes``; and the next seq."""
        start = max(from_seq, storage_keys.HEAD_SEQ + 1)
        records: list[EventRecord] = []
        size = 0
        exclusive_start: Item | None = None
        while len(records) < limit:
            query: dict[str, Any] = {
                "TableName": self._events,
                "KeyConditionExpression": "pk = :pk AND seq >= :from",
                "ExpressionAttributeValues": {
                    ":pk": _s(storage_keys.events_pk(project, stream)),
                    ":from": _n(start),
                },
                "Limit": limit - len(records),
                "ConsistentRead": True,  # verify right after remember sees every event
            }
            if exclusive_start:
                query["ExclusiveStartKey"] = exclusive_start
            response = self._client.query(**query)
            for item in response.get("Items", []):
                item_bytes = item_size(item)
                if records and size + item_bytes > max_bytes:
                    return records, records[-1].seq + 1
                records.append(record_from_item(item))
                size += item_bytes
            exclusive_start = response.get("LastEvaluatedKey")
            if not exclusive_start:
                return records, None
        return records, (records[-1].seq + 1 if exclusive_start else None)

    def list_heads(
        self, project: ProjectId, after_stream: str | None, limit: int
    ) -> tuple[list[tuple[str, StreamHead]], str | None]:
        query: dict[str, Any] = {
            "TableName": self._events,
            "IndexName": STREAM_HEADS_INDEX,
            "KeyConditionExpression": "headsPk = :p",
            "ExpressionAttributeValues": {":p": _s(storage_keys.stream_heads_partition(project))},
            "Limit": limit,
        }
        if after_stream is not None:
            query["ExclusiveStartKey"] = {
                "headsPk": _s(storage_keys.stream_heads_partition(project)),
                "headsSk": _s(after_stream),
                **_key(storage_keys.head_key(project, after_stream)),
            }
        response = self._client.query(**query)
        heads = [
            (item["stream"]["S"], StreamHead(seq=int(item["headSeq"]["N"]), hash=item["headHash"]["S"]))
            for item in response.get("Items", [])
        ]
        next_after = heads[-1][0] if response.get("LastEvaluatedKey") and heads else None
        return heads, next_after


#: Rounds of unprocessed keys retried before giving up (context is optional: what is still
#: unprocessed then, or when the invocation's time is short, is a neighbour recall does without).
_BATCH_GET_ROUNDS: Final = 4


class DynamoEventLocator:
    """Recall's context: the ids of the events at (stream, seq) locations, one BatchGetItem.

    Eventually consistent (half the read units): an event's id never changes once written, and an
    event too new to be read yet is only a neighbour recall does without. Only ``id`` and the key
    are projected, though DynamoDB charges for the whole item read."""

    def __init__(
        self, reads: DynamoReads, events_table: str, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self._reads = reads
        self._events = events_table
        self._sleep = sleep

    def event_ids(
        self, project: ProjectId, locations: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], str]:
        """The id of the event at each location that holds one (missing locations are left out)."""
        prefix = storage_keys.events_pk(project, "")
        wanted = dict.fromkeys(locations)
        keys = [_key(storage_keys.event_key(project, stream, seq)) for stream, seq in wanted]
        options = {"ProjectionExpression": "pk, seq, #id", "ExpressionAttributeNames": {"#id": "id"}}
        items = batch_get(
            self._reads,
            self._events,
            keys,
            options=options,
            rounds=_BATCH_GET_ROUNDS,
            partial=True,
            sleep=self._sleep,
        )
        return {
            (item["pk"]["S"].removeprefix(prefix), int(item["seq"]["N"])): item["id"]["S"]
            for item in items
            if "id" in item  # not a stream head
        }
