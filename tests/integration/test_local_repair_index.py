"""``make repair-index``: the command it runs (``python -m kaibo_local repair-index``) repairs the
term index kept in a stopped local stack's data folder, as ``tools/repair_index.py`` does on AWS."""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kaibo_core.adapters.dynamodb_structuring import DynamoStructuringStore
from kaibo_core.core.models.memories import MemoryRecord
from kaibo_local.data_dir import DataDir, Manifest
from kaibo_local.durability import DurableTables, read_stored_tables
from kaibo_local.emulator import start_emulator
from kaibo_local.template import create_tables, load_template
from tests.conftest import emulator_client, scan_all
from tests.integration.test_local_lifecycle import run_local_command

PROJECT = "prj_repairlocal"
MEMORY = "mem_repairlocal"


@contextmanager
def data_folder_tables(folder: Path, suffix: str) -> Iterator[tuple[Any, dict[str, str]]]:
    """The template's tables named with ``suffix``, holding what ``folder`` keeps, in an emulator of
    this process; what the block writes is kept in ``folder`` (as by a stack that then stops)."""
    with start_emulator() as emulator:
        client = emulator_client("dynamodb", emulator.endpoint_url)
        for page in client.get_paginator("list_tables").paginate():  # moto's tables are per process
            for name in page["TableNames"]:
                if name.endswith(f"-{suffix}"):
                    client.delete_table(TableName=name)
        tables = create_tables(client, load_template(), suffix)
        data_dir = DataDir.open(folder)
        if data_dir.manifest() is None:  # a new folder: named as a stack names it
            data_dir.save_manifest(Manifest(suffix, "kb_admin_unused", PROJECT, "kb_unused"))
        durable = DurableTables(data_dir, emulator, tables.values())
        durable.restore(read_stored_tables(data_dir))
        emulator.record_writes(durable.record)
        try:
            yield client, tables
        finally:
            emulator.record_writes(None)
            durable.close()
            data_dir.close()


def postings_by_side(client: Any, tables: dict[str, str]) -> Counter[str]:
    """How many postings MEMORY has on each side (``tc``: current, ``th``: history)."""
    items = scan_all(client, tables["TermIndexTable"])
    return Counter(
        item["pk"]["S"].split("#")[1]
        for item in items
        if item["pk"]["S"].startswith(f"{PROJECT}#") and item["sk"]["S"].endswith(f"#{MEMORY}")
    )


def test_given_a_stopped_local_stack_with_an_index_older_versions_left_wrong_then_repair_index_mends_it(
    tmp_path: Path,
) -> None:
    # Given a data folder whose active memory has its postings on the history side, its item recording
    # no side (as versions before session 31 could leave it)
    data = tmp_path / "data"
    suffix = secrets.token_hex(4)
    with data_folder_tables(data, suffix) as (client, tables):
        store = DynamoStructuringStore(client, tables["MemoriesTable"], tables["TermIndexTable"])
        memory = MemoryRecord(
            PROJECT, MEMORY, "active", "fact", "The release target is July 17.",
            "2026-06-01T09:00:00Z", None, 0.9, "chat", (), "2026-06-01T09:00:00Z",
        )  # fmt: skip
        assert store.index_new(memory)
        store.move_postings(memory, "c", "h")
        client.update_item(
            TableName=tables["MemoriesTable"],
            Key={"pk": {"S": f"{PROJECT}#{MEMORY}"}},
            UpdateExpression="REMOVE ix",
        )
        damaged = postings_by_side(client, tables)
        assert list(damaged) == ["th"]

    # When `make repair-index` runs its command on the folder
    done = run_local_command("repair-index", data)

    # Then it says what it did, and the folder keeps the memory's postings on the current side
    assert done.returncode == 0, done.stderr
    assert "1 memories checked, 1 moved to their side" in done.stderr, done.stderr
    with data_folder_tables(data, suffix) as (client, tables):
        assert postings_by_side(client, tables) == {"tc": damaged["th"]}
