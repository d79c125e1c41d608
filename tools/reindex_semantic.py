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

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import boto3

from kaibo_core.adapters.dynamodb_placements import DynamoPlacementStore
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.runtime.wiring import SEMANTIC_MODELS, build_semantic_channel
from kaibo_core.services.reindexing import ReindexStats, SemanticReindexer


def stack_tables(stack_name: str) -> tuple[str, str]:
    stack = boto3.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"][0]
    outputs = {output["OutputKey"]: output["OutputValue"] for output in stack.get("Outputs", [])}
    return outputs["MemoriesTableName"], outputs["TermIndexTableName"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--stack-name", help="the deployed stack (its outputs name the tables)")
    where.add_argument("--memories-table", help="the memories table (with --index-table)")
    parser.add_argument("--index-table", help="the term index table (with --memories-table)")
    parser.add_argument("--endpoint-url", help="a DynamoDB endpoint (an emulator); default: AWS")
    parser.add_argument("--project", help="only this project (default: every project)")
    parser.add_argument("--model", choices=SEMANTIC_MODELS, default="mini6")
    args = parser.parse_args(argv)
    if args.memories_table and not args.index_table:
        parser.error("--memories-table needs --index-table")
    memories, index = (
        stack_tables(args.stack_name) if args.stack_name else (args.memories_table, args.index_table)
    )
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
