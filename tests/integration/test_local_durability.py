"""The emulator's tables on disk (kaibo_local.durability, kaibo_local.data_dir), in this process.

A "restart" here is what a new process would do: the tables dropped from moto's (process-wide)
state, created again, and restored from the data folder alone. The process tree killed with
SIGKILL and started again is in test_local_restart.py.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from kaibo_local.data_dir import DataDir, DataDirError, Manifest, configured_data_dir, reset
from kaibo_local.durability import DurableTables, read_stored_tables
from kaibo_local.emulator import Emulator
from kaibo_local.journal import read_records
from kaibo_local.template import create_tables, load_template


class Run:
    """One "process lifetime" of the tables on a data folder: open, restore, record."""

    def __init__(self, emu: Emulator, ddb: Any, folder: Path, suffix: str) -> None:
        for page in ddb.get_paginator("list_tables").paginate():  # other tests' tables: many pages
            for name in page["TableNames"]:
                if name.endswith(f"-{suffix}"):
                    ddb.delete_table(TableName=name)
        self.tables = create_tables(ddb, load_template(), suffix)
        self.data_dir = DataDir.open(folder)
        self.durable = DurableTables(self.data_dir, emu, self.tables.values())
        self.restored = self.durable.restore(read_stored_tables(self.data_dir))
        emu.record_writes(self.durable.record)
        self._emu = emu

    def close(self) -> None:
        self._emu.record_writes(None)
        self.durable.close()
        self.data_dir.close()


@pytest.fixture
def run_on(emu: Emulator, ddb: Any) -> Iterator[Any]:
    suffix = secrets.token_hex(4)
    runs: list[Run] = []

    def start(folder: Path) -> Run:
        if runs:
            runs[-1].close()
        runs.append(Run(emu, ddb, folder, suffix))
        return runs[-1]

    yield start
    if runs:
        runs[-1].close()


def every_item(ddb: Any, tables: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    found = {}
    for name in tables.values():
        items = ddb.scan(TableName=name)["Items"]
        found[name] = sorted(items, key=repr)
    return found


def files_holding(folder: Path, text: bytes) -> list[str]:
    return [entry.name for entry in folder.iterdir() if entry.is_file() and text in entry.read_bytes()]


def writes_of_every_kind(ddb: Any, table: str) -> None:
    """Puts, an update, a delete, a batch, a transaction; and writes that fail (never recorded)."""
    for n in range(5):
        ddb.put_item(
            TableName=table, Item={"pk": {"S": f"p{n}"}, "sk": {"S": "s"}, "text": {"S": f"item {n}"}}
        )
    ddb.update_item(
        TableName=table,
        Key={"pk": {"S": "p1"}, "sk": {"S": "s"}},
        UpdateExpression=(
            "SET #c = if_not_exists(#c, :zero) + :one, tags = list_append(if_not_exists(tags, :empty), :t)"
        ),
        ExpressionAttributeNames={"#c": "count"},
        ExpressionAttributeValues={
            ":zero": {"N": "0"},
            ":one": {"N": "1"},
            ":empty": {"L": []},
            ":t": {"L": [{"S": "x"}]},
        },
    )
    ddb.delete_item(TableName=table, Key={"pk": {"S": "p2"}, "sk": {"S": "s"}})
    ddb.batch_write_item(
        RequestItems={
            table: [
                {"PutRequest": {"Item": {"pk": {"S": "b1"}, "sk": {"S": "s"}}}},
                {"DeleteRequest": {"Key": {"pk": {"S": "p3"}, "sk": {"S": "s"}}}},
            ]
        }
    )
    ddb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": table, "Item": {"pk": {"S": "t1"}, "sk": {"S": "s"}}}},
            {
                "Update": {
                    "TableName": table,
                    "Key": {"pk": {"S": "p4"}, "sk": {"S": "s"}},
                    "UpdateExpression": "SET #t = :v",
                    "ExpressionAttributeNames": {"#t": "text"},
                    "ExpressionAttributeValues": {":v": {"S": "changed"}},
                }
            },
        ]
    )
    with pytest.raises(ClientError):  # a condition not met: nothing written, nothing recorded
        ddb.put_item(
            TableName=table,
            Item={"pk": {"S": "p0"}, "sk": {"S": "s"}, "text": {"S": "overwritten"}},
            ConditionExpression="attribute_not_exists(pk)",
        )
    with pytest.raises(ClientError):  # a cancelled transaction: its first action undone, nothing recorded
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": table, "Item": {"pk": {"S": "never"}, "sk": {"S": "s"}}}},
                {
                    "ConditionCheck": {
                        "TableName": table,
                        "Key": {"pk": {"S": "p0"}, "sk": {"S": "s"}},
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            ]
        )


def test_given_writes_of_every_kind_then_a_restart_rebuilds_every_table_exactly(
    run_on: Any, ddb: Any, tmp_path: Path
) -> None:
    folder = tmp_path / "data"
    first = run_on(folder)
    assert first.restored == 0
    writes_of_every_kind(ddb, first.tables["TermIndexTable"])
    before = every_item(ddb, first.tables)
    journal = read_records(first.data_dir.journal_path(1)).records
    assert len(journal) == 9  # 5 puts, update, delete, batch, transaction: not the two that failed

    second = run_on(folder)
    assert every_item(ddb, second.tables) == before
    assert second.restored == sum(len(items) for items in before.values())
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith("dynamodb-")) == [
        "dynamodb-00000002.journal",
        "dynamodb-00000002.snapshot",
    ]  # compacted at start: the first generation is gone

    ddb.put_item(TableName=second.tables["TermIndexTable"], Item={"pk": {"S": "later"}, "sk": {"S": "s"}})
    third = run_on(folder)  # snapshot + journal
    assert every_item(ddb, third.tables)[third.tables["TermIndexTable"]] == sorted(
        [*before[first.tables["TermIndexTable"]], {"pk": {"S": "later"}, "sk": {"S": "s"}}], key=repr
    )


def test_given_text_erased_then_after_compaction_no_file_of_the_folder_holds_it(
    run_on: Any, ddb: Any, tmp_path: Path
) -> None:
    folder = tmp_path / "data"
    run = run_on(folder)
    table = run.tables["MemoriesTable"]
    secret = b"the vault code is 7741-zebra"
    ddb.put_item(TableName=table, Item={"pk": {"S": "m1"}, "content": {"S": secret.decode()}})
    ddb.put_item(TableName=table, Item={"pk": {"S": "m2"}, "content": {"S": "kept"}})
    assert files_holding(folder, secret)  # the journal holds it, as it must until compaction

    ddb.update_item(TableName=table, Key={"pk": {"S": "m1"}}, UpdateExpression="REMOVE content")
    run.durable.compact()  # what the stack does after every run of the purge schedule

    assert files_holding(folder, secret) == []
    assert files_holding(folder, b"kept")
    assert {"pk": {"S": "m1"}} in every_item(ddb, run_on(folder).tables)[table]


def test_given_a_journal_damaged_in_its_middle_then_reading_the_folder_refuses_saying_what_to_do(
    run_on: Any, ddb: Any, tmp_path: Path
) -> None:
    folder = tmp_path / "data"
    run = run_on(folder)
    for n in range(3):
        ddb.put_item(TableName=run.tables["TermIndexTable"], Item={"pk": {"S": f"p{n}"}, "sk": {"S": "s"}})
    run.close()
    journal = folder / "dynamodb-00000001.journal"
    data = bytearray(journal.read_bytes())
    data[20] ^= 0xFF
    journal.write_bytes(bytes(data))
    opened = DataDir.open(folder)
    try:
        with pytest.raises(DataDirError, match=r"damaged at byte 0 .*move that file aside"):
            read_stored_tables(opened)
    finally:
        opened.close()


def test_given_a_folder_in_use_then_a_second_open_is_refused(tmp_path: Path) -> None:
    first = DataDir.open(tmp_path / "data")
    try:
        with pytest.raises(DataDirError, match="in use by another kaibo-local"):
            DataDir.open(tmp_path / "data")
        with pytest.raises(DataDirError, match="in use"):
            reset(tmp_path / "data")
    finally:
        first.close()
    DataDir.open(tmp_path / "data").close()  # released


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_given_an_unwritable_folder_then_opening_it_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(DataDirError, match="not writable"):
            DataDir.open(folder)
    finally:
        folder.chmod(0o700)


def test_given_a_path_that_is_a_file_then_opening_it_says_so(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(DataDirError, match=r"cannot create|not a folder"):
        DataDir.open(tmp_path / "file")


def test_given_a_manifest_then_it_reads_back_and_reset_removes_only_the_stacks_files(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    opened = DataDir.open(folder)
    manifest = Manifest("abc123", "kb_admin_x", "prj_1", "kb_y")
    opened.save_manifest(manifest)
    assert opened.manifest() == manifest
    assert (folder / "kaibo-local.json").stat().st_mode & 0o077 == 0  # keys: owner only
    (folder / "dynamodb-00000001.snapshot").write_bytes(b"")
    (folder / "notes.txt").write_text("mine")
    opened.close()
    removed = reset(folder)
    assert sorted(p.name for p in removed) == ["dynamodb-00000001.snapshot", "kaibo-local.json"]
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def test_given_kaibo_data_dir_then_it_names_the_folder_and_memory_keeps_nothing(tmp_path: Path) -> None:
    assert configured_data_dir({"KAIBO_DATA_DIR": str(tmp_path)}) == tmp_path
    assert configured_data_dir({"KAIBO_DATA_DIR": ":memory:"}) is None
    default = configured_data_dir({})
    assert default is not None
    assert default.name == ".kaibo-data"
