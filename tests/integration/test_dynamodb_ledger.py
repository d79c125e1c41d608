"""DynamoLedgerStore against the moto emulator: chaining, receipts, isolation, paging, and races.

Each test makes its own table (``pk``/``sk`` strings, PAY_PER_REQUEST), so tests share the
module's emulator without seeing each other's ledgers.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from kaibo_core.adapters.dynamodb_ledger import DynamoLedgerStore
from kaibo_core.core import chain, ledger
from kaibo_core.core.ledger import LedgerEntry, LedgerVerifier
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.ports import DeletionLedger
from tests.integration.test_emulator import make_client

PROJECT = ProjectId("prj_01JZ8Q4W7T2M5R9X3C6B1N0VKD")
OTHER = ProjectId("prj_01JZ8Q4W7T2M5R9X3C6B1N0VKE")
WRITERS = 8


def create_ledger_table(ddb: Any) -> str:
    """The ledger table's schema, as template.yaml declares it: string ``pk`` (HASH) and ``sk`` (RANGE)."""
    name = f"ledger-{uuid.uuid4().hex[:10]}"
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return name


@pytest.fixture
def store(ddb: Any) -> DynamoLedgerStore:
    return DynamoLedgerStore(ddb, create_ledger_table(ddb))


def append(store: DeletionLedger, project: ProjectId = PROJECT, number: int = 0) -> LedgerEntry:
    return store.append(
        project,
        memory_ids=[f"mem_{number}b", f"mem_{number}a"],
        event_ids=[f"evt_{number}"],
        reason_digest=ledger.reason_digest(ledger.new_reason_salt(), f"reason {number}"),
        tombstoned_at="2026-06-03T10:00:00.000Z",
        purge_after="2026-06-04T10:00:00.000Z",
    )


def read_all(store: DynamoLedgerStore, project: ProjectId = PROJECT, limit: int = 100) -> list[LedgerEntry]:
    entries: list[LedgerEntry] = []
    from_seq: int | None = 1
    while from_seq is not None:
        page, from_seq = store.read(project, from_seq, limit)
        entries.extend(page)
    return entries


def verify(entries: list[LedgerEntry], project: ProjectId = PROJECT) -> ledger.LedgerProblem | None:
    verifier = LedgerVerifier(project)
    for entry in entries:
        verifier.feed(entry.as_served())
    return verifier.finish()


def test_the_first_append_is_seq_1_on_the_genesis_hash(store: DynamoLedgerStore) -> None:
    assert store.head(PROJECT) == (0, chain.GENESIS_PREV_HASH)
    entry = append(store)
    assert (entry.seq, entry.prev_hash) == (1, chain.GENESIS_PREV_HASH)
    assert entry.memory_ids == ("mem_0a", "mem_0b")
    assert store.head(PROJECT) == (1, entry.hash)
    assert read_all(store) == [entry]


def test_a_chain_of_three_reads_back_and_verifies(store: DynamoLedgerStore) -> None:
    appended = [append(store, number=n) for n in range(3)]
    assert [e.seq for e in appended] == [1, 2, 3]
    assert [e.prev_hash for e in appended[1:]] == [e.hash for e in appended[:2]]
    entries = read_all(store)
    assert entries == appended
    verifier = LedgerVerifier(PROJECT)
    verifier.expect(3, appended[2].hash)
    for entry in entries:
        assert verifier.feed(entry.as_served()) is None
    assert verifier.finish() is None


def test_the_event_locations_are_kept_with_the_entry_but_neither_hashed_nor_served(
    store: DynamoLedgerStore,
) -> None:
    """Where each event lives is for the purge only (an event no memory cites still loses its
    payload): the entry's hash and served shape are those of an entry without them."""
    entry = store.append(
        PROJECT,
        memory_ids=["mem_0"],
        event_ids=["evt_0", "evt_1"],
        reason_digest="0" * 64,
        tombstoned_at="2026-06-03T10:00:00.000Z",
        purge_after="2026-06-04T10:00:00.000Z",
        event_locations=[("evt_1", "chat", 2), ("evt_0", "chat", 1)],
    )
    without = ledger.make_entry(
        project_id=PROJECT,
        seq=1,
        receipt_id=entry.id,
        memory_ids=["mem_0"],
        event_ids=["evt_0", "evt_1"],
        reason_digest="0" * 64,
        tombstoned_at="2026-06-03T10:00:00.000Z",
        purge_after="2026-06-04T10:00:00.000Z",
        prev_hash=chain.GENESIS_PREV_HASH,
    )

    (stored,) = read_all(store)
    assert stored.event_locations == (("evt_0", "chat", 1), ("evt_1", "chat", 2))
    assert store.receipt(PROJECT, entry.id) == stored
    assert (stored.hash, stored.as_served()) == (without.hash, without.as_served())
    assert verify(read_all(store)) is None


