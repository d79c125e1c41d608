"""Re-index a deployed Kaibo by meaning: every memory placed by recall by meaning's model.

Run it after turning recall by meaning on (``SemanticModel=mini6``) or changing its model, with
the credentials of someone who may read and write the stack's tables:

    python tools/reindex_semantic.py --stack-name kaibo [--project prj_…] [--model mini6]

It reads the stack's ``MemoriesTableName`` and ``TermIndexTableName`` outputs (or takes
``--memories-table``/``--index-table``, and ``--endpoint-url`` for an emulator), scans the memory
items (all projects, or one), and places each memory not placed by this model, one transaction
each (``kaibo_core.services.reindexing``). Safe while the service runs, and safe to run again:
placed memories are skipped, and a memory that keeps changing is left for the next run (exit 1).
The local stack has ``make reindex-semantic``.
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

from kaibo_core.adapters.dynamodb_placements import DynamoPlacementStore
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.runtime.wiring import SEMANTIC_MODELS, build_semantic_channel
from kaibo_core.services.reindexing import ReindexStats, SemanticReindexer
from tools.stack_resources import MEMORY_TABLES


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    MEMORY_TABLES.add_arguments(parser)
    parser.add_argument("--project", help="only this project (default: every project)")
    parser.add_argument("--model", choices=SEMANTIC_MODELS, default="mini6")
    args = parser.parse_args(argv)
    memories, index = MEMORY_TABLES.names(parser, args)
    channel = build_semantic_channel(args.model)
    assert channel is not None
    client = boto3.client("dynamodb", endpoint_url=args.endpoint_url)
    reindexer = SemanticReindexer(DynamoPlacementStore(client, memories, index), channel)
    project = ProjectId(args.project) if args.project else None
    stats = reindexer.reindex(project, progress=progress)
    print(stats.summary(channel.version))
    return 0 if stats.changed == 0 else 1


def progress(stats: ReindexStats) -> None:
    sys.stderr.write(f"{stats.seen} memories read, {stats.placed} placed\n")


if __name__ == "__main__":
    raise SystemExit(main())
