"""Repairing the term index in DynamoDB (``kaibo_core.services.reindexing.IndexRepairer``, run by
``tools/repair_index.py``): the memory items and the postings read by paged Scans, each page
resumable from its token; the damage mended with the writes structuring, forget and the purge use.

- ``chunk_heads``: for each side, the stored posting of the first term of each of a memory's
  chunks (a chunk is written, moved and removed by one transaction: its first posting stands for
  it), one BatchGetItem per memory.
- ``erase_postings``: postings nothing accounts for, each deleted (it must exist) with its
  document-frequency decrement in one transaction, then the counters left at zero deleted (their
  keys hold stems), as the purge does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from kaibo_core.adapters.dynamodb_forget import DynamoForgetStore
from kaibo_core.adapters.dynamodb_memories import memory_from_item
from kaibo_core.adapters.dynamodb_values import key, s
from kaibo_core.core import storage_keys
from kaibo_core.core.indexing import DF_SHARDS, memory_plan, shard_of
from kaibo_core.core.models.memories import MemoryRecord, PostingRef
from kaibo_core.core.storage_keys import ProjectId

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

_SIDES = ("c", "h")


class DynamoIndexRepairStore(DynamoForgetStore):
    """Moves, rewrites and removals are the structuring and forget stores'."""

    def memory_page(
        self, project: ProjectId | None, start: str | None, limit: int
    ) -> tuple[list[MemoryRecord], str | None]:
        """Up to ``limit`` memory items (of ``project``, or of every project) from ``start`` on,
        those flagged ``unindexed`` left out; and the token of the next page (None: the end)."""
        items, token = self._scan(self._memories, project, start, limit)
        memories = [
            memory_from_item(storage_keys.project_of_key(item["pk"]["S"]), item)
            for item in items
            if "id" in item and "status" in item and "unindexed" not in item
        ]
        return memories, token

    def posting_page(
        self, project: ProjectId | None, start: str | None, limit: int
    ) -> tuple[list[PostingRef], str | None]:
        """Up to ``limit`` term index items from ``start`` on, the postings among them; and the
        token of the next page."""
        items, token = self._scan(self._index, project, start, limit)
        refs: list[PostingRef] = []
        for item in items:
            owner, _, rest = item["pk"]["S"].partition("#")
            side, _, term = rest.partition("#")
            sort_key = item["sk"]["S"]
            if side in {"tc", "th"} and not sort_key.startswith(storage_keys.DF_SORT_PREFIX):
                impact, _, memory_id = sort_key.partition("#")
                refs.append(PostingRef(ProjectId(owner), side[1], term, int(impact), memory_id))
        return refs, token

    def _scan(
        self, table: str, project: ProjectId | None, start: str | None, limit: int
    ) -> tuple[list[dict[str, Any]], str | None]:
        request: dict[str, Any] = {"TableName": table, "Limit": limit, "ConsistentRead": True}
        if project is not None:
            request["FilterExpression"] = "begins_with(pk, :project)"
            request["ExpressionAttributeValues"] = {":project": s(storage_keys.project_prefix(project))}
        if start is not None:
            request["ExclusiveStartKey"] = json.loads(start)
        response = self._client.scan(**request)
        following = response.get("LastEvaluatedKey")
        return list(response.get("Items", [])), json.dumps(following) if following else None

    def chunk_heads(self, memory: MemoryRecord) -> dict[str, list[str | None]]:
        """For each side, the stored encoding (``p``) of the first posting of each of ``memory``'s
        chunks, in order (None: not there)."""
        project = ProjectId(memory.project_id)
        heads = [chunk[0] for chunk in memory_plan(memory).chunks() if chunk]
        keys = {
            (side, number): storage_keys.posting_key(project, side, entry.term, entry.impact, memory.id)
            for side in _SIDES
            for number, entry in enumerate(heads)
        }
        items = self._batch_get_keys(self._index, list(keys.values()), projection="pk, sk, p")
        stored = {(item["pk"]["S"], item["sk"]["S"]): item["p"]["S"] for item in items}
        return {
            side: [stored.get((keys[side, n]["pk"], keys[side, n]["sk"])) for n in range(len(heads))]
            for side in _SIDES
        }

    def existing(self, refs: Sequence[PostingRef]) -> set[PostingRef]:
        """Those of ``refs`` whose posting is stored."""
        items = self._batch_get_keys(self._index, [_ref_key(ref) for ref in refs], projection="pk, sk")
        stored = _keys_of(items)
        return {ref for ref in refs if (_ref_key(ref)["pk"], _ref_key(ref)["sk"]) in stored}

    def markers(self, project: ProjectId, memory_ids: Iterable[str]) -> set[str]:
        """The memories of ``memory_ids`` that have an index marker (an index begun, not finished)."""
        keys = [storage_keys.index_marker_key(project, memory_id) for memory_id in dict.fromkeys(memory_ids)]
        items = self._batch_get_keys(self._index, keys, projection="pk")
        return {item["pk"]["S"].split("#ix#", 1)[1] for item in items}

    def erase_postings(self, refs: Sequence[PostingRef]) -> None:
        """Delete each posting with its document-frequency decrement (one that is gone already is
        skipped), then delete the counters left at zero."""
        for ref in refs:
            project = ProjectId(ref.project_id)
            counter = storage_keys.doc_freq_key(project, ref.term, shard_of(ref.memory_id, DF_SHARDS))
            actions: list[TransactWriteItemTypeDef] = [
                {
                    "Delete": {
                        "TableName": self._index,
                        "Key": key(_ref_key(ref)),
                        "ConditionExpression": "attribute_exists(pk)",
                    }
                },
                self._count(counter, -1),
            ]
            self._transact(actions, memory_position=None)
            self._delete_if_zero(counter)


def _ref_key(ref: PostingRef) -> dict[str, str]:
    return storage_keys.posting_key(ProjectId(ref.project_id), ref.side, ref.term, ref.impact, ref.memory_id)


def _keys_of(items: Iterable[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(item["pk"]["S"], item["sk"]["S"]) for item in items}
