"""Memories and their term index in DynamoDB (docs/recall.md, "The term index").

Layout (keys built only by kaibo_core.core.storage_keys):

- Memories table: ``pk = project#memoryId`` → the memory (the authority on its status).
- Term index table (``pk``, ``sk``):
  - postings: ``pk = project#t<side>#term`` (side ``c`` current, ``h`` history),
    ``sk = <impact:05d>#memoryId`` → ``p = tf|dl|validFromMs|validToMs|status|type|stream``
    (kaibo_core.core.indexing.encode_posting; the status is a hint, the memory item decides);
  - document-frequency shards: ``pk = project#tc#term``, ``sk = ~df#NN`` → ``df``;
  - corpus shards: ``pk = project#corpus``, ``sk = NN`` → ``docs``, ``terms``.

Indexing a new memory is idempotent without a lock: its terms are cut into fixed
chunks (sorted, so every attempt cuts them alike) and each chunk is one
TransactWriteItems of conditional posting puts (``attribute_not_exists``) and
df increments; the last chunk also puts the memory item (``attribute_not_exists``)
and increments a corpus shard. A chunk that was already applied fails on its
first condition and is skipped; the memory item, written last, marks the whole
index as done. So a retry, a replay or a concurrent duplicate never counts twice,
and recall (which checks the memory item) never serves a half-indexed memory. The item
records the side its postings are on and the end and successor they carry (``ix``), which
structuring reads for the memories another run staged.

Each chunk but the last also checks that the memory item does not exist: once it does,
nothing is written again, on either side (a structured memory staged again for the other
side, by a redelivery, would otherwise count its first chunks twice). The first of several
chunks also puts an index marker (``storage_keys.index_marker_key``: the memory and its
side): if the last chunk never comes, forget's purge finds the postings by it, and a retry
that finds it finishes the index it describes. It is deleted once the item is in.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from kaibo_core.adapters.aws import io_pool
from kaibo_core.adapters.dynamodb_batch_reads import batch_get
from kaibo_core.adapters.dynamodb_transactions import transact_write
from kaibo_core.adapters.dynamodb_values import Item, key, n, s, string_list, strings
from kaibo_core.core import storage_keys
from kaibo_core.core.backoff import full_jitter
from kaibo_core.core.indexing import (
    DF_SHARDS,
    IndexPlan,
    TermEntry,
    encode_posting,
    memory_plan,
    memory_side,
    posting_of,
    postings_record,
    recorded_side,
    shard_of,
)
from kaibo_core.core.models.memories import MemoryRecord, SemanticPlacement, SourceEventRef
from kaibo_core.core.semantic.placement import decode_placement, encode_placement
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.text import PIPELINE_VERSION

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

    from kaibo_core.adapters.sdk_speedups.direct_reads import DirectDynamoReads

#: The memory item's attribute recording its postings (``kaibo_core.core.indexing.postings_record``:
#: their side, and the end and successor they carry): written with the item, changed when they move
#: or are written again. Absent on items written before it existed; the side alone on items written
#: before it recorded more.
POSTINGS_RECORD: Final = "ix"
_BACKOFF_BASE_SECONDS: Final = 0.01
_BACKOFF_CAP_SECONDS: Final = 0.5


def memory_item(memory: MemoryRecord, dl: int, side: str | None = None) -> Item:
    """The memory item; ``side``: where its postings are written (indexing records it)."""
    item: Item = {
        **key(storage_keys.memory_key(ProjectId(memory.project_id), memory.id)),
        "id": s(memory.id),
        "status": s(memory.status),
        "type": s(memory.type),
        "validFrom": s(memory.valid_from),
        "confidence": n(memory.confidence),
        "stream": s(memory.stream),
        "sourceEvents": {
            "L": [
                {"M": {"eventId": s(r.event_id), "stream": s(r.stream), "seq": n(r.seq), "hash": s(r.hash)}}
                for r in memory.source_events
            ]
        },
        "supersedes": strings(memory.supersedes),
        "supersededBy": strings(memory.superseded_by),
        "replacedBy": strings(memory.replaced_by),
        "tags": strings(memory.tags),
        "createdAt": s(memory.created_at),
        "dl": n(dl),
        "pv": n(PIPELINE_VERSION),
    }
    if memory.content is not None:
        item["content"] = s(memory.content)
    if memory.valid_to is not None:
        item["validTo"] = s(memory.valid_to)
    if memory.subject is not None:
        item["subject"] = s(memory.subject)
    if memory.replaces is not None:
        item["replaces"] = s(memory.replaces)
    if memory.becomes is not None:
        item["becomes"] = s(memory.becomes)
    if memory.semantic is not None:
        item["sem"] = s(encode_placement(memory.semantic))
    if side is not None:
        item[POSTINGS_RECORD] = s(postings_record(memory, side))
    return item


def memory_from_item(project: ProjectId, item: dict[str, Any]) -> MemoryRecord:
    return MemoryRecord(
        project_id=project,
        id=item["id"]["S"],
        status=item["status"]["S"],
        type=item["type"]["S"],
        content=item["content"]["S"] if "content" in item else None,
        valid_from=item["validFrom"]["S"],
        valid_to=item["validTo"]["S"] if "validTo" in item else None,
        confidence=float(item["confidence"]["N"]),
        stream=item["stream"]["S"],
        source_events=tuple(
            SourceEventRef(
                event_id=ref["M"]["eventId"]["S"],
                stream=ref["M"]["stream"]["S"],
                seq=int(ref["M"]["seq"]["N"]),
                hash=ref["M"]["hash"]["S"],
            )
            for ref in item.get("sourceEvents", {}).get("L", [])
        ),
        created_at=item["createdAt"]["S"],
        supersedes=string_list(item.get("supersedes")),
        superseded_by=string_list(item.get("supersededBy")),
        replaced_by=string_list(item.get("replacedBy")),
        subject=item["subject"]["S"] if "subject" in item else None,
        tags=string_list(item.get("tags")),
        replaces=item["replaces"]["S"] if "replaces" in item else None,
        becomes=item["becomes"]["S"] if "becomes" in item else None,
        semantic=decode_placement(item["sem"]["S"]) if "sem" in item else None,
        indexed_length=_indexed_length(item),
    )


def _indexed_length(item: dict[str, Any]) -> int | None:
    """The item's ``dl`` when its text was indexed by this text pipeline (``pv``) and is still held."""
    if "content" not in item or "dl" not in item or int(item.get("pv", {}).get("N", "0")) != PIPELINE_VERSION:
        return None
    return int(item["dl"]["N"])


