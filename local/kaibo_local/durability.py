"""The emulator's DynamoDB tables kept on disk: a snapshot plus a journal of acknowledged writes.

Every DynamoDB request goes through the emulator one at a time (kaibo_local.emulator,
``SerializedDynamoDBApp``). A write that succeeded (``PutItem``, ``UpdateItem``, ``DeleteItem``,
``BatchWriteItem``, ``TransactWriteItems`` answering 200) is appended to the journal as the
request it was, and synced to disk, before its answer leaves and before the next request starts.
The tables are a deterministic function of the requests applied in order, so replaying the
journal over the snapshot it follows rebuilds exactly the acknowledged state; a write whose
journal record did not reach the disk was never answered. A request that failed (a condition not
met, a cancelled transaction) changed nothing and is not recorded.

**Compaction** writes a new generation: a snapshot of every item (to a temporary file, synced,
then renamed) and an empty journal, after which the older generation's files are deleted. It
runs at start when the journal holds anything, when the journal outgrows the snapshot (at least
``COMPACT_AFTER_BYTES``), and after every run of the purge schedule, so that text a purge erased
is gone from every file in the data folder, not only from memory. It holds the DynamoDB lock, so
requests wait for it (about a second per 100k items).

At start (``load``): the newest generation's snapshot must be whole (it only gets its name once
complete); its journal may end in a torn record (a write cut short by ``kill -9``, never
acknowledged), which is dropped and reported; a journal damaged in its middle stops the start
with a message saying what to do.
"""

from __future__ import annotations

import gc
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from moto.dynamodb.models import DynamoDBBackend, dynamodb_backends
from moto.dynamodb.models.table import Table
from werkzeug.test import Client

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
#: The journal is compacted once it is larger than the snapshot and than this.
COMPACT_AFTER_BYTES: Final = 64 * 1024 * 1024
#: Items per snapshot record.
SNAPSHOT_CHUNK: Final = 1000
SNAPSHOT_KIND: Final = "kaibo-local dynamodb snapshot"
# How replayed requests reach moto: as the local stack's own clients send them (region us-east-1).
_REPLAY_HEADERS: Final = {
    "Content-Type": "application/x-amz-json-1.0",
    "Authorization": (
        "AWS4-HMAC-SHA256 Credential=kaibo-local/20260101/us-east-1/dynamodb/aws4_request, "
        "SignedHeaders=host;x-amz-target, Signature=0"
    ),
}


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
        self._replay(stored.journal)  # through the emulator's app, which takes the lock per request
        with dynamodb_lock():
            restored = sum(1 for table in self._tables() for _ in _items(table))
        if stored.empty or stored.journal or stored.torn_bytes:
            self.compact()
        else:
            self._snapshot_bytes = self._data_dir.snapshot_path(self._generation).stat().st_size
            self._open_journal()
            self._data_dir.remove_generations_before(self._generation)
        self._emulator.record_writes(self.record)
        return restored

    def _tables(self) -> Iterator[Table]:
        for name in self._table_names:
            yield _backend_holding(name).get_table(name)

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
        client = Client(self._emulator.app)
        for index, record in enumerate(records):
            operation, _, body = record.partition(b"\n")
            response = client.post(
                "/",
                data=body,
                headers={**_REPLAY_HEADERS, "X-Amz-Target": TARGET_PREFIX + operation.decode()},
            )
            if response.status_code != 200:
                raise DataDirError(
                    f"journal record {index} ({operation.decode()}) cannot be applied again "
                    f"({response.status_code}: {response.get_data(as_text=True)[:200]}); "
                    "restore the folder from a backup, or `make reset` to start empty"
                )

    # --- while running ----------------------------------------------------------------------------

    def record(self, target: str, body: bytes) -> None:
        """Called by the emulator, under the DynamoDB lock, for every answered request."""
        if not target.startswith(TARGET_PREFIX):
            return
        operation = target[len(TARGET_PREFIX) :]
        if operation not in WRITE_OPERATIONS or self._journal is None:
            return
        self._journal.append(operation.encode() + b"\n" + body)
        if self._journal.size > max(COMPACT_AFTER_BYTES, self._snapshot_bytes):
            self._compact_locked()

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


def _items(table: Table) -> Iterator[Any]:
    """Every item of a moto table, in its storage order (``Table.all_items`` sorts them all)."""
    for stored in table.items.values():
        if table.range_key_attr is None:
            yield stored
        else:
            yield from stored.values()
