"""The emulator's DynamoDB tables kept on disk: a snapshot plus a journal of acknowledged writes.

Every DynamoDB request goes through the emulator one at a time (kaibo_local.emulator,
``SerializedDynamoDBApp``). After a write succeeded (``PutItem``, ``UpdateItem``, ``DeleteItem``,
``BatchWriteItem``, ``TransactWriteItems`` answering 200), the items it touched are read back as
they now are (or as gone) and appended to the journal as one record, synced to disk before the
answer leaves. The sync is a **group commit**: the record is written under the DynamoDB lock, the
lock is released, and the answer waits for an ``fdatasync`` that started after its record was
written (``sync_barrier``, ``kaibo_local.journal.RecordWriter.sync_to``); concurrent requests share
one ``fdatasync``, and the next request runs while the disk syncs. Every DynamoDB answer, a read or
a refused write too, waits for the sync covering every write journalled before it was produced: it
may depend on them, so it never leaves before they are on disk. Replaying the journal over the snapshot it
follows puts each item back as it was written: exactly the acknowledged state, at the cost of a
put per item (moto evaluating the update expressions and conditions again would cost ten times
more). A write whose record did not reach the disk was never answered. A request that failed (a
condition not met, a cancelled transaction) changed nothing and is not recorded.

**Compaction** writes a new generation: a snapshot of every item (to a temporary file, synced,
then renamed) and an empty journal, after which the older generation's files are deleted. It
runs at start when the journal holds anything, when the journal outgrows the snapshot (at least
``COMPACT_AFTER_BYTES``), and after every run of the purge schedule that erased anything, so
that text a purge erased is gone from every file in the data folder, not only from memory. It
holds the DynamoDB lock, so requests wait for it (about a second per 100k items).

At start (``restore``): the newest generation's snapshot must be whole (it only gets its name once
complete); its journal may end in a torn record (a write cut short by ``kill -9``, never
acknowledged), which is dropped and reported; a journal damaged in its middle stops the start
with a message saying what to do.
"""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table

from kaibo_local.data_dir import DataDir, DataDirError, sync_folder
from kaibo_local.emulator import Emulator, dynamodb_lock
from kaibo_local.journal import CorruptRecordsError, RecordWriter, read_records

__all__ = [
    "COMPACT_AFTER_BYTES",
    "WRITE_OPERATIONS",
    "DurableTables",
    "StoredTables",
    "read_stored_tables",
]

log = logging.getLogger("kaibo_local")

