"""Re-indexing by meaning in DynamoDB: memory items read by a paged Scan, a placement replaced
in one transaction with the cell postings it names.

A memory's new placement, its new cell postings (and their document-frequency counters) and the
removal of its old ones are one TransactWriteItems, conditioned on the item still having the
status and placement it was read with, and on each old posting still being where it was: a
memory that structuring retired or forget tombstoned meanwhile fails the transaction and is read
again (``SemanticReindexer``). The index never names a placement its item does not hold.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from kaibo_core.adapters.dynamodb_memories import memory_from_item, placement_condition, posting_item
from kaibo_core.adapters.dynamodb_structuring import DynamoStructuringStore
from kaibo_core.adapters.dynamodb_transactions import transact_write
from kaibo_core.adapters.dynamodb_values import key, s
from kaibo_core.core import storage_keys
from kaibo_core.core.indexing import cell_entries, memory_plan, memory_side
from kaibo_core.core.models.memories import MemoryRecord, SemanticPlacement
from kaibo_core.core.semantic.placement import encode_placement
from kaibo_core.core.storage_keys import ProjectId

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef


class DynamoPlacementStore(DynamoStructuringStore):
    """``get`` and the posting and counter actions are the structuring store's."""

    def memories(self, project: ProjectId | None) -> Iterator[MemoryRecord]:
        """Every memory item (of ``project``, or of every project), page by page."""
        request: dict[str, Any] = {"TableName": self._memories, "ConsistentRead": True}
        if project is not None:
            request["FilterExpression"] = "begins_with(pk, :project)"
            request["ExpressionAttributeValues"] = {":project": s(storage_keys.project_prefix(project))}
        while True:
            response = self._client.scan(**request)
            for item in response.get("Items", []):
                if "id" not in item or "status" not in item:
                    continue  # not a memory item (the table holds only memories; be safe anyway)
                owner = storage_keys.project_of_key(item["pk"]["S"])
                yield memory_from_item(owner, item)
            start = response.get("LastEvaluatedKey")
            if not start:
                return
            request["ExclusiveStartKey"] = start

    def replace_placement(self, memory: MemoryRecord, placement: SemanticPlacement) -> bool:
        """``memory`` (as read) placed at ``placement``; False if it changed since it was read."""
        side = memory_side(memory)
        if side is None or memory.content is None:
            return False
        project = ProjectId(memory.project_id)
        placed = replace(memory, semantic=placement)
        plan = memory_plan(placed)
        actions: list[TransactWriteItemTypeDef] = [self._item_update(project, memory, placement)]
        for entry in cell_entries(memory.semantic):
            actions.append(self._delete_posting(project, side, entry, memory.id))
            actions.append(self._count(storage_keys.doc_freq_key(project, entry.term, plan.df_shard), -1))
        for entry in cell_entries(placement):
            posting = posting_item(project, placed, side, entry, plan.dl)
            actions.append({"Put": {"TableName": self._index, "Item": posting}})
            actions.append(self._count(storage_keys.doc_freq_key(project, entry.term, plan.df_shard), 1))
        try:
            transact_write(self._client, actions, sleep=self._sleep)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "TransactionCanceledException":
                return False
            raise
        return True

    def _item_update(
        self, project: ProjectId, memory: MemoryRecord, placement: SemanticPlacement
    ) -> TransactWriteItemTypeDef:
        placed, placed_value = placement_condition(memory.semantic, ":old")
        return {
            "Update": {
                "TableName": self._memories,
                "Key": key(storage_keys.memory_key(project, memory.id)),
                "UpdateExpression": "SET sem = :new",
                "ConditionExpression": f"#status = :status AND {placed} AND attribute_not_exists(unindexed)",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {
                    ":status": s(memory.status),
                    ":new": s(encode_placement(placement)),
                    **placed_value,
                },
            }
        }
