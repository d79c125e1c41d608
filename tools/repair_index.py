"""Repair a deployed Kaibo's term index where versions before session 31 left it wrong.

    python tools/repair_index.py --stack-name kaibo [--project prj_…] [--max-items N] [--cursor C]

It reads the stack's ``MemoriesTableName`` and ``TermIndexTableName`` outputs (or takes
``--memories-table``/``--index-table``, and ``--endpoint-url`` for an emulator), then
(``kaibo_core.services.reindexing.IndexRepairer``): moves the postings of each memory to the side
its status says and rewrites those that carry another status, end or successor than its item;
then erases the postings no memory accounts for (an index that never finished before index
markers existed, a forgotten or replaced memory's, duplicates on the wrong side) with their
document frequencies. Safe while the service runs, and safe to run again. ``--max-items`` bounds a
run (items read); it then prints a cursor, and ``--cursor`` resumes there. Exit 0 when finished,
3 when stopped by ``--max-items`` (resume), 1 when some postings were left (run again).
"""

# ruff: noqa: E402 - the project imports follow the sys.path set-up below, on purpose.
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import boto3

ROOT: Final = Path(__file__).resolve().parents[1]
# Run as a script, Python puts tools/ on the path, not the repository that holds the tools package.
sys.path[:0] = [p for p in (str(ROOT),) if p not in sys.path]

from kaibo_core.adapters.dynamodb_index_repair import DynamoIndexRepairStore
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.services.reindexing import IndexRepairer, RepairStats
from tools.stack_resources import MEMORY_TABLES

#: Exit status of a run stopped by ``--max-items`` (resume with the cursor it printed).
STOPPED_EXIT = 3


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    MEMORY_TABLES.add_arguments(parser)
    parser.add_argument("--project", help="only this project (default: every project)")
    parser.add_argument("--max-items", type=int, help="stop after reading about this many items")
    parser.add_argument("--cursor", help="resume where a run stopped (the cursor it printed)")
    args = parser.parse_args(argv)
    memories, index = MEMORY_TABLES.names(parser, args)
    store = DynamoIndexRepairStore(boto3.client("dynamodb", endpoint_url=args.endpoint_url), memories, index)
    project = ProjectId(args.project) if args.project else None
    stats = IndexRepairer(store).repair(project, args.cursor, args.max_items, progress=progress)
    print(stats.summary())
    if stats.cursor is not None:
        return STOPPED_EXIT
    return 0 if stats.left == 0 else 1


def progress(stats: RepairStats) -> None:
    sys.stderr.write(f"{stats.memories} memories and {stats.postings} postings checked\n")


if __name__ == "__main__":
    raise SystemExit(main())