#: The DynamoDB operations that change items (the stack creates tables itself at every start).
WRITE_OPERATIONS: Final = frozenset(
    {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
)
TARGET_PREFIX: Final = "DynamoDB_20120810."
#: The journal is compacted once it is larger than the snapshot and than this (so that a start
#: replays at most about a snapshot's worth of items).
COMPACT_AFTER_BYTES: Final = 4 * 1024 * 1024
#: Items per snapshot record.
SNAPSHOT_CHUNK: Final = 1000
SNAPSHOT_KIND: Final = "kaibo-local dynamodb snapshot"
#: A table name, an item's key and the item as it now is (None: deleted), in DynamoDB's JSON.
Image = tuple[str, dict[str, Any], dict[str, Any] | None]


@dataclass(frozen=True, slots=True)
class StoredTables:
    """What the data folder holds, read and checked before anything starts."""

    generation: int  # 0: nothing stored yet
    snapshot: list[bytes]  # the snapshot's records (header, item chunks, end)
    journal: list[bytes]  # the journal's complete records
    torn_bytes: int  # bytes of a torn last journal record, dropped

    @property
    def empty(self) -> bool:
        return self.generation == 0


def read_stored_tables(data_dir: DataDir) -> StoredTables:
    """The newest generation's snapshot and journal; DataDirError if either is damaged."""
    generations = data_dir.generations()
    if not generations:
        return StoredTables(0, [], [], 0)
    generation = generations[-1]
    snapshot_path = data_dir.snapshot_path(generation)
    try:
        snapshot = read_records(snapshot_path)
    except CorruptRecordsError as error:
        raise DataDirError(
            f"{error}; restore the folder from a backup, or `make reset` to start empty"
        ) from None
    if snapshot.torn_bytes or not snapshot.records or not _is_snapshot(snapshot.records):
        raise DataDirError(
            f"{snapshot_path} is incomplete; restore the folder from a backup, or `make reset` to start empty"
        )
    journal_path = data_dir.journal_path(generation)
    if not journal_path.exists():
        return StoredTables(generation, snapshot.records, [], 0)
    try:
        journal = read_records(journal_path)
    except CorruptRecordsError as error:
        raise DataDirError(
            f"{error}; move that file aside to start from the snapshot before it (losing the writes it "
            "holds), or restore the folder from a backup, or `make reset` to start empty"
        ) from None
    return StoredTables(generation, snapshot.records, journal.records, journal.torn_bytes)


def _is_snapshot(records: list[bytes]) -> bool:
    try:
        header, end = json.loads(records[0]), json.loads(records[-1])
    except ValueError:
        return False
    return (
        isinstance(header, dict)
        and header.get("kind") == SNAPSHOT_KIND
        and isinstance(end, dict)
        and end.get("end") is True
    )


def _backend_holding(table_name: str) -> DynamoDBBackend:
    for regions in dynamodb_backends.values():
        for backend in regions.values():
            if table_name in backend.tables:
                return backend
    raise LookupError(f"no emulated DynamoDB holds the table {table_name}")


class DurableTables:
    """The emulator's tables on disk, in ``data_dir``: restored at start, then kept."""

    def __init__(self, data_dir: DataDir, emulator: Emulator, table_names: Iterable[str]) -> None:
        self._data_dir = data_dir
        self._emulator = emulator
        self._table_names = sorted(table_names)
        self._moto_tables: dict[str, Table] = {}
        self._generation = 0
        self._snapshot_bytes = 0
        self._journal: RecordWriter | None = None
        self.compactions = 0

    # --- start ------------------------------------------------------------------------------------

    def restore(self, stored: StoredTables) -> int:
        """Load ``stored`` into the (new, empty) tables, start a journal; the items restored.

        Compacts first if the journal held anything, so each start begins a short journal.
        """
        self._generation = stored.generation
        with dynamodb_lock():
            self._load_snapshot(stored.snapshot)
            self._replay(stored.journal)
            restored = sum(1 for table in self._tables() for _ in _items(table))
        if stored.empty or stored.journal or stored.torn_bytes:
            self.compact()
        else:
            self._snapshot_bytes = self._data_dir.snapshot_path(self._generation).stat().st_size
            self._open_journal()
            self._data_dir.remove_generations_before(self._generation)
        self._emulator.record_writes(self.write, self.sync_barrier)
        return restored

    def _tables(self) -> Iterator[Table]:
        for name in self._table_names:
            yield _backend_holding(name).get_table(name)

    def _moto_table(self, name: str) -> Table:
        table = self._moto_tables.get(name)
        if table is None:
            table = self._moto_tables[name] = _backend_holding(name).get_table(name)
        return table

    def _load_snapshot(self, records: list[bytes]) -> None:
        if not records:
            return
        tables: dict[str, Table | None] = {}
        gc.disable()  # hundreds of thousands of small objects: the collector would run for each batch
        try:
            for record in records[1:-1]:
                chunk = json.loads(record)
                name = chunk["table"]
                if name not in tables:
                    tables[name] = self._table(name)
                table = tables[name]
                if table is None:
                    continue
                for attributes in chunk["items"]:
                    table.put_item(attributes)
        finally:
            gc.enable()
        for name, table in tables.items():
            if table is None:
                log.warning("the snapshot holds items of %s, which template.yaml no longer declares", name)

    def _table(self, name: str) -> Table | None:
        if name not in self._table_names:
            return None
        return _backend_holding(name).get_table(name)

    def _replay(self, records: list[bytes]) -> None:
        gc.disable()
        try:
            for index, record in enumerate(records):
                try:
                    images = json.loads(record)["w"]
                    for name, key, item in images:
                        if name in self._table_names:
                            self._apply(name, key, item)
                except (ValueError, KeyError, TypeError) as error:
                    raise DataDirError(
                        f"journal record {index} cannot be applied ({type(error).__name__}: {error}); "
                        "restore the folder from a backup, or `make reset` to start empty"
                    ) from None
        finally:
            gc.enable()

    def _apply(self, name: str, key: dict[str, Any], item: dict[str, Any] | None) -> None:
        table = self._moto_table(name)
        if item is not None:
            table.put_item(item)
            return
        hash_value = DynamoType(key[table.hash_key_attr])
        range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
        table.delete_item(hash_value, range_value)

    # --- while running ----------------------------------------------------------------------------

    def record(self, target: str, body: bytes) -> None:
        """``write``, then wait for its fdatasync: on disk when this returns (one request at a time)."""
        self.write(target, body)
        self.sync_barrier()()

    def write(self, target: str, body: bytes) -> None:
        """Called by the emulator, under the DynamoDB lock, for every request answered 200: a write
        is appended to the journal, not synced yet (``sync_barrier`` waits for that)."""
        if not target.startswith(TARGET_PREFIX):
            return
        operation = target[len(TARGET_PREFIX) :]
        if operation not in WRITE_OPERATIONS or self._journal is None:
            return
        images = [self._image(name, key) for name, key in self._touched(operation, json.loads(body))]
        self._journal.write(json.dumps({"w": images}, separators=(",", ":")).encode())
        if self._journal.size > max(COMPACT_AFTER_BYTES, self._snapshot_bytes):
            self._compact_locked()

    def sync_barrier(self) -> Callable[[], None]:
        """Called under the DynamoDB lock after every DynamoDB request, written or not: what to call
        once the lock is released and before the answer leaves, to wait for the fdatasync covering
        every write journalled so far (group commit). A read waits too: what it saw may have been
        written by a request whose record is not on disk yet."""
        journal = self._journal
        if journal is None or journal.synced >= journal.size:
            return _nothing_to_wait_for
        offset = journal.size
        return lambda: journal.sync_to(offset)

    def _touched(self, operation: str, request: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        """(table name, key) of every item a successful write request changed."""
        if operation == "PutItem":
            yield request["TableName"], self._key_of(request["TableName"], request["Item"])
        elif operation in ("UpdateItem", "DeleteItem"):
            yield request["TableName"], request["Key"]
        elif operation == "BatchWriteItem":
            for name, writes in request["RequestItems"].items():
                for write in writes:
                    if "PutRequest" in write:
                        yield name, self._key_of(name, write["PutRequest"]["Item"])
                    else:
                        yield name, write["DeleteRequest"]["Key"]
        else:  # TransactWriteItems
            for action in request["TransactItems"]:
                for kind, op in action.items():
                    if kind == "Put":
                        yield op["TableName"], self._key_of(op["TableName"], op["Item"])
                    elif kind in ("Update", "Delete"):
                        yield op["TableName"], op["Key"]

    def _key_of(self, name: str, item: dict[str, Any]) -> dict[str, Any]:
        table = self._moto_table(name)
        key = {table.hash_key_attr: item[table.hash_key_attr]}
        if table.range_key_attr:
            key[table.range_key_attr] = item[table.range_key_attr]
        return key

    def _image(self, name: str, key: dict[str, Any]) -> Image:
        table = self._moto_table(name)
        hash_value = DynamoType(key[table.hash_key_attr])
        range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
        item = table.get_item(hash_value, range_value)
        return (name, key, None if item is None else item.to_json()["Attributes"])

    def compact(self) -> None:
        """Write a new generation (snapshot of every item, empty journal); delete the older files."""
        with dynamodb_lock():
            self._compact_locked()

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    def _compact_locked(self) -> None:
        generation = self._generation + 1
        final = self._data_dir.snapshot_path(generation)
        temporary = final.with_name(final.name + ".tmp")
        temporary.unlink(missing_ok=True)
        writer = RecordWriter(temporary)
        try:
            writer.append_many(list(self._snapshot_records(generation)))
        finally:
            writer.close()
        temporary.replace(final)
        sync_folder(final.parent)
        self._snapshot_bytes = writer.size
        self._generation = generation
        self.close()
        self._open_journal()
        self._data_dir.remove_generations_before(generation)
        self.compactions += 1

    def _open_journal(self) -> None:
        self._journal = RecordWriter(self._data_dir.journal_path(self._generation))

    def _snapshot_records(self, generation: int) -> Iterator[bytes]:
        yield json.dumps({"kind": SNAPSHOT_KIND, "version": 1, "generation": generation}).encode()
        total = 0
        for name, table in zip(self._table_names, self._tables(), strict=True):
            chunk: list[dict[str, Any]] = []
            for item in _items(table):
                chunk.append(item.to_json()["Attributes"])
                if len(chunk) == SNAPSHOT_CHUNK:
                    yield json.dumps({"table": name, "items": chunk}, separators=(",", ":")).encode()
                    total += len(chunk)
                    chunk = []
            if chunk:
                yield json.dumps({"table": name, "items": chunk}, separators=(",", ":")).encode()
                total += len(chunk)
        yield json.dumps({"end": True, "items": total}).encode()


def _nothing_to_wait_for() -> None:
    return None


def _items(table: Table) -> Iterator[Any]:
    """Every item of a moto table, in its storage order (``Table.all_items`` sorts them all)."""
    for stored in table.items.values():
        if table.range_key_attr is None:
            yield stored
        else:
            yield from stored.values()
