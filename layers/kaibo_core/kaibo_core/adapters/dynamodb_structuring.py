"""The writes of structuring in DynamoDB (docs/structuring.md; plans and commits in
kaibo_core.core.structuring.plan).

Order of writes for one event, each step idempotent so that a redelivered or
concurrent duplicate job converges on the same state:

1. ``claim_plan``: the drafts are stored on the provisional memory, only if it is
   still ``provisional`` and has no plan yet (a forgotten event's memory refuses).
2. ``stage``: each structured memory is indexed exactly once with its item in status
   ``staged`` (invisible: recall's item check hides it).
3. ``commit``: one transaction switches the provisional memory to ``replaced``, the
   staged memories to their status, and applies the links (retire an ``active`` memory
   once; file a late older statement behind a newer one). Conditioned on the
   provisional memory still being ``provisional``: a forget in between refuses it.
4. ``unindex`` the replaced provisional memory and ``move_postings`` of the retired
   ones (to history) and of structured ones committed on the other side than they were
   staged on; ``restate_postings`` of a structured one committed on the side it was staged
   on but with another end or successor (resolved again since its staging): its postings
   carry those, for recall's asOf filter. What the postings say is recorded on the item
   (``posted_records``, read for those another run staged: the service knows what it
   staged itself): recall's default reads only the current side, so a memory there must be
   found there. Chunked and conditional like indexing; a retry completes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import ClientError

from kaibo_core.adapters.dynamodb_memories import (
    POSTINGS_RECORD,
    DynamoMemoryStore,
    conflict_backoff,
    posting_item,
)
from kaibo_core.adapters.dynamodb_transactions import transact_write, transaction_busy
from kaibo_core.adapters.dynamodb_values import key, n, s, strings
from kaibo_core.core import deadline as invocation
from kaibo_core.core import storage_keys
from kaibo_core.core.indexing import TermEntry, memory_plan, postings_record
from kaibo_core.core.models.memories import MemoryRecord
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.structuring.plan import CommitOutcome, StructuringCommit, require_staged
from kaibo_core.core.webhooks import Notification

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

    from kaibo_core.adapters.webhook_outbox import WebhookOutbox

PlanClaim = Literal["claimed", "existing", "refused"]
_GONE = ("tombstoned", "purged")


def _canceled_reasons(exc: ClientError) -> list[str | None]:
    if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
        raise exc
    return [r.get("Code") for r in exc.response.get("CancellationReasons", [])]


class DynamoStructuringStore(DynamoMemoryStore):
    def __init__(
        self,
        client: DynamoDBClient,
        memories_table: str,
        index_table: str,
        *,
        outbox: WebhookOutbox | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(client, memories_table, index_table, sleep=sleep)
        #: Where a commit's webhook events go, in the commit's own transaction (None: nowhere).
        self._outbox = outbox

    # -- 1. plan --------------------------------------------------------------------------------

    def claim_plan(self, project: ProjectId, provisional_id: str, plan: str) -> tuple[PlanClaim, str | None]:
        """Store ``plan`` on the provisional memory unless one is there: (outcome, the plan to use)."""
        try:
            self._client.update_item(
                TableName=self._memories,
                Key=key(storage_keys.memory_key(project, provisional_id)),
                UpdateExpression="SET #plan = :plan",
                ConditionExpression="attribute_exists(pk) AND #status = :provisional "
                "AND attribute_not_exists(#plan)",
                ExpressionAttributeNames={"#plan": "plan", "#status": "status"},
                ExpressionAttributeValues={":plan": s(plan), ":provisional": s("provisional")},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            return self._existing_plan(project, provisional_id)
        return "claimed", plan

    def _existing_plan(self, project: ProjectId, provisional_id: str) -> tuple[PlanClaim, str | None]:
        response = self._client.get_item(
            TableName=self._memories,
            Key=key(storage_keys.memory_key(project, provisional_id)),
            ConsistentRead=True,
            ProjectionExpression="#status, #plan",
            ExpressionAttributeNames={"#status": "status", "#plan": "plan"},
        )
        item: dict[str, Any] = dict(response.get("Item") or {})
        status = item.get("status", {}).get("S")
        if status in {"provisional", "replaced"} and "plan" in item:
            return "existing", str(item["plan"]["S"])
        return "refused", None

    # -- 2. stage: DynamoMemoryStore.index_new of a memory in status ``staged`` --------------------

    def stage(self, memory: MemoryRecord) -> bool:
        return self.index_new(require_staged(memory))

    # -- 3. commit ------------------------------------------------------------------------------

    def commit(
        self,
        project: ProjectId,
        change: StructuringCommit,
        notifications: Sequence[Notification] = (),
        now: str = "",
    ) -> CommitOutcome:
        """One transaction: the change, and its webhook events in the outbox (if anyone listens)."""
        actions = self._commit_actions(project, change)
        for attempt in range(8):
            emit = self._outbox.prepare(project, notifications, now) if self._outbox else None
            try:
                transact_write(self._client, [*actions, *(emit.actions if emit else ())], sleep=self._sleep)
            except ClientError as exc:
                reasons = _canceled_reasons(exc)
                if reasons[:1] == ["ConditionalCheckFailed"]:
                    return self._why_not_provisional(project, change)
                if "ConditionalCheckFailed" in reasons[: len(actions)]:
                    return "conflict"  # a link's target changed: the caller re-resolves
                if all(
                    code in {"None", "TransactionConflict", "ConditionalCheckFailed", None}
                    for code in reasons
                ):
                    # a plain collision, or the outbox head moved (another commit emitted)
                    wait = conflict_backoff(attempt)
                    if not invocation.time_for(wait):
                        raise transaction_busy() from exc  # the job fails, to be retried in time
                    self._sleep(wait)
                    continue
                raise
            if self._outbox and emit:
                self._outbox.relay(emit.events)
            return "committed"
        return "conflict"

    def _why_not_provisional(self, project: ProjectId, change: StructuringCommit) -> CommitOutcome:
        provisional = self.get(project, change.provisional_id)
        if provisional is None or provisional.status in _GONE:
            return "refused"
        if provisional.status == "replaced" and list(provisional.replaced_by) == change.structured_ids:
            return "already_committed"
        raise RuntimeError(f"provisional memory in unexpected state {provisional.status!r}")

    def _update(
        self,
        project: ProjectId,
        memory_id: str,
        expression: str,
        condition: str,
        values: dict[str, Any],
    ) -> TransactWriteItemTypeDef:
        update: dict[str, Any] = {
            "TableName": self._memories,
            "Key": key(storage_keys.memory_key(project, memory_id)),
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }
        if "#status" in expression or "#status" in condition:  # DynamoDB refuses unused names
            update["ExpressionAttributeNames"] = {"#status": "status"}
        return {"Update": update}  # type: ignore[typeddict-item]

    def _commit_actions(
        self, project: ProjectId, change: StructuringCommit
    ) -> list[TransactWriteItemTypeDef]:
        actions = [
            self._update(
                project,
                change.provisional_id,
                "SET #status = :replaced, replacedBy = :ids",
                "#status = :provisional",
                {
                    ":replaced": s("replaced"),
                    ":ids": strings(change.structured_ids),
                    ":provisional": s("provisional"),
                },
            )
        ]
        for memory in change.structured:
            # The final state as resolved now: a re-resolution may have changed it since staging.
            values: dict[str, Any] = {
                ":becomes": s(memory.status),
                ":staged": s("staged"),
                ":supersedes": strings(memory.supersedes),
                ":by": strings(memory.superseded_by),
            }
            expression = "SET #status = :becomes, supersedes = :supersedes, supersededBy = :by"
            if memory.valid_to is not None:
                values[":validTo"] = s(memory.valid_to)
                expression += ", validTo = :validTo REMOVE becomes"
            else:
                expression += " REMOVE becomes, validTo"
            actions.append(self._update(project, memory.id, expression, "#status = :staged", values))
        for retire in change.retire:
            actions.append(
                self._update(
                    project,
                    retire.memory_id,
                    "SET #status = :retired, validTo = :validTo, "
                    "supersededBy = list_append(if_not_exists(supersededBy, :none), :by)",
                    "#status = :active",
                    {
                        ":retired": s(retire.status),
                        ":validTo": s(retire.valid_to),
                        ":none": strings([]),
                        ":by": strings([retire.by]),
                        ":active": s("active"),
                    },
                )
            )
        for behind in change.file_behind:
            actions.append(
                self._update(
                    project,
                    behind.memory_id,
                    "SET supersedes = list_append(if_not_exists(supersedes, :none), :older)",
                    "attribute_exists(pk) AND NOT #status IN (:tombstoned, :purged)",
                    {
                        ":none": strings([]),
                        ":older": strings([behind.older]),
                        ":tombstoned": s("tombstoned"),
                        ":purged": s("purged"),
                    },
                )
            )
        return actions

    def abandon_staged(self, project: ProjectId, memory_ids: list[str]) -> None:
        """Staged memories of a refused commit (their event was forgotten): tombstoned. Their text
        and postings stay until the purge of their event's ledger entry erases them (it needs the
        text to find the postings)."""
        for memory_id in memory_ids:
            try:
                self._client.update_item(
                    TableName=self._memories,
                    Key=key(storage_keys.memory_key(project, memory_id)),
                    UpdateExpression="SET #status = :tombstoned",
                    ConditionExpression="#status = :staged",
                    ExpressionAttributeNames={"#status": "status"},
                    ExpressionAttributeValues={":tombstoned": s("tombstoned"), ":staged": s("staged")},
                )
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                    raise

    # -- 4. postings follow the items -------------------------------------------------------------

    def unindex(self, memory: MemoryRecord) -> None:
        """Remove a (replaced) memory's current-side postings and its counts, exactly once."""
        project = ProjectId(memory.project_id)
        plan = memory_plan(memory)
        chunks = plan.chunks()
        for number, chunk in enumerate(chunks):
            actions: list[TransactWriteItemTypeDef] = []
            for entry in chunk:
                actions.append(self._delete_posting(project, "c", entry, memory.id))
                actions.append(self._count(storage_keys.doc_freq_key(project, entry.term, plan.df_shard), -1))
            if number == len(chunks) - 1:
                actions.append(
                    self._update(
                        project,
                        memory.id,
                        "SET unindexed = :yes",
                        "attribute_not_exists(unindexed)",
                        {":yes": n(1)},
                    )
                )
                actions.append(
                    {
                        "Update": {
                            "TableName": self._index,
                            "Key": key(storage_keys.corpus_key(project, plan.corpus_shard)),
                            "UpdateExpression": "ADD docs :minus, #terms :dl",
                            "ExpressionAttributeNames": {"#terms": "terms"},
                            "ExpressionAttributeValues": {":minus": n(-1), ":dl": n(-plan.dl)},
                        }
                    }
                )
            self._transact(actions, memory_position=None)

    def move_to_history(self, memory: MemoryRecord) -> None:
        """Move a retired memory's postings from the current to the history side."""
        self.move_postings(memory, "c", "h")

    def move_postings(self, memory: MemoryRecord, from_side: str, to_side: str) -> None:
        """Move ``memory``'s postings from one side to the other, with its status and ``validTo``
        as given in them (no counts change: it is still one indexed memory). The last chunk also
        records them, with the new side, on the memory item. A chunk moved already (or removed by a forget)
        fails its conditions and is skipped."""
        project = ProjectId(memory.project_id)
        plan = memory_plan(memory)
        chunks = plan.chunks()
        for number, chunk in enumerate(chunks):
            actions: list[TransactWriteItemTypeDef] = []
            for entry in chunk:
                actions.append(self._delete_posting(project, from_side, entry, memory.id))
                actions.append(
                    {
                        "Put": {
                            "TableName": self._index,
                            "Item": posting_item(project, memory, to_side, entry, plan.dl),
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    }
                )
            if number == len(chunks) - 1:
                actions.append(self._record_postings(memory, to_side))
            self._transact(actions, memory_position=None)

    def restate_postings(self, memory: MemoryRecord, side: str) -> None:
        """Write ``memory``'s postings on ``side`` again with its status, ``validTo`` and successor
        as given (they stay where they are: no counts change). The last chunk also records them on
        the memory item. Only postings that exist are written: a chunk a forget removed meanwhile
        fails its conditions and is skipped, and is not brought back."""
        project = ProjectId(memory.project_id)
        plan = memory_plan(memory)
        chunks = plan.chunks()
        for number, chunk in enumerate(chunks):
            actions: list[TransactWriteItemTypeDef] = [
                {
                    "Put": {
                        "TableName": self._index,
                        "Item": posting_item(project, memory, side, entry, plan.dl),
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                }
                for entry in chunk
            ]
            if number == len(chunks) - 1:
                actions.append(self._record_postings(memory, side))
            self._transact(actions, memory_position=None)

    def _record_postings(self, memory: MemoryRecord, side: str) -> TransactWriteItemTypeDef:
        return self._update(
            ProjectId(memory.project_id),
            memory.id,
            f"SET {POSTINGS_RECORD} = :record",
            "attribute_exists(pk)",
            {":record": s(postings_record(memory, side))},
        )

    def posted_records(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, str | None]:
        """What each memory's item records of its postings (``postings_record``; None: nothing, an
        item written before the record existed)."""
        items = self._batch_get(project, memory_ids, projection=f"id, {POSTINGS_RECORD}")
        return {
            item["id"]["S"]: item[POSTINGS_RECORD]["S"] if POSTINGS_RECORD in item else None for item in items
        }

    def _delete_posting(
        self, project: ProjectId, side: str, entry: TermEntry, memory_id: str
    ) -> TransactWriteItemTypeDef:
        return {
            "Delete": {
                "TableName": self._index,
                "Key": key(storage_keys.posting_key(project, side, entry.term, entry.impact, memory_id)),
                "ConditionExpression": "attribute_exists(pk)",
            }
        }

    def _count(self, item_key: dict[str, str], delta: int) -> TransactWriteItemTypeDef:
        return {
            "Update": {
                "TableName": self._index,
                "Key": key(item_key),
                "UpdateExpression": "ADD df :delta",
                "ExpressionAttributeValues": {":delta": n(delta)},
            }
        }
