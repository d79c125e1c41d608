"""Put back on the purge's work list the forgets an older purge marked unlocated without searching.

    python tools/requeue_unlocated.py --stack-name kaibo [--max-items N] [--cursor C]

Before session 32, the purge marked an old ledger entry (written before entries kept their
events' locations) ``unlocated`` as soon as no memory cited one of its events, and took it off
its work list: the event's payload stayed stored. Since then the purge searches the project's
streams for such events (docs/forget.md, step 3), but only for entries on its work list. This
tool finds the entries marked the old way (``unlocatedEventIds`` without ``locateFinishedAt``)
and puts each back on the list; the purge's next runs search for their events, erase the
payloads they find, and mark the entry purged (or unlocated again, searched this time, if no
stream holds the event).

It reads the stack's ``LedgerTableName`` output (or takes ``--ledger-table``, and
``--endpoint-url`` for an emulator), and Scans the ledger table: these entries are on no index.
Nothing hashed changes. Safe while the service runs, and safe to run again (an entry requeued,
searched or purged is left alone). ``--max-items`` bounds a run (items read); it then prints a
cursor, and ``--cursor`` resumes there. Exit 0 when the whole table was read, 3 when stopped by
``--max-items`` (resume).
"""

# ruff: noqa: E402 - the project imports follow the sys.path set-up below, on purpose.
from __future__ import annotations

import argparse
import base64
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import boto3

ROOT: Final = Path(__file__).resolve().parents[1]
# Run as a script, Python puts tools/ on the path, not the repository that holds the tools package.
sys.path[:0] = [p for p in (str(ROOT),) if p not in sys.path]

from kaibo_core.adapters.dynamodb_ledger import DynamoLedgerStore
from kaibo_core.adapters.dynamodb_values import Item
from tools.stack_resources import stack_outputs

#: Exit status of a run stopped by ``--max-items`` (resume with the cursor it printed).
STOPPED_EXIT: Final = 3
#: Items read per run unless ``--max-items`` says otherwise: the whole table, in practice.
DEFAULT_MAX_ITEMS: Final = 10**12


def encode_cursor(start: Item) -> str:
    return base64.urlsafe_b64encode(json.dumps(start, sort_keys=True).encode()).decode()


def decode_cursor(parser: argparse.ArgumentParser, cursor: str) -> Item:
    try:
        start = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except ValueError:
        parser.error(f"not a cursor of this tool: {cursor!r}")
    if not isinstance(start, dict):
        parser.error(f"not a cursor of this tool: {cursor!r}")
    return start


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--stack-name", help="the deployed stack (its outputs name the ledger table)")
    where.add_argument("--ledger-table", help="the ledger table")
    parser.add_argument("--endpoint-url", help="a DynamoDB endpoint (an emulator); default: AWS")
    parser.add_argument(
        "--max-items", type=int, default=DEFAULT_MAX_ITEMS, help="stop after reading about this many items"
    )
    parser.add_argument("--cursor", help="resume where a run stopped (the cursor it printed)")
    args = parser.parse_args(argv)
    if args.max_items < 1:
        parser.error("--max-items must be at least 1")
    start = decode_cursor(parser, args.cursor) if args.cursor else None
    table = args.ledger_table or _ledger_table(args.stack_name)
    store = DynamoLedgerStore(boto3.client("dynamodb", endpoint_url=args.endpoint_url), table)

    entries, start, read = store.unsearched_unlocated(start, args.max_items)
    requeued = [entry for entry in entries if store.requeue_unsearched(entry)]
    for entry in requeued:
        print(f"requeued {entry.project_id} {entry.id} (unlocated events: searched by the next purge)")
    done = "finished" if start is None else f"stopped: resume with --cursor '{encode_cursor(start)}'"
    print(f"{read} items read, {len(entries)} unsearched unlocated entries, {len(requeued)} requeued; {done}")
    return 0 if start is None else STOPPED_EXIT


def _ledger_table(stack_name: str) -> str:
    outputs = stack_outputs(stack_name)
    if "LedgerTableName" not in outputs:
        raise SystemExit(f"stack {stack_name} has no LedgerTableName output")
    return outputs["LedgerTableName"]


if __name__ == "__main__":
    raise SystemExit(main())