def placement_condition(placement: SemanticPlacement | None, value: str) -> tuple[str, Item]:
    """A condition that the memory item holds ``placement`` (none: no ``sem``), and its value."""
    if placement is None:
        return "attribute_not_exists(sem)", {}
    return f"sem = {value}", {value: s(encode_placement(placement))}


def posting_item(project: ProjectId, memory: MemoryRecord, side: str, entry: TermEntry, dl: int) -> Item:
    posting = posting_of(memory, entry, dl)
    item: Item = {
        **key(storage_keys.posting_key(project, side, entry.term, entry.impact, memory.id)),
        "p": s(encode_posting(posting)),
    }
    if posting.vector is not None:  # a cell's posting: recall's cosine needs no memory item
        item["v"] = s(posting.vector)
    return item


def marked_memory(project: ProjectId, marker: dict[str, Any]) -> tuple[MemoryRecord, str]:
    """The memory an index marker holds, and the side its postings are written on."""
    return memory_from_item(project, marker), recorded_side(str(marker[POSTINGS_RECORD]["S"]))


def _failed_at(reasons: list[str | None], position: int | None, actions: int) -> bool:
    """Whether the action at ``position`` (from the end if negative) failed its condition."""
    if position is None or len(reasons) != actions:
        return False
    return reasons[position] == "ConditionalCheckFailed"


def conflict_backoff(attempt: int) -> float:
    """The wait before retrying a transaction that lost a race (shared with the structuring store)."""
    return full_jitter(attempt, _BACKOFF_BASE_SECONDS, _BACKOFF_CAP_SECONDS)


