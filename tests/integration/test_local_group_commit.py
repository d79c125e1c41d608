"""The emulator's journal syncs by group commit (kaibo_local.durability.DurableTables.sync_barrier):
the DynamoDB lock is released while a write's record is synced, and no DynamoDB answer, a write's
or a read's, leaves before the fdatasync covering every write journalled before it."""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kaibo_local.data_dir import DataDir
from kaibo_local.durability import DurableTables, read_stored_tables
from kaibo_local.emulator import Emulator, start_emulator
from tests.integration.test_emulator import make_client

DEADLINE_SECONDS = 10.0


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with start_emulator() as running:
        yield running


class ArmedGate:
    """``os.fdatasync`` that, once armed, holds every sync until ``release()``."""

    def __init__(self) -> None:
        self.armed = False
        self.held = 0
        self._gate = threading.Semaphore(0)

    def __call__(self, fd: int) -> None:
        if self.armed:
            self.held += 1
            self._gate.acquire()
        os.fsync(fd)

    def release(self, times: int = 1) -> None:
        for _ in range(times):
            self._gate.release()


@pytest.fixture
def durable(
    emu: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Any, str, DurableTables, ArmedGate]]:
    ddb = make_client(emu.endpoint_url, "dynamodb")
    table = f"group-commit-{secrets.token_hex(4)}"
    ddb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    gate = ArmedGate()
    monkeypatch.setattr("os.fdatasync", gate)
    data_dir = DataDir.open(tmp_path / "data")
    tables = DurableTables(data_dir, emu, [table])
    tables.restore(read_stored_tables(data_dir))  # installs write + sync_barrier
    yield ddb, table, tables, gate
    gate.armed = False
    gate.release(100)
    emu.record_writes(None)
    tables.close()
    data_dir.close()
    ddb.delete_table(TableName=table)


def in_thread(function: Callable[[], Any]) -> tuple[threading.Event, list[Any]]:
    done, result = threading.Event(), []

    def run() -> None:
        result.append(function())
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done, result


def eventually(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        time.sleep(0.002)  # polling, bounded by the deadline


def test_given_a_write_then_its_answer_and_a_read_of_it_wait_for_its_fdatasync(
    durable: tuple[Any, str, DurableTables, ArmedGate],
) -> None:
    ddb, table, _tables, gate = durable
    reader = make_client(ddb.meta.endpoint_url, "dynamodb")
    gate.armed = True
    put_done, _ = in_thread(lambda: ddb.put_item(TableName=table, Item={"pk": {"S": "a"}}))
    eventually(lambda: gate.held == 1)  # written, its sync running
    read_done, read = in_thread(lambda: reader.get_item(TableName=table, Key={"pk": {"S": "a"}}))
    assert not put_done.wait(0.2)
    assert not read_done.wait(0.2)  # it would show an item not on disk yet
    gate.release()
    assert put_done.wait(DEADLINE_SECONDS)
    assert read_done.wait(DEADLINE_SECONDS)
    assert read[0]["Item"] == {"pk": {"S": "a"}}


def test_given_a_sync_running_then_the_next_write_is_applied_meanwhile_and_shares_a_sync(
    durable: tuple[Any, str, DurableTables, ArmedGate],
) -> None:
    ddb, table, tables, gate = durable
    clients = [make_client(ddb.meta.endpoint_url, "dynamodb") for _ in range(4)]
    gate.armed = True
    first_done, _ = in_thread(lambda: clients[0].put_item(TableName=table, Item={"pk": {"S": "first"}}))
    eventually(lambda: gate.held == 1)
    others = [
        in_thread(lambda c=client, n=n: c.put_item(TableName=table, Item={"pk": {"S": f"next-{n}"}}))[0]  # type: ignore[misc]
        for n, client in enumerate(clients[1:])
    ]
    journal_file = tables._journal
    assert journal_file is not None
    size_with_first = journal_file.size
    # The DynamoDB lock is free while the first record syncs: the next writes are journalled now.
    eventually(lambda: journal_file.size > size_with_first and gate.held == 1)
    assert not first_done.is_set()
    assert not any(done.is_set() for done in others)
    gate.release()
    assert first_done.wait(DEADLINE_SECONDS)
    eventually(lambda: gate.held >= 2)
    gate.release(10)
    for done in others:
        assert done.wait(DEADLINE_SECONDS)
    assert gate.held <= 1 + len(others)
    assert {item["pk"]["S"] for item in ddb.scan(TableName=table)["Items"]} == {
        "first",
        *(f"next-{n}" for n in range(len(others))),
    }
