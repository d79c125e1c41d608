"""``python -m kaibo_local reindex-semantic`` (``make reindex-semantic``): every memory of a
stopped local stack's data folder placed by recall by meaning's model (``KAIBO_SEMANTIC_MODEL``,
default ``mini6``), so that memories written while it was off are found by meaning too.

The folder's tables are restored into an emulator of this process as the stack restores them,
re-indexed by the service the AWS command runs (``kaibo_core.services.reindexing``), and
compacted into one snapshot. The folder is locked meanwhile: a running stack refuses it, and
this command refuses a folder a running stack holds.
"""

from __future__ import annotations

import os
import sys
import time

import boto3

from kaibo_core.adapters.dynamodb_placements import DynamoPlacementStore
from kaibo_core.runtime.wiring import build_semantic_channel
from kaibo_core.services.reindexing import ReindexStats, SemanticReindexer
from kaibo_local.data_dir import DataDir, DataDirError, configured_data_dir
from kaibo_local.durability import DurableTables, read_stored_tables
from kaibo_local.emulator import start_emulator
from kaibo_local.stack import FAKE_AWS
from kaibo_local.template import create_tables, load_template


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
            sys.stderr.write(f"kaibo-local: {path} holds no stack yet: nothing to re-index\n")
            return 0
        client = boto3.client("dynamodb", endpoint_url=emulator.endpoint_url)
        tables = create_tables(client, load_template(), manifest.table_suffix)
        durable = DurableTables(data_dir, emulator, tables.values())
        durable.restore(read_stored_tables(data_dir))
        store = DynamoPlacementStore(client, tables["MemoriesTable"], tables["TermIndexTable"])
        stats = SemanticReindexer(store, channel).reindex(progress=_progress)
        durable.compact()
        durable.close()
    finally:
        emulator.stop()
        data_dir.close()
    sys.stderr.write(f"kaibo-local: {stats.summary(channel.version)} in {time.monotonic() - began:.0f} s\n")
    return 0 if stats.changed == 0 else 1


def _progress(stats: ReindexStats) -> None:
    sys.stderr.write(f"kaibo-local: {stats.seen} memories read, {stats.placed} placed\n")
