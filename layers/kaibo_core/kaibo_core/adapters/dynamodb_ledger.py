"""The deletion ledger in DynamoDB: one table, string keys ``pk`` (HASH) and ``sk`` (RANGE).

Layout (keys built only by kaibo_core.core.storage_keys):

- Entries: ``pk = <project>#ledger``, ``sk = <seq, 12 digits zero-padded>`` (string order is
  seq order). Attributes in the served shape's camelCase: ``v``, ``projectId``, ``ledgerSeq``
  (N), ``id`` (the receipt id), ``memoryIds`` and ``eventIds`` (L of S, sorted),
  ``reasonDigest``, ``tombstonedAt``, ``purgeAfter``, ``prevHash``, ``hash``; and, neither hashed
  nor served, ``eventLocations`` (L of M ``id``, ``stream``, ``seq``): where each event lives, for
  the purge.
- Head: same ``pk``, ``sk = head`` (sorts after every entry): ``seq`` (N), ``hash`` (S).
  Absent until the first append.
- Receipt pointers: ``pk = <project>#receipt#<receiptId>``, ``sk = r``: ``seq`` (N). A
  receipt is found by a key built from the caller's project, so another project's receipt
  id finds nothing.
- Forgets not known to be applied: an entry carries ``applyPk = unapplied`` and ``applySk =
  <tombstonedAt>#<project>#<seq>`` (the sparse ``Unapplied`` index) until ``mark_applied``: the
  forget that wrote it removes them once every tombstone is in place; if it died before, the
  purge finishes its tombstones at its next run, long before the grace window ends.
- Forget idempotency keys: ``pk = <project>#forgetkey#<key>``, ``sk = k``: what the keyed forget
  answered (``memories``: L of M ``id``, ``status``, ``type``, ``why``; ``eventIds``;
  ``receiptId`` unless its set was empty), ``attemptId``, ``requestDigest``,
  ``reasonSaltCiphertext`` (the reason's salt, KMS-encrypted by the forget service: base64; a
  record written before salts were encrypted holds ``reasonSalt`` in clear instead, read alike),
  ``writtenAt`` and ``expiresAt`` (N, epoch seconds: the table's TTL attribute). Written in the
  append's transaction (``attribute_not_exists(pk) OR expiresAt <= :now``), so a key records at
  most one entry; an expired record is read as absent (TTL deletes it within days, not at once).
- A keyed forget's entry also carries ``forgetKey`` (not hashed, not served): the purge deletes
  that key's record (``release_forget_key``) before it marks the entry purged, so that no salt
  outlives the text it could confirm.
- The purge's work list: an entry not purged yet carries ``duePk = due`` and ``dueSk =
  <purgeAfter>#<project>#<seq>`` (the sparse ``PurgeDue`` index, oldest first); ``mark_purged``
  removes them and sets ``purgedAt`` (not hashed: the entry's header never changes). An entry
  the purge finished without erasing every event's payload (written before ``eventLocations``,
  naming an event no memory cites: its place is unknown) leaves it through ``mark_unlocated``
  instead: ``unlocatedEventIds`` (L of S) and ``unlocatedAt`` set, no ``purgedAt``. Either way the
  purge is finished (``purge_outcome``: its receipt reads ``purged``, with the unlocated ids).
- The purge's search for such events in the project's streams (core/locating.py), neither hashed
  nor served: each event it finds is appended to ``eventLocations`` (erased from then on like any
  other); ``locateCursor`` (M ``stream``, ``seq``?) is where a search cut short by its run goes on,
  and ``locateFinishedAt`` says it read every stream (an event still sought is stored nowhere).
  Set by ``record_search``; the ``PurgeDue`` index projects them with the entry. An entry marked
  unlocated before the search existed has ``unlocatedEventIds`` and no ``locateFinishedAt``: its
  events were never searched for, and it is on no index. ``unsearched_unlocated`` finds such
  entries (a Scan: tools/requeue_unlocated.py, once) and ``requeue_unsearched`` puts each back on
  the work list (``duePk``/``dueSk`` again), for the purge to search; ``mark_purged`` then drops
  the stale ``unlocatedEventIds``/``unlocatedAt``.
  While its search goes on, each run sets the entry's ``dueSk`` to that run's instant: it waits
  behind the entries due before, instead of taking a place in every run's list ahead of them.

An append reads the head (strongly consistent) and writes the entry, its receipt pointer
and the new head in ONE TransactWriteItems, the head conditioned on still being what was
read (``attribute_not_exists`` for the first entry). Two writers that read the same head
cannot both commit: the loser re-reads and retries after a jittered wait, so concurrent
appends get consecutive seqs, with no gap and no duplicate. The entry and the pointer are
also ``attribute_not_exists``, so nothing is ever overwritten.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from kaibo_core.adapters.dynamodb_transactions import transact_write
from kaibo_core.adapters.dynamodb_values import Item, key, n, s, string_list, strings
from kaibo_core.core import chain, storage_keys, webhooks
from kaibo_core.core import deadline as invocation
from kaibo_core.core.backoff import full_jitter
from kaibo_core.core.forgetting import AnsweredMember, ForgetKeyTakenError, KeyedForget
from kaibo_core.core.ledger import (
    EventLocation,
    LedgerEntry,
    PurgeOutcome,
    ReceiptIdTakenError,
    ledger_busy,
    make_entry,
    new_receipt_id,
    records_same_forget,
)
from kaibo_core.core.locating import LocateCursor, LocateState, Searched
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.webhooks import Notification

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

    from kaibo_core.adapters.webhook_outbox import WebhookOutbox

#: Each lost race means another append committed, so N concurrent writers need at most N
#: attempts each; beyond that, give up and let the caller answer "try again".
MAX_APPEND_ATTEMPTS: Final = 8
_BACKOFF_BASE_SECONDS: Final = 0.01
_BACKOFF_CAP_SECONDS: Final = 0.5

# Positions of the actions in the append transaction (cancellation reasons are positional).
_ENTRY, _RECEIPT, _HEAD, _KEY = 0, 1, 2, 3
_RACE_CODES: Final = frozenset({"ConditionalCheckFailed", "TransactionConflict"})
_LAST_SORT_KEY: Final = "9" * storage_keys.LEDGER_SEQ_DIGITS

#: The sparse index of entries whose tombstones may be unfinished, and its one partition.
UNAPPLIED_INDEX: Final = "Unapplied"
UNAPPLIED_PARTITION: Final = "unapplied"
#: Items a Scan for entries marked unlocated before the purge searched streams reads per page.
_SCAN_PAGE: Final = 1000
#: The sparse index of entries whose purge is still owed, and its one partition.
PURGE_DUE_INDEX: Final = "PurgeDue"
PURGE_DUE_PARTITION: Final = "due"

# "hash" is a DynamoDB reserved word: expressions name the head's attributes through these.
_HEAD_NAMES: Final = {"#seq": "seq", "#hash": "hash"}


def entry_item(entry: LedgerEntry) -> Item:
    project = ProjectId(entry.project_id)
    return {
        **key(storage_keys.ledger_entry_key(project, entry.seq)),
        "v": n(entry.v),
        "projectId": s(entry.project_id),
        "ledgerSeq": n(entry.seq),
        "id": s(entry.id),
        "memoryIds": strings(entry.memory_ids),
        "eventIds": strings(entry.event_ids),
        "reasonDigest": s(entry.reason_digest),
        "tombstonedAt": s(entry.tombstoned_at),
        "purgeAfter": s(entry.purge_after),
        "prevHash": s(entry.prev_hash),
        "hash": s(entry.hash),
        "applyPk": s(UNAPPLIED_PARTITION),
        "applySk": s(storage_keys.work_list_sort_key(entry.tombstoned_at, project, entry.seq)),
        "duePk": s(PURGE_DUE_PARTITION),
        "dueSk": s(storage_keys.work_list_sort_key(entry.purge_after, project, entry.seq)),
        **_locations_attribute(entry.event_locations),
        **({"forgetKey": s(entry.forget_key)} if entry.forget_key is not None else {}),
    }


def _locations_attribute(locations: Sequence[EventLocation]) -> Item:
    if not locations:
        return {}
    return {
        "eventLocations": {
            "L": [
                {"M": {"id": s(event), "stream": s(stream), "seq": n(seq)}}
                for event, stream, seq in locations
            ]
        }
    }


def _locations(item: dict[str, Any]) -> tuple[EventLocation, ...]:
    return tuple(
        (place["M"]["id"]["S"], place["M"]["stream"]["S"], int(place["M"]["seq"]["N"]))
        for place in item.get("eventLocations", {}).get("L", [])
    )


def _locate_state(item: dict[str, Any]) -> LocateState:
    if "locateFinishedAt" in item:
        return LocateState(finished=True)
    cursor = item.get("locateCursor", {}).get("M")
    if cursor is None:
        return LocateState()
    seq = int(cursor["seq"]["N"]) if "seq" in cursor else None
    return LocateState(LocateCursor(cursor["stream"]["S"], seq))


def _cursor_attribute(cursor: LocateCursor) -> Item:
    fields: Item = {"stream": s(cursor.stream)}
    if cursor.seq is not None:
        fields["seq"] = n(cursor.seq)
    return {"locateCursor": {"M": fields}}


def keyed_item(project: ProjectId, keyed: KeyedForget) -> Item:
    item: Item = {
        **key(storage_keys.forget_key_key(project, keyed.key)),
        "requestDigest": s(keyed.request_digest),
        **_salt_attribute(keyed),
        "attemptId": s(keyed.attempt_id),
        "memories": {
            "L": [
                {"M": {"id": s(m.id), "status": s(m.status), "type": s(m.type), "why": s(m.why)}}
                for m in keyed.members
            ]
        },
        "eventIds": {"L": [s(event) for event in keyed.event_ids]},
        "writtenAt": n(keyed.written_at),
        "expiresAt": n(keyed.expires_at),
    }
    if keyed.receipt_id is not None:
        item["receiptId"] = s(keyed.receipt_id)
    return item


def _salt_attribute(keyed: KeyedForget) -> Item:
    if keyed.salt_ciphertext is not None:
        return {"reasonSaltCiphertext": s(keyed.salt_ciphertext)}
    assert keyed.clear_salt is not None
    return {"reasonSalt": s(keyed.clear_salt)}


def keyed_from_item(idempotency_key: str, item: dict[str, Any]) -> KeyedForget:
    """Either shape: the salt encrypted, or in clear (a record written before salts were encrypted)."""
    return KeyedForget(
        key=idempotency_key,
        request_digest=item["requestDigest"]["S"],
        salt_ciphertext=item["reasonSaltCiphertext"]["S"] if "reasonSaltCiphertext" in item else None,
        clear_salt=item["reasonSalt"]["S"] if "reasonSalt" in item else None,
        attempt_id=item["attemptId"]["S"],
        receipt_id=item["receiptId"]["S"] if "receiptId" in item else None,
        members=tuple(
            AnsweredMember(m["M"]["id"]["S"], m["M"]["status"]["S"], m["M"]["type"]["S"], m["M"]["why"]["S"])
            for m in item["memories"]["L"]
        ),
        event_ids=tuple(event["S"] for event in item["eventIds"]["L"]),
        written_at=int(item["writtenAt"]["N"]),
    )


def _key_claim(table: str, project: ProjectId, keyed: KeyedForget) -> dict[str, Any]:
    """The Put of a key's record: only if the key is free (never used, or its record expired)."""
    return {
        "TableName": table,
        "Item": keyed_item(project, keyed),
        "ConditionExpression": "attribute_not_exists(pk) OR expiresAt <= :now",
        "ExpressionAttributeValues": {":now": n(keyed.written_at)},
    }