def test_a_receipt_is_found_by_its_id_in_its_project_only(store: DynamoLedgerStore) -> None:
    first, second = append(store, number=1), append(store, number=2)
    assert store.receipt(PROJECT, second.id) == second
    assert store.receipt(PROJECT, first.id) == first
    assert store.receipt(PROJECT, ledger.new_receipt_id()) is None
    assert store.receipt(OTHER, second.id) is None
    assert ledger.check_receipt(PROJECT, second.as_served()) is None


def test_projects_have_separate_ledgers(store: DynamoLedgerStore) -> None:
    ours = append(store, PROJECT, 1)
    theirs = append(store, OTHER, 1)
    assert ours.seq == theirs.seq == 1
    assert ours.hash != theirs.hash
    assert read_all(store, PROJECT) == [ours]
    assert read_all(store, OTHER) == [theirs]


def test_a_retried_append_with_its_receipt_id_returns_the_same_entry(store: DynamoLedgerStore) -> None:
    fields: dict[str, Any] = {
        "memory_ids": ["mem_1"],
        "event_ids": [],
        "reason_digest": "0" * 64,
        "tombstoned_at": "2026-06-03T10:00:00.000Z",
        "purge_after": "2026-06-04T10:00:00.000Z",
        "receipt_id": "rcpt_01JZ9A0B0000000000000000CC",
    }
    entry = store.append(PROJECT, **fields)
    append(store, number=2)  # the head moved on since
    replayed = store.append(PROJECT, **{**fields, "tombstoned_at": "2026-06-03T10:00:05.000Z"})
    assert replayed == entry
    assert store.head(PROJECT)[0] == 2
    with pytest.raises(ledger.ReceiptIdTakenError):
        store.append(PROJECT, **{**fields, "memory_ids": ["mem_other"]})
    assert verify(read_all(store)) is None


def test_concurrent_appends_get_consecutive_seqs_and_the_chain_verifies(ddb: Any) -> None:
    table = create_ledger_table(ddb)
    barrier = threading.Barrier(WRITERS)
    results: list[LedgerEntry] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def writer(number: int) -> None:
        # One client per thread, as concurrent Lambda invocations would have.
        store = DynamoLedgerStore(make_client(ddb.meta.endpoint_url, "dynamodb"), table)
        barrier.wait()
        try:
            entry = append(store, number=number)
        except BaseException as exc:  # reported below, with the others
            with lock:
                errors.append(exc)
            return
        with lock:
            results.append(entry)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert sorted(e.seq for e in results) == list(range(1, WRITERS + 1))
    entries = read_all(DynamoLedgerStore(ddb, table))
    assert [e.seq for e in entries] == list(range(1, WRITERS + 1))
    assert {e.id for e in entries} == {e.id for e in results}
    assert verify(entries) is None


def test_read_pages_with_limit_and_next_from_seq(store: DynamoLedgerStore) -> None:
    appended = [append(store, number=n) for n in range(5)]
    page, next_seq = store.read(PROJECT, 1, 2)
    assert ([e.seq for e in page], next_seq) == ([1, 2], 3)
    page, next_seq = store.read(PROJECT, 3, 2)
    assert ([e.seq for e in page], next_seq) == ([3, 4], 5)
    page, next_seq = store.read(PROJECT, 5, 2)
    assert ([e.seq for e in page], next_seq) == ([5], None)
    page, next_seq = store.read(PROJECT, 4, 2)  # a full last page: no next page
    assert ([e.seq for e in page], next_seq) == ([4, 5], None)
    assert store.read(PROJECT, 6, 2) == ([], None)
    assert store.read(PROJECT, 0, 1)[0] == appended[:1]
    assert read_all(store, limit=2) == appended
    assert store.read(OTHER, 1, 10) == ([], None)