class DynamoMemoryStore:
    """Writes memories with their index; reads memory items (the authority on status)."""

    def __init__(
        self,
        client: DynamoDBClient,
        memories_table: str,
        index_table: str,
        sleep: Callable[[float], None] = time.sleep,
        reads: DynamoDBClient | DirectDynamoReads | None = None,
    ) -> None:
        self._client = client
        #: What batch reads go through (recall's: ``adapters.aws.dynamodb_reads``).
        self._reads = client if reads is None else reads
        self._memories = memories_table
        self._index = index_table
        self._sleep = sleep

    # -- writes ---------------------------------------------------------------------------------

    def index_new(self, memory: MemoryRecord) -> bool:
        """Store ``memory`` and index its text, exactly once. True when this call wrote or finished
        it on the side ``memory_side(memory)`` says; False when it already existed, or an earlier
        attempt had begun it on the other side (finished here, on that side)."""
        if memory.content is None:
            raise ValueError("a memory without content cannot be indexed")
        side = memory_side(memory)
        if side is None:
            raise ValueError(f"a {memory.status} memory is not indexed")
        project = ProjectId(memory.project_id)
        plan = memory_plan(memory)
        if len(plan.chunks()) == 1:
            return self._index_chunks(project, memory, side, plan, 0) == "applied"
        return self._index_with_marker(project, memory, side, plan)

    def _index_with_marker(
        self, project: ProjectId, memory: MemoryRecord, side: str, plan: IndexPlan
    ) -> bool:
        """``index_new`` of a memory of several chunks: the first writes the marker, the last the
        memory item; then the marker goes."""
        outcome = self._transact(
            self._first_chunk_actions(project, memory, side, plan), memory_position=-2, marker_position=-1
        )
        if outcome == "memory_exists":
            return False
        asked = side
        if outcome == "marker_exists":  # an earlier attempt began: finish what its marker says
            marked = self._marker(project, memory.id)
            if marked is None:
                return False  # finished meanwhile (the marker goes once the memory item is in)
            memory, side = marked
            plan = memory_plan(memory)
        if self._index_chunks(project, memory, side, plan, 1) != "applied":
            return False
        self._client.delete_item(
            TableName=self._index, Key=key(storage_keys.index_marker_key(project, memory.id))
        )
        return side == asked

    def _index_chunks(
        self, project: ProjectId, memory: MemoryRecord, side: str, plan: IndexPlan, start: int
    ) -> str:
        """Apply the chunks of ``plan`` from ``start`` on; the last one writes the memory item.
        ``memory_exists`` as soon as it exists (nothing more is written then)."""
        chunks = plan.chunks()
        for number in range(start, len(chunks)):
            actions = [
                a for entry in chunks[number] for a in self._term_actions(project, memory, side, entry, plan)
            ]
            if number == len(chunks) - 1:
                actions.extend(self._memory_actions(project, memory, side, plan))
                outcome = self._transact(actions, memory_position=-2)
            else:
                actions.append(self._no_memory_item(project, memory.id))
                outcome = self._transact(actions, memory_position=-1)
            if outcome == "memory_exists":
                return outcome
        return "applied"

    def _first_chunk_actions(
        self, project: ProjectId, memory: MemoryRecord, side: str, plan: IndexPlan
    ) -> list[TransactWriteItemTypeDef]:
        """The first of several chunks, with the marker naming what the index writes: should the
        last chunk never be applied, the purge still finds these postings (their keys hold stems)."""
        marker_key = key(storage_keys.index_marker_key(project, memory.id))
        marker = {**memory_item(memory, plan.dl, side), **marker_key}
        first = plan.chunks()[0]
        return [
            *(a for entry in first for a in self._term_actions(project, memory, side, entry, plan)),
            self._no_memory_item(project, memory.id),
            {
                "Put": {
                    "TableName": self._index,
                    "Item": marker,
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        ]

    def _no_memory_item(self, project: ProjectId, memory_id: str) -> TransactWriteItemTypeDef:
        """A condition that the memory item is not written yet: once it is (indexed, or a forget's
        tombstoned placeholder), no chunk is applied again, on either side."""
        return {
            "ConditionCheck": {
                "TableName": self._memories,
                "Key": key(storage_keys.memory_key(project, memory_id)),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def _marker(self, project: ProjectId, memory_id: str) -> tuple[MemoryRecord, str] | None:
        """The memory and side an unfinished index began with (None: no marker)."""
        item = self._client.get_item(
            TableName=self._index,
            Key=key(storage_keys.index_marker_key(project, memory_id)),
            ConsistentRead=True,
        ).get("Item")
        return None if item is None else marked_memory(project, item)

    def index_many(self, memories: Sequence[MemoryRecord]) -> list[bool | Exception]:
        """``index_new`` for each memory; each result is its outcome or its error.

        Memories of one counter shard are indexed one after another, the shards in parallel:
        memories of a batch share terms (their day's date terms at least), and two transactions
        updating the same df or corpus shard item at once would cancel each other.
        """
        by_shard: dict[int, list[int]] = {}
        for position, memory in enumerate(memories):
            by_shard.setdefault(shard_of(memory.id, DF_SHARDS), []).append(position)
        results: list[bool | Exception] = [False] * len(memories)

        def index_group(positions: list[int]) -> None:
            for position in positions:
                results[position] = self._outcome(memories[position])

        groups = list(by_shard.values())
        if len(groups) == 1:
            index_group(groups[0])
        else:
            # each thread with the invocation's deadline (a copy of this context each)
            for future in [
                io_pool().submit(contextvars.copy_context().run, index_group, group) for group in groups
            ]:
                future.result()
        return results

    def _outcome(self, memory: MemoryRecord) -> bool | Exception:
        try:
            return self.index_new(memory)
        except Exception as exc:
            return exc

    def _term_actions(
        self, project: ProjectId, memory: MemoryRecord, side: str, entry: TermEntry, plan: IndexPlan
    ) -> list[TransactWriteItemTypeDef]:
        return [
            {
                "Put": {
                    "TableName": self._index,
                    "Item": posting_item(project, memory, side, entry, plan.dl),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Update": {
                    "TableName": self._index,
                    "Key": key(storage_keys.doc_freq_key(project, entry.term, plan.df_shard)),
                    "UpdateExpression": "ADD df :one",
                    "ExpressionAttributeValues": {":one": n(1)},
                }
            },
        ]

    def _memory_actions(
        self, project: ProjectId, memory: MemoryRecord, side: str, plan: IndexPlan
    ) -> list[TransactWriteItemTypeDef]:
        return [
            {
                "Put": {
                    "TableName": self._memories,
                    "Item": memory_item(memory, plan.dl, side),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Update": {
                    "TableName": self._index,
                    "Key": key(storage_keys.corpus_key(project, plan.corpus_shard)),
                    "UpdateExpression": "ADD docs :one, #terms :dl",
                    "ExpressionAttributeNames": {"#terms": "terms"},
                    "ExpressionAttributeValues": {":one": n(1), ":dl": n(plan.dl)},
                }
            },
        ]

    def _transact(
        self,
        actions: list[TransactWriteItemTypeDef],
        memory_position: int | None,
        marker_position: int | None = None,
    ) -> str:
        """Apply one chunk: ``applied``, ``already_applied``, ``memory_exists`` (the condition at
        ``memory_position`` failed) or ``marker_exists`` (the one at ``marker_position``).
        Positions may count from the end. Races (a transaction in progress, a conflict) are
        retried by ``transact_write``, which raises its 429 when they do not end in time."""
        try:
            transact_write(self._client, actions, sleep=self._sleep)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
            if _failed_at(reasons, memory_position, len(actions)):
                return "memory_exists"
            if _failed_at(reasons, marker_position, len(actions)):
                return "marker_exists"
            if "ConditionalCheckFailed" in reasons:
                return "already_applied"  # a chunk is atomic: one posting present means all are
            raise
        return "applied"

    # -- reads ----------------------------------------------------------------------------------

    def get(self, project: ProjectId, memory_id: str) -> MemoryRecord | None:
        response = self._client.get_item(
            TableName=self._memories,
            Key=key(storage_keys.memory_key(project, memory_id)),
            ConsistentRead=True,
        )
        item = response.get("Item")
        return memory_from_item(project, item) if item else None

    def get_many(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, MemoryRecord]:
        """Memory items by id (strongly consistent BatchGetItem, unprocessed keys retried)."""
        found: dict[str, MemoryRecord] = {}
        for item in self._batch_get(project, memory_ids, projection=None):
            memory = memory_from_item(project, item)
            found[memory.id] = memory
        return found

    def statuses(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, str]:
        """The stored status of each of ``memory_ids`` that exists."""
        items = self._batch_get(project, memory_ids, projection="id, #status")
        return {item["id"]["S"]: item["status"]["S"] for item in items}

    def _batch_get(
        self, project: ProjectId, memory_ids: Iterable[str], projection: str | None
    ) -> list[dict[str, Any]]:
        keys = [storage_keys.memory_key(project, memory_id) for memory_id in dict.fromkeys(memory_ids)]
        return self._batch_get_keys(self._memories, keys, projection)

    def _batch_get_keys(
        self, table: str, item_keys: Sequence[dict[str, str]], projection: str | None
    ) -> list[dict[str, Any]]:
        """The items of ``table`` at ``item_keys`` that exist (strongly consistent; unprocessed keys
        retried, ``table_busy`` when they outlast the retries or the invocation's time)."""
        options: dict[str, Any] = {"ConsistentRead": True}
        if projection:
            options["ProjectionExpression"] = projection
            if "#status" in projection:
                options["ExpressionAttributeNames"] = {"#status": "status"}
        keys = [key(item_key) for item_key in item_keys]
        return batch_get(self._reads, table, keys, options=options, sleep=self._sleep)