def entry_from_item(item: dict[str, Any]) -> LedgerEntry:
    return LedgerEntry(
        project_id=item["projectId"]["S"],
        seq=int(item["ledgerSeq"]["N"]),
        id=item["id"]["S"],
        memory_ids=string_list(item.get("memoryIds")),
        event_ids=string_list(item.get("eventIds")),
        reason_digest=item["reasonDigest"]["S"],
        tombstoned_at=item["tombstonedAt"]["S"],
        purge_after=item["purgeAfter"]["S"],
        prev_hash=item["prevHash"]["S"],
        hash=item["hash"]["S"],
        v=int(item["v"]["N"]),
        event_locations=_locations(item),
        forget_key=item["forgetKey"]["S"] if "forgetKey" in item else None,
        locate=_locate_state(item),
    )


class DynamoLedgerStore:
    """Appends to and reads each project's deletion ledger (see the module docstring)."""

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
        max_attempts: int = MAX_APPEND_ATTEMPTS,
        outbox: WebhookOutbox | None = None,
    ) -> None:
        self._client = client
        self._table = table_name
        self._sleep = sleep
        self._max_attempts = max_attempts
        self._outbox = outbox

    # -- writes ---------------------------------------------------------------------------------

    def append(
        self,
        project: ProjectId,
        *,
        memory_ids: Sequence[str],
        event_ids: Sequence[str],
        reason_digest: str,
        tombstoned_at: str,
        purge_after: str,
        receipt_id: str | None = None,
        event_locations: Sequence[EventLocation] = (),
        keyed: KeyedForget | None = None,
    ) -> LedgerEntry:
        """Chain a new entry onto the head, retrying lost races; ``429 ledger_busy`` if they persist.

        ``receipt_id`` (default: a new one) is kept across retries. If it already names an
        entry of this project, that entry is returned when it records the same forget (a
        retried call), and ReceiptIdTakenError is raised otherwise.

        ``keyed``: the forget's idempotency record, claimed in the same transaction;
        ForgetKeyTakenError (nothing appended) if another call holds the key.
        """
        receipt = receipt_id or new_receipt_id()
        for attempt in range(self._max_attempts):
            seq, prev_hash = self.head(project)
            entry = make_entry(
                project_id=project,
                seq=seq + 1,
                receipt_id=receipt,
                memory_ids=memory_ids,
                event_ids=event_ids,
                reason_digest=reason_digest,
                tombstoned_at=tombstoned_at,
                purge_after=purge_after,
                prev_hash=prev_hash,
                event_locations=event_locations,
                forget_key=keyed.key if keyed is not None else None,
            )
            emit = (
                self._outbox.prepare(project, [self._forgotten(entry)], tombstoned_at)
                if self._outbox
                else None
            )
            outcome = self._try_append(
                project, entry, expected_seq=seq, emit=emit.actions if emit else (), keyed=keyed
            )
            if outcome == "appended":
                if self._outbox and emit:
                    self._outbox.relay(emit.events)
                return entry
            if outcome == "receipt_exists":
                return self._replayed(project, receipt, memory_ids, event_ids, reason_digest)
            if outcome == "key_taken" and keyed is not None:
                raise ForgetKeyTakenError(keyed.key)
            wait = full_jitter(attempt, _BACKOFF_BASE_SECONDS, _BACKOFF_CAP_SECONDS)
            if not invocation.time_for(wait):
                break
            self._sleep(wait)
        raise ledger_busy()

    @staticmethod
    def _forgotten(entry: LedgerEntry) -> Notification:
        return webhooks.forgotten(entry.id, entry.seq, entry.memory_ids, entry.event_ids)

    def _try_append(
        self,
        project: ProjectId,
        entry: LedgerEntry,
        *,
        expected_seq: int,
        emit: Sequence[TransactWriteItemTypeDef] = (),
        keyed: KeyedForget | None = None,
    ) -> str:
        """One transaction (with the forget's idempotency record and the ``memory.forgotten``
        event's outbox writes, if any): ``appended``, ``lost_race``, ``receipt_exists`` or
        ``key_taken``."""
        actions: list[TransactWriteItemTypeDef] = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": entry_item(entry),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            {
                "Put": {
                    "TableName": self._table,
                    "Item": {**key(storage_keys.receipt_key(project, entry.id)), "seq": n(entry.seq)},
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
            self._head_action(project, entry, expected_seq),
            *([{"Put": _key_claim(self._table, project, keyed)}] if keyed is not None else []),  # type: ignore[list-item]
            *emit,
        ]
        try:
            transact_write(self._client, actions, busy=ledger_busy, sleep=self._sleep)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            return self._classify(exc, keyed=keyed is not None)
        return "appended"

    def _head_action(
        self, project: ProjectId, entry: LedgerEntry, expected_seq: int
    ) -> TransactWriteItemTypeDef:
        head_item: Item = {
            **key(storage_keys.ledger_head_key(project)),
            "seq": n(entry.seq),
            "hash": s(entry.hash),
        }
        if expected_seq == 0:
            return {
                "Put": {
                    "TableName": self._table,
                    "Item": head_item,
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            }
        return {
            "Put": {
                "TableName": self._table,
                "Item": head_item,
                "ConditionExpression": "#seq = :expected",
                "ExpressionAttributeNames": {"#seq": "seq"},
                "ExpressionAttributeValues": {":expected": n(expected_seq)},
            }
        }

    @staticmethod
    def _classify(exc: ClientError, *, keyed: bool = False) -> str:
        """Read the positional cancellation reasons: whose condition failed, or a plain conflict.
        The receipt first: a retry of this very append also finds its own key record."""
        reasons: list[dict[str, Any]] = list(exc.response.get("CancellationReasons", []))  # type: ignore[arg-type]
        codes = [reason.get("Code") for reason in reasons]
        if len(codes) > _RECEIPT and codes[_RECEIPT] == "ConditionalCheckFailed":
            return "receipt_exists"
        if keyed and len(codes) > _KEY and codes[_KEY] == "ConditionalCheckFailed":
            return "key_taken"
        if any(code in _RACE_CODES for code in codes) and all(
            code in _RACE_CODES or code in {"None", None} for code in codes
        ):
            return "lost_race"  # the head (or the entry at its seq) moved, or a transaction collided
        raise RuntimeError(f"ledger append cancelled for an unexpected reason: {codes}") from exc

    def _replayed(
        self,
        project: ProjectId,
        receipt_id: str,
        memory_ids: Sequence[str],
        event_ids: Sequence[str],
        reason_digest: str,
    ) -> LedgerEntry:
        existing = self.receipt(project, receipt_id)
        if existing is None or not records_same_forget(existing, memory_ids, event_ids, reason_digest):
            raise ReceiptIdTakenError(f"receipt {receipt_id} already records another forget")
        return existing

    def claim_forget_key(self, project: ProjectId, keyed: KeyedForget) -> KeyedForget:
        """Keep ``keyed`` (a keyed forget that wrote no entry: its set was empty) if the key is
        free; the record that holds the key otherwise (this very one when the SDK retried the put
        after its first attempt applied)."""
        try:
            self._client.put_item(**_key_claim(self._table, project, keyed))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            held = self.forget_key(project, keyed.key, keyed.written_at)
            if held is None:  # expired between the put and the read: the key is free again
                raise ForgetKeyTakenError(keyed.key) from exc
            return held
        return keyed

    # -- reads ----------------------------------------------------------------------------------

    def forget_key(self, project: ProjectId, idempotency_key: str, now: int) -> KeyedForget | None:
        """The record of a forget under ``idempotency_key`` (strongly consistent), unless it
        expired by ``now`` (epoch seconds)."""
        item = self._client.get_item(
            TableName=self._table,
            Key=key(storage_keys.forget_key_key(project, idempotency_key)),
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return None
        keyed = keyed_from_item(idempotency_key, item)
        return None if keyed.expired(now) else keyed

    def is_applied(self, entry: LedgerEntry) -> bool:
        """Whether the forget that wrote ``entry`` (or the purge) said its tombstones are in place."""
        item = self._client.get_item(
            TableName=self._table,
            Key=key(storage_keys.ledger_entry_key(ProjectId(entry.project_id), entry.seq)),
            ConsistentRead=True,
            ProjectionExpression="applyPk",
        ).get("Item")
        return item is not None and "applyPk" not in item

    def head(self, project: ProjectId) -> tuple[int, str]:
        """``(seq, hash)`` of the newest entry, strongly consistent; ``(0, genesis)`` if none."""
        response = self._client.get_item(
            TableName=self._table,
            Key=key(storage_keys.ledger_head_key(project)),
            ConsistentRead=True,
            ProjectionExpression="#seq, #hash",
            ExpressionAttributeNames=_HEAD_NAMES,
        )
        item = response.get("Item")
        if not item:
            return 0, chain.GENESIS_PREV_HASH
        return int(item["seq"]["N"]), item["hash"]["S"]

    def read(self, project: ProjectId, from_seq: int, limit: int) -> tuple[list[LedgerEntry], int | None]:
        """Up to ``limit`` entries from ``from_seq`` on, in seq order, and the next ``from_seq`` (or None).

        Asks for one entry more than it returns, so that "no next page" is known exactly rather
        than guessed from DynamoDB's LastEvaluatedKey (which a full last page also carries).
        """
        if limit < 1:
            raise ValueError("limit must be 1 or more")
        start = max(from_seq, 1)
        if start >= 10**storage_keys.LEDGER_SEQ_DIGITS:
            return [], None
        items = self._query_entries(project, start, limit + 1)
        entries = [entry_from_item(item) for item in items]
        if len(entries) > limit:
            return entries[:limit], entries[limit - 1].seq + 1
        return entries, None

    def _query_entries(self, project: ProjectId, start: int, wanted: int) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        exclusive_start: Item | None = None
        while len(items) < wanted:
            query: dict[str, Any] = {
                "TableName": self._table,
                "KeyConditionExpression": "pk = :pk AND sk BETWEEN :from AND :last",
                "ExpressionAttributeValues": {
                    ":pk": s(storage_keys.ledger_pk(project)),
                    ":from": s(storage_keys.ledger_sort_key(start)),
                    ":last": s(_LAST_SORT_KEY),
                },
                "Limit": wanted - len(items),
                "ConsistentRead": True,  # a receipt just returned is on the ledger page read next
            }
            if exclusive_start:
                query["ExclusiveStartKey"] = exclusive_start
            response = self._client.query(**query)
            items.extend(response.get("Items", []))
            exclusive_start = response.get("LastEvaluatedKey")
            if not exclusive_start:
                break
        return items

    def receipt(self, project: ProjectId, receipt_id: str) -> LedgerEntry | None:
        """The entry a receipt id names in this project (strongly consistent), or None."""
        pointer = self._client.get_item(
            TableName=self._table,
            Key=key(storage_keys.receipt_key(project, receipt_id)),
            ConsistentRead=True,
        ).get("Item")
        if not pointer:
            return None
        item = self._client.get_item(
            TableName=self._table,
            Key=key(storage_keys.ledger_entry_key(project, int(pointer["seq"]["N"]))),
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return None
        entry = entry_from_item(item)
        return entry if entry.id == receipt_id else None

    # -- the purge's bookkeeping ------------------------------------------------------------------

    def due(self, before: str, limit: int) -> list[LedgerEntry]:
        """Entries of every project whose ``purgeAfter`` is before ``before`` and that are not
        purged yet, oldest first, at most ``limit``."""
        response = self._client.query(
            TableName=self._table,
            IndexName=PURGE_DUE_INDEX,
            KeyConditionExpression="duePk = :due AND dueSk < :before",
            ExpressionAttributeValues={":due": s(PURGE_DUE_PARTITION), ":before": s(before)},
            Limit=limit,
        )
        return [entry_from_item(item) for item in response.get("Items", [])]

    def mark_purged(self, entry: LedgerEntry, purged_at: str) -> None:
        """The purge finished ``entry``: off the work list, ``purgedAt`` set (idempotent)."""
        self._client.update_item(
            TableName=self._table,
            Key=key(storage_keys.ledger_entry_key(ProjectId(entry.project_id), entry.seq)),
            # An entry an older purge marked unlocated, whose events were found since: not anymore.
            UpdateExpression="SET purgedAt = if_not_exists(purgedAt, :at) "
            "REMOVE duePk, dueSk, unlocatedEventIds, unlocatedAt",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":at": s(purged_at)},
        )

    def release_forget_key(self, entry: LedgerEntry) -> None:
        """Delete the record of the idempotency key ``entry``'s forget was sent under, if it is
        still that forget's (the key may have expired and been claimed again): it holds the
        reason's salt (encrypted; in clear in a record written before) beside digests of the
        request, which must not outlive the purge. Idempotent."""
        if entry.forget_key is None:
            return
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=key(storage_keys.forget_key_key(ProjectId(entry.project_id), entry.forget_key)),
                ConditionExpression="attemptId = :receipt",
                ExpressionAttributeValues={":receipt": s(entry.id)},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    def mark_unlocated(self, entry: LedgerEntry, event_ids: Sequence[str], at: str) -> None:
        """The purge finished ``entry`` except the payloads of ``event_ids``, whose place is unknown:
        off the work list, those ids kept for the operator, not purged (idempotent)."""
        self._client.update_item(
            TableName=self._table,
            Key=key(storage_keys.ledger_entry_key(ProjectId(entry.project_id), entry.seq)),
            UpdateExpression="SET unlocatedEventIds = :ids, unlocatedAt = if_not_exists(unlocatedAt, :at) "
            "REMOVE duePk, dueSk",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":ids": strings(sorted(event_ids)), ":at": s(at)},
        )

    def record_search(self, entry: LedgerEntry, searched: Searched, at: str) -> None:
        """Keep what the purge's search for ``entry``'s events did this run: the locations it found
        (appended to ``eventLocations``) and where it goes on, or that it finished. A search that
        goes on also moves the entry behind every entry due before ``at`` on the work list
        (``dueSk``), read or not this run: entries waiting for long searches never hold the
        entries due after them off a run's list. One write; nothing hashed changes."""
        project = ProjectId(entry.project_id)
        sets: list[str] = []
        removes: list[str] = []
        values: Item = {}
        if not searched.state.finished:
            sets.append("dueSk = :behind")
            values[":behind"] = s(storage_keys.work_list_sort_key(at, project, entry.seq))
        if searched.found:
            sets.append("eventLocations = list_append(if_not_exists(eventLocations, :none), :found)")
            values[":none"] = {"L": []}
            values[":found"] = _locations_attribute(searched.found)["eventLocations"]
        if searched.state.finished:
            sets.append("locateFinishedAt = if_not_exists(locateFinishedAt, :at)")
            removes.append("locateCursor")
            values[":at"] = s(at)
        elif searched.state.cursor is not None:
            sets.append("locateCursor = :cursor")
            values[":cursor"] = _cursor_attribute(searched.state.cursor)["locateCursor"]
        if not sets:
            return  # nothing found, and finished already
        self._client.update_item(
            TableName=self._table,
            Key=key(storage_keys.ledger_entry_key(project, entry.seq)),
            UpdateExpression=f"SET {', '.join(sets)}" + (f" REMOVE {', '.join(removes)}" if removes else ""),
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues=values,
        )

    def unsearched_unlocated(
        self, start: Item | None, max_items: int
    ) -> tuple[list[LedgerEntry], Item | None, int]:
        """Entries of every project an older purge marked unlocated without searching the project's
        streams for their events (``unlocatedEventIds``, no ``locateFinishedAt``, no ``purgedAt``),
        from ``start`` (a key this returned) on, reading about ``max_items`` items of the table (a
        Scan: they are on no index). Returns them, the key to go on from (None: the table was
        read to its end), and the items read."""
        found: list[LedgerEntry] = []
        read = 0
        request: dict[str, Any] = {
            "TableName": self._table,
            "FilterExpression": "attribute_exists(unlocatedEventIds) "
            "AND attribute_not_exists(locateFinishedAt) AND attribute_not_exists(purgedAt)",
            "ConsistentRead": True,
        }
        while True:
            if start:
                request["ExclusiveStartKey"] = start
            request["Limit"] = max(1, min(_SCAN_PAGE, max_items - read))
            page = self._client.scan(**request)
            read += page.get("ScannedCount", 0)
            found.extend(entry_from_item(item) for item in page.get("Items", []))
            start = page.get("LastEvaluatedKey")
            if not start or read >= max_items:
                return found, start, read

    def requeue_unsearched(self, entry: LedgerEntry) -> bool:
        """Put ``entry`` (from ``unsearched_unlocated``) back on the purge's work list, whose next
        run searches the project's streams for its events. False when it is not (or no longer)
        such an entry: searched, purged, or requeued already. Nothing hashed changes."""
        project = ProjectId(entry.project_id)
        try:
            self._client.update_item(
                TableName=self._table,
                Key=key(storage_keys.ledger_entry_key(project, entry.seq)),
                UpdateExpression="SET duePk = :due, dueSk = :sk",
                ConditionExpression="attribute_exists(unlocatedEventIds) AND attribute_not_exists("
                "locateFinishedAt) AND attribute_not_exists(purgedAt) AND attribute_not_exists(duePk)",
                ExpressionAttributeValues={
                    ":due": s(PURGE_DUE_PARTITION),
                    ":sk": s(storage_keys.work_list_sort_key(entry.purge_after, project, entry.seq)),
                },
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def purge_outcome(self, entry: LedgerEntry) -> PurgeOutcome | None:
        """How the purge finished ``entry`` (strongly consistent), or None while it is owed."""
        item = self._client.get_item(
            TableName=self._table,
            Key=key(storage_keys.ledger_entry_key(ProjectId(entry.project_id), entry.seq)),
            ConsistentRead=True,
            ProjectionExpression="purgedAt, unlocatedEventIds, unlocatedAt, locateFinishedAt",
        ).get("Item")
        if not item:
            return None
        if "purgedAt" in item:  # every payload erased (by this run or, in a race, by another)
            return PurgeOutcome(item["purgedAt"]["S"])
        if "unlocatedEventIds" in item and "locateFinishedAt" in item:  # searched for: stored nowhere
            return PurgeOutcome(item["unlocatedAt"]["S"], string_list(item["unlocatedEventIds"]))
        # Owed: not finished, or marked unlocated by a purge from before the stream search, which
        # never looked for the events (their payloads may be stored; tools/requeue_unlocated.py).
        return None

    def unapplied(self, before: str, limit: int) -> list[LedgerEntry]:
        """Entries written before ``before`` whose forget never said it finished, oldest first."""
        response = self._client.query(
            TableName=self._table,
            IndexName=UNAPPLIED_INDEX,
            KeyConditionExpression="applyPk = :unapplied AND applySk < :before",
            ExpressionAttributeValues={":unapplied": s(UNAPPLIED_PARTITION), ":before": s(before)},
            Limit=limit,
        )
        return [entry_from_item(item) for item in response.get("Items", [])]

    def mark_applied(self, entry: LedgerEntry) -> None:
        """Every tombstone of ``entry`` is in place (idempotent)."""
        self._client.update_item(
            TableName=self._table,
            Key=key(storage_keys.ledger_entry_key(ProjectId(entry.project_id), entry.seq)),
            UpdateExpression="REMOVE applyPk, applySk",
            ConditionExpression="attribute_exists(pk)",
        )
