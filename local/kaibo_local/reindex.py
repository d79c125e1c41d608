"""Index maintenance on a stopped local stack's data folder, by the services the AWS tools run
(``kaibo_core.services.reindexing``):

- ``python -m kaibo_local reindex-semantic`` (``make reindex-semantic``): every memory placed by
  recall by meaning's model (``KAIBO_SEMANTIC_MODEL``, default ``mini6``), so that memories
  written while it was off are found by meaning too (``tools/reindex_semantic.py`` on AWS);
- ``python -m kaibo_local repair-index`` (``make repair-index``): the term index repaired where
  versions before session 31 left it wrong (``tools/repair_index.py`` on AWS).

The folder's tables are restored into an emulator of this process as the stack restores them,
worked on, and compacted into one snapshot. The folder is locked meanwhile: a running stack
refuses it, and these commands refuse a folder a running stack holds.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import boto3

from kaibo_core.adapters.dynamodb_index_repair import DynamoIndexRepairStore
from kaibo_core.adapters.dynamodb_placements import DynamoPlacementStore
from kaibo_core.runtime.wiring import build_semantic_channel
from kaibo_core.services.reindexing import IndexRepairer, ReindexStats, RepairStats, SemanticReindexer
from kaibo_local.data_dir import DataDir, DataDirError, configured_data_dir
from kaibo_local.durability import DurableTables, read_stored_tables
from kaibo_local.emulator import start_emulator
from kaibo_local.stack import FAKE_AWS
from kaibo_local.template import create_tables, load_template

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: Work on the restored tables (the client, then the template's logical ids → table names):
#: its exit status and what it did, in a few words.
TablesWork = Callable[["DynamoDBClient", dict[str, str]], tuple[int, str]]


def reindex_command() -> int:
    path = configured_data_dir()
    if path is None:
        sys.stderr.write("kaibo-local: KAIBO_DATA_DIR=:memory: keeps nothing; nothing to re-index\n")
        return 0
    model = os.environ.get("KAIBO_SEMANTIC_MODEL", "").strip().lower() or "mini6"
    try:
        channel = build_semantic_channel(model)
    except ValueError as error:
        sys.stderr.write(f"kaibo-local: {error}\n")
        return 2
    if channel is None:
        sys.stderr.write("kaibo-local: KAIBO_SEMANTIC_MODEL=off: nothing to place (set it to mini6)\n")
        return 2

    def place(client: DynamoDBClient, tables: dict[str, str]) -> tuple[int, str]:
        store = DynamoPlacementStore(client, tables["MemoriesTable"], tables["TermIndexTable"])
        stats = SemanticReindexer(store, channel).reindex(progress=_reindex_progress)
        return (0 if stats.changed == 0 else 1), stats.summary(channel.version)

    return _on_stopped_stack(path, "re-index", place)


def repair_command() -> int:
    path = configured_data_dir()
    if path is None:
        sys.stderr.write("kaibo-local: KAIBO_DATA_DIR=:memory: keeps nothing; nothing to repair\n")
        return 0

    def repair(client: DynamoDBClient, tables: dict[str, str]) -> tuple[int, str]:
        store = DynamoIndexRepairStore(client, tables["MemoriesTable"], tables["TermIndexTable"])
        stats = IndexRepairer(store).repair(progress=_repair_progress)
        return (0 if stats.left == 0 else 1), stats.summary()

    return _on_stopped_stack(path, "repair", repair)


def _on_stopped_stack(path: Path, verb: str, work: TablesWork) -> int:
    """``work`` on the tables of the data folder at ``path``, restored into an emulator of this
    process; the folder is compacted after it. 1 when the folder cannot be opened."""
    try:
        data_dir = DataDir.open(path)
    except DataDirError as error:
        sys.stderr.write(f"kaibo-local: {error}\n")
        return 1
    began = time.monotonic()
    os.environ.update(FAKE_AWS)
    emulator = start_emulator()
    try:
        manifest = data_dir.manifest()
        if manifest is None:
            sys.stderr.write(f"kaibo-local: {path} holds no stack yet: nothing to {verb}\n")
            return 0
        client = boto3.client("dynamodb", endpoint_url=emulator.endpoint_url)
        tables = create_tables(client, load_template(), manifest.table_suffix)
        durable = DurableTables(data_dir, emulator, tables.values())
        durable.restore(read_stored_tables(data_dir))
        status, summary = work(client, tables)
        durable.compact()
        durable.close()
    finally:
        emulator.stop()
        data_dir.close()
    sys.stderr.write(f"kaibo-local: {summary} in {time.monotonic() - began:.0f} s\n")
    return status


def _reindex_progress(stats: ReindexStats) -> None:
    sys.stderr.write(f"kaibo-local: {stats.seen} memories read, {stats.placed} placed\n")


def _repair_progress(stats: RepairStats) -> None:
    sys.stderr.write(f"kaibo-local: {stats.memories} memories and {stats.postings} postings checked\n")
