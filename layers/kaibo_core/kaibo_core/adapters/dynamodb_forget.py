"""Forget's writes in DynamoDB: a memory tombstoned, and its postings out of the index.

Tombstoning is a status change on the memory item (its text stays until purge), conditioned on
the status it had when read, so a concurrent change (structuring switching it on, retiring it)
is seen and the tombstone retried over it; a memory already forgotten is left as it is, unless this
very forget tombstoned it (a write retried by the SDK after its answer was lost: its first attempt
applied), which counts as done here, so its postings still leave the index at once. An event
that has no provisional memory yet gets a tombstoned one, so that nothing can create it later
(structuring and remember only ever put a memory item that does not exist).

Removing the postings (``remove_from_index``) takes a memory's terms in the same chunks as
indexing did, each chunk one transaction that deletes its postings (which must exist) and
decrements their document frequencies; the last one also decrements the corpus counts and sets
the memory's ``unindexed`` flag (which must not be set). A chunk is tried on the current side,
then on the history side (a retired memory's postings moved there chunk by chunk); a chunk found
on neither side was removed already. So a retry, or a memory unindexed earlier (a replaced
provisional one), never counts twice.

An index that never finished (its memory item, written last, is missing) is found by the marker
its first chunk wrote (``erase_unfinished``, called by the purge with every memory id a ledger
entry can have made): its postings' keys hold the stems of forgotten text.

The purge's search for events whose place a ledger entry does not keep (core/locating.py) reads the
project's stream heads (the StreamHeads index) and its streams' events, keys and ids only, a
filter keeping the ids sought; eventually consistent (the events sought are older than their
forget's grace window).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from kaibo_core.adapters.aws import io_pool
from kaibo_core.adapters.dynamodb_events import STREAM_HEADS_INDEX, record_from_item
from kaibo_core.adapters.dynamodb_memories import marked_memory, memory_item, placement_condition
from kaibo_core.adapters.dynamodb_structuring import DynamoStructuringStore
from kaibo_core.adapters.dynamodb_values import key, n, s
from kaibo_core.core import storage_keys
from kaibo_core.core.forgetting import FORGOTTEN, MemoryHeader
from kaibo_core.core.indexing import DF_SHARDS, TermEntry, memory_plan, shard_of
from kaibo_core.core.locating import EventsFound, StreamNames
from kaibo_core.core.models.events import EventRecord
from kaibo_core.core.models.memories import MemoryRecord, SourceEventRef
from kaibo_core.core.storage_keys import ProjectId

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

#: A memory whose status keeps changing under the tombstone is retried this often.
MAX_TOMBSTONE_ATTEMPTS: Final = 8
_SIDES: Final = ("c", "h")
#: Operands of one ``IN`` in a DynamoDB condition, at most.
_MAX_FILTER_OPERANDS: Final = 100


class DynamoForgetStore(DynamoStructuringStore):
    """Forget's and the purge's writes; ``events_table`` for the purge's payload erasure."""

    def __init__(
        self, client: DynamoDBClient, memories_table: str, index_table: str, events_table: str = ""
    ) -> None:
        super().__init__(client, memories_table, index_table)
        self._events = events_table

    def tombstone_many(
        self, project: ProjectId, memories: Sequence[MemoryRecord], marks: dict[str, str]
    ) -> list[MemoryRecord | None]:
        """``tombstone`` for each memory (as read a moment ago: tried first without a read), in
        parallel; each result in order."""
        calls = [partial(self.tombstone, project, memory.id, marks, read=memory) for memory in memories]
        return list(_in_parallel(calls))

    def remove_many_from_index(self, memories: Sequence[MemoryRecord]) -> None:
        """``remove_from_index`` for each memory: those of one counter shard one after another
        (they share document-frequency items, and two transactions on one item cancel each
        other), the shards in parallel."""
        _in_parallel([partial(_each, self.remove_from_index, group) for group in _by_df_shard(memories)])

    def erase_many(self, memories: Sequence[MemoryRecord], purged_at: str) -> None:
        """``erase`` for each memory, grouped by counter shard like ``remove_many_from_index``."""
        erase = partial(self._erase_at, purged_at)
        _in_parallel([partial(_each, erase, group) for group in _by_df_shard(memories)])

    def _erase_at(self, purged_at: str, memory: MemoryRecord) -> None:
        self.erase(memory, purged_at)

    def tombstone(
        self,
        project: ProjectId,
        memory_id: str,
        marks: dict[str, str],
        placeholder: MemoryRecord | None = None,
        read: MemoryRecord | None = None,
    ) -> MemoryRecord | None:
        """Tombstone ``memory_id``; the memory as it was just before (None: it was forgotten
        already, or it does not exist and no ``placeholder`` was given). ``read``: the memory as
        read a moment ago, tried first (one request instead of two when nothing changed since).

        ``marks``: ``tombstonedAt``, ``purgeAfter``, ``receiptId`` (stored on the item).
        """
        if read is not None and read.status not in FORGOTTEN and self._flip(project, read, marks):
            return read
        for _ in range(MAX_TOMBSTONE_ATTEMPTS):
            current = self.get(project, memory_id)
            if current is None:
                if placeholder is None or self._put_placeholder(placeholder, marks):
                    return None
                continue
            if current.status in FORGOTTEN:
                return None
            if self._flip(project, current, marks):
                return current
        raise RuntimeError(f"memory {memory_id} kept changing while it was being forgotten")

    def _flip(self, project: ProjectId, current: MemoryRecord, marks: dict[str, str]) -> bool:
        """Tombstone ``current`` if it is still as read; True if it is now tombstoned from that
        state under ``marks["receiptId"]`` (by this call, or by its own attempt the SDK retried)."""
        # The placement too must be the one read: the postings forget removes are the ones it
        # names (a re-index placing the memory meanwhile makes this fail, and forget read again).
        placed, placed_value = placement_condition(current.semantic, ":sem")
        values = {
            ":tombstoned": s("tombstoned"),
            ":prior": s(current.status),
            ":at": s(marks["tombstonedAt"]),
            ":after": s(marks["purgeAfter"]),
            ":receipt": s(marks["receiptId"]),
            **placed_value,
        }
        try:
            self._client.update_item(
                TableName=self._memories,
                Key=key(storage_keys.memory_key(project, current.id)),
                UpdateExpression=(
                    "SET #status = :tombstoned, priorStatus = :prior, tombstonedAt = :at, "
                    "purgeAfter = :after, receiptId = :receipt"
                ),
                ConditionExpression=f"#status = :prior AND {placed}",
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                # The SDK retries a write whose answer was lost: its first attempt may have applied,
                # and then this very tombstone is what failed the condition.
                found: dict[str, Any] = exc.response.get("Item", {})  # type: ignore[assignment]
                return _tombstoned_by(found, marks["receiptId"])
            raise
        return True

    def cite_source(self, project: ProjectId, memory_id: str, ref: SourceEventRef) -> None:
        """Give a forgotten placeholder that cites no event (``unlocated_placeholder``, written
        before the purge searched streams) the event it stands for, once the search found it: a
        receipt's check finds the event through it. Any other item is left as it is."""
        try:
            self._client.update_item(
                TableName=self._memories,
                Key=key(storage_keys.memory_key(project, memory_id)),
                UpdateExpression="SET sourceEvents = :refs, #stream = :stream",
                ConditionExpression=(
                    "#status IN (:tombstoned, :purged) "
                    "AND (attribute_not_exists(sourceEvents) OR size(sourceEvents) = :none)"
                ),
                ExpressionAttributeNames={"#status": "status", "#stream": "stream"},
                ExpressionAttributeValues={
                    ":refs": {
                        "L": [
                            {
                                "M": {
                                    "eventId": s(ref.event_id),
                                    "stream": s(ref.stream),
                                    "seq": n(ref.seq),
                                    "hash": s(ref.hash),
                                }
                            }
                        ]
                    },
                    ":stream": s(ref.stream),
                    ":tombstoned": s("tombstoned"),
                    ":purged": s("purged"),
                    ":none": n(0),
                },
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    def _put_placeholder(self, placeholder: MemoryRecord, marks: dict[str, str]) -> bool:
        item = memory_item(placeholder, 0)
        item.update({k: s(v) for k, v in marks.items()})
        item["unindexed"] = n(1)
        try:
            self._client.put_item(
                TableName=self._memories, Item=item, ConditionExpression="attribute_not_exists(pk)"
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def remove_from_index(self, memory: MemoryRecord) -> None:
        """Take ``memory``'s postings out of the index (either side) with its counts, exactly once."""
        if memory.content is None:
            return  # never indexed (a placeholder) or its text is gone already
        project = ProjectId(memory.project_id)
        if self._already_unindexed(project, memory.id):
            return  # a replaced provisional memory, or a retry: one read instead of failed transactions
        plan = memory_plan(memory)
        chunks = plan.chunks()
        for number, chunk in enumerate(chunks):
            last = number == len(chunks) - 1
            for side in _SIDES:
                actions = list(self._removal(project, memory, side, chunk, plan.df_shard))
                if last:
                    actions.extend(self._unindexed(project, memory, plan.corpus_shard, plan.dl))
                if self._transact(actions, memory_position=None) == "applied":
                    break

    def _already_unindexed(self, project: ProjectId, memory_id: str) -> bool:
        item = self._client.get_item(
            TableName=self._memories,
            Key=key(storage_keys.memory_key(project, memory_id)),
            ConsistentRead=True,
            ProjectionExpression="unindexed",
        ).get("Item")
        return bool(item and "unindexed" in item)

    def _removal(
        self, project: ProjectId, memory: MemoryRecord, side: str, chunk: tuple[TermEntry, ...], df_shard: int
    ) -> Iterator[TransactWriteItemTypeDef]:
        for entry in chunk:
            yield self._delete_posting(project, side, entry, memory.id)
            yield self._count(storage_keys.doc_freq_key(project, entry.term, df_shard), -1)

    def _unindexed(
        self, project: ProjectId, memory: MemoryRecord, corpus_shard: int, dl: int
    ) -> list[TransactWriteItemTypeDef]:
        corpus: dict[str, Any] = {
            "Update": {
                "TableName": self._index,
                "Key": key(storage_keys.corpus_key(project, corpus_shard)),
                "UpdateExpression": "ADD docs :minus, #terms :dl",
                "ExpressionAttributeNames": {"#terms": "terms"},
                "ExpressionAttributeValues": {":minus": n(-1), ":dl": n(-dl)},
            }
        }
        flag = self._update(
            project, memory.id, "SET unindexed = :yes", "attribute_not_exists(unindexed)", {":yes": n(1)}
        )
        return [flag, corpus]  # type: ignore[list-item]

    def term_counts(self, project: ProjectId, terms: Sequence[str]) -> dict[str, int]:
        """Each term's document frequency (its shards' sum: memories posted under it on either
        side), one Query of its df shards per term, in parallel; 0 for a term never indexed."""
        counted = _in_parallel([partial(self._term_count, project, term) for term in terms])
        return dict(zip(terms, counted, strict=True))

    def _term_count(self, project: ProjectId, term: str) -> int:
        response = self._client.query(
            TableName=self._index,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :df)",
            ExpressionAttributeValues={
                ":pk": s(storage_keys.postings_pk(project, "c", term)),
                ":df": s(storage_keys.DF_SORT_PREFIX),
            },
            ProjectionExpression="df",
            ConsistentRead=True,
        )
        return sum(int(item["df"]["N"]) for item in response.get("Items", []))

    def memories_with_term(self, project: ProjectId, term: str, at_most: int) -> set[str] | None:
        """Every memory posted under ``term``, on either side (all pages: a forget must be
        complete); None as soon as more than ``at_most`` are found (no more is read)."""
        found: set[str] = set()
        for side in _SIDES:
            request: dict[str, Any] = {
                "TableName": self._index,
                # Postings only: the df shards (``~df#NN``) sort after every one of them.
                "KeyConditionExpression": "pk = :pk AND sk < :counters",
                "ExpressionAttributeValues": {
                    ":pk": s(storage_keys.postings_pk(project, side, term)),
                    ":counters": s(storage_keys.DF_SORT_PREFIX),
                },
                "ProjectionExpression": "sk",
                "ConsistentRead": True,
            }
            while True:
                request["Limit"] = at_most + 1 - len(found)
                response = self._client.query(**request)
                found.update(str(item["sk"]["S"]).split("#", 1)[1] for item in response.get("Items", []))
                if len(found) > at_most:
                    return None
                start = response.get("LastEvaluatedKey")
                if not start:
                    break
                request["ExclusiveStartKey"] = start
        return found

    def headers(self, project: ProjectId, memory_ids: Iterable[str]) -> dict[str, MemoryHeader]:
        """Each existing memory's id, status and subject, read without its text (a candidate of a
        ``query`` or ``subject`` forget, filtered before anything large is read)."""
        items = self._batch_get(project, memory_ids, projection="id, #status, subject")
        return {
            item["id"]["S"]: MemoryHeader(
                item["id"]["S"], item["status"]["S"], item["subject"]["S"] if "subject" in item else None
            )
            for item in items
        }

    # -- purge ------------------------------------------------------------------------------------

    def erase(self, memory: MemoryRecord, purged_at: str) -> None:
        """A tombstoned memory's text gone: out of the index first (its terms come from its text),
        the document-frequency counters its terms leave at zero deleted (their keys hold the
        stems), then content, the stored plan, subject and tags removed, status ``purged``."""
        project = ProjectId(memory.project_id)
        if memory.content is not None:
            self.remove_from_index(memory)
            plan = memory_plan(memory)
            for entry in plan.entries:
                self._delete_if_zero(storage_keys.doc_freq_key(project, entry.term, plan.df_shard))
        try:
            self._client.update_item(
                TableName=self._memories,
                Key=key(storage_keys.memory_key(project, memory.id)),
                UpdateExpression=(
                    "SET #status = :purged, purgedAt = :at REMOVE content, #plan, subject, tags, sem"
                ),
                ConditionExpression="#status IN (:tombstoned, :purged)",
                ExpressionAttributeNames={"#status": "status", "#plan": "plan"},
                ExpressionAttributeValues={
                    ":purged": s("purged"),
                    ":tombstoned": s("tombstoned"),
                    ":at": s(purged_at),
                },
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            raise RuntimeError(
                f"memory {memory.id} is not tombstoned: the purge erases nothing else"
            ) from exc

    def erase_unfinished(self, project: ProjectId, memory_ids: Sequence[str]) -> None:
        """Erase the postings of every index of ``memory_ids`` that never finished, found by its
        marker (the purge passes every memory a ledger entry can have made)."""
        keys = [storage_keys.index_marker_key(project, memory_id) for memory_id in dict.fromkeys(memory_ids)]
        for marker in self._batch_get_keys(self._index, keys, projection=None):
            self._erase_marked(project, marker)

    def _erase_marked(self, project: ProjectId, marker: dict[str, Any]) -> None:
        """The chunks a marker's index may have applied (all but the last: that one writes the memory
        item and the marker's deletion) out of the index with their document frequencies, exactly
        once as in ``remove_from_index``; the counters left at zero deleted; then the marker, which
        holds the text. Of an index that did finish (the marker's deletion failed), the item's own
        erasure removes the postings: whichever runs first takes each chunk, the other skips it."""
        memory, side = marked_memory(project, marker)
        plan = memory_plan(memory)
        begun = plan.chunks()[:-1]
        for chunk in begun:
            self._transact(list(self._removal(project, memory, side, chunk, plan.df_shard)), None)
        for entry in (entry for chunk in begun for entry in chunk):
            self._delete_if_zero(storage_keys.doc_freq_key(project, entry.term, plan.df_shard))
        marker_key = storage_keys.index_marker_key(project, memory.id)
        self._client.delete_item(TableName=self._index, Key=key(marker_key))

    def _delete_if_zero(self, item_key: dict[str, str]) -> None:
        try:
            self._client.delete_item(
                TableName=self._index,
                Key=key(item_key),
                ConditionExpression="df = :zero",
                ExpressionAttributeValues={":zero": n(0)},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    def get_events(self, project: ProjectId, locations: Sequence[tuple[str, int]]) -> list[EventRecord]:
        """Events by (stream, seq), strongly consistent, in the order asked; missing ones skipped
        (the purge reads the few it must write placeholders for)."""
        found = _in_parallel([partial(self._get_event, project, stream, seq) for stream, seq in locations])
        return [event for event in found if event is not None]

    def _get_event(self, project: ProjectId, stream: str, seq: int) -> EventRecord | None:
        item = self._client.get_item(
            TableName=self._events, Key=key(storage_keys.event_key(project, stream, seq)), ConsistentRead=True
        ).get("Item")
        return record_from_item(item) if item else None

    def erase_payload(self, project: ProjectId, stream: str, seq: int) -> None:
        """An event's payload and salt gone; its header, digest and hash stay (the chain verifies)."""
        try:
            self._client.update_item(
                TableName=self._events,
                Key=key(storage_keys.event_key(project, stream, seq)),
                UpdateExpression="REMOVE payload, salt",
                ConditionExpression="attribute_exists(pk)",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    def stream_names(self, project: ProjectId, after: str | None, limit: int) -> StreamNames:
        """One read of the project's streams, in name order, after the stream ``after`` (None: from
        the first), at most ``limit``."""
        partition = s(storage_keys.stream_heads_partition(project))
        query: dict[str, Any] = {
            "TableName": self._events,
            "IndexName": STREAM_HEADS_INDEX,
            "KeyConditionExpression": "headsPk = :project",
            "ExpressionAttributeValues": {":project": partition},
            "ProjectionExpression": "headsSk",
            "Limit": limit,
        }
        if after is not None:
            query["ExclusiveStartKey"] = {
                "headsPk": partition,
                "headsSk": s(after),
                **key(storage_keys.head_key(project, after)),
            }
        response = self._client.query(**query)
        items = response.get("Items", [])
        return StreamNames(
            tuple(item["headsSk"]["S"] for item in items),
            more="LastEvaluatedKey" in response,
            reads=int(response.get("ScannedCount", len(items))),
        )

    def find_events(
        self, project: ProjectId, stream: str, event_ids: Collection[str], from_seq: int, limit: int
    ) -> EventsFound:
        """One read of ``stream`` from ``from_seq`` on (at most ``limit`` events, or DynamoDB's 1 MB
        page): which of ``event_ids`` it holds, by their keys and ids alone (no payload is
        returned). The filter names the ids when they fit one ``IN`` (its 100 operands); the ids
        are matched here either way."""
        query: dict[str, Any] = {
            "TableName": self._events,
            "KeyConditionExpression": "pk = :pk AND seq >= :from",
            "ProjectionExpression": "seq, #id",
            "ExpressionAttributeNames": {"#id": "id"},
            "ExpressionAttributeValues": {
                ":pk": s(storage_keys.events_pk(project, stream)),
                ":from": n(max(from_seq, storage_keys.HEAD_SEQ + 1)),
            },
            "Limit": limit,
        }
        sought = sorted(event_ids)
        if len(sought) <= _MAX_FILTER_OPERANDS:
            names = {f":e{at}": s(event) for at, event in enumerate(sought)}
            query["FilterExpression"] = f"#id IN ({', '.join(names)})"
            query["ExpressionAttributeValues"].update(names)
        response = self._client.query(**query)
        wanted = set(sought)
        found = {
            item["id"]["S"]: int(item["seq"]["N"])
            for item in response.get("Items", [])
            if item.get("id", {}).get("S") in wanted
        }
        last = response.get("LastEvaluatedKey")
        return EventsFound(
            found,
            next_seq=int(last["seq"]["N"]) + 1 if last else None,
            reads=int(response.get("ScannedCount", 0)),
        )


def _tombstoned_by(item: dict[str, Any], receipt_id: str) -> bool:
    """``item`` (as a failed condition found it) was tombstoned under ``receipt_id``."""
    status, receipt = item.get("status", {}).get("S"), item.get("receiptId", {}).get("S")
    return bool(status == "tombstoned" and receipt == receipt_id)


def _by_df_shard(memories: Sequence[MemoryRecord]) -> list[list[MemoryRecord]]:
    groups: dict[int, list[MemoryRecord]] = {}
    for memory in memories:
        groups.setdefault(shard_of(memory.id, DF_SHARDS), []).append(memory)
    return list(groups.values())


def _each(action: Callable[[MemoryRecord], None], memories: Sequence[MemoryRecord]) -> None:
    for memory in memories:
        action(memory)


def _in_parallel(calls: Sequence[Callable[[], Any]]) -> list[Any]:
    """Run ``calls`` on the I/O pool; their results in order (the first error is raised)."""
    if len(calls) <= 1:
        return [call() for call in calls]
    pool = io_pool()  # shared by the whole invocation: never shut down here
    # each thread with the invocation's deadline (core/deadline.py): a copy of this context each
    futures = [pool.submit(contextvars.copy_context().run, call) for call in calls]
    return [future.result() for future in futures]
