"""Give each project created before per-project throttles its own API key in the usage plan, or
remove the plan's API keys no project uses.

Until it runs, such projects (created before the deploy that added per-project throttles, or while
``ProjectThrottles`` was off) share one limit: the usage plan's fallback key (docs/deploy.md,
"Throttles"). Run it once after deploying with ``ProjectThrottles=on``, with the credentials of
someone who may read and write the stack's projects table and create API Gateway API keys:

    python tools/enroll_projects.py --stack-name kaibo

It reads the stack's ``ProjectsTableName`` and ``ProjectUsagePlanId`` outputs (or takes
``--projects-table`` and ``--usage-plan-id``, and ``--endpoint-url`` for an emulator), scans the
projects table once, and for each project without its own API key creates one in the usage plan
(``kaibo-<projectId>``) and stores its value on the project and on each of its keys. Safe while the
service runs and safe to run again (``services/admin.enroll_old_projects``); it exits 0 when it
found nothing left to do, 1 when it did something (run it again to confirm nothing was missed).

A project creation that failed after its API key was made leaves that key in the plan, unused, and
each one counts against the account's quota of API keys. With ``--remove-orphan-keys`` it lists
the plan's ``kaibo-<projectId>`` keys that no project uses and that are older than
``--min-age-hours`` (1), and with ``--delete`` deletes at most ``--max-deletions`` (100) of them
(``services/admin.remove_orphan_usage_keys``); without ``--delete`` it deletes nothing. It exits 0
when it found none, 1 otherwise.
"""

# ruff: noqa: E402 - the project imports follow the sys.path set-up below, on purpose.
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Final

import boto3

ROOT: Final = Path(__file__).resolve().parents[1]
# Run as a script, Python puts tools/ on the path, not the repository that holds the tools package.
sys.path[:0] = [p for p in (str(ROOT),) if p not in sys.path]

from kaibo_core.adapters.apigateway_usage_plans import ApiGatewayUsagePlan, usage_key_name
from kaibo_core.adapters.dynamodb_projects import DynamoProjectStore
from kaibo_core.core.clock import Clock, format_instant, utc_now
from kaibo_core.services.admin import OrphanKey, enroll_old_projects, remove_orphan_usage_keys
from tools.stack_resources import ResourcePair, StackResource

#: The projects table and the usage plan of per-project throttles.
PROJECTS_AND_PLAN = ResourcePair(
    StackResource("ProjectsTableName", "--projects-table", "the projects table"),
    StackResource(
        "ProjectUsagePlanId",
        "--usage-plan-id",
        "the usage plan",
        missing_hint="deploy with ProjectThrottles=on",
    ),
    what_the_stack_names="the table and plan",
    endpoint_help="an AWS endpoint (an emulator); default: AWS",
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    PROJECTS_AND_PLAN.add_arguments(parser)
    cleanup = parser.add_argument_group("unused API keys")
    cleanup.add_argument(
        "--remove-orphan-keys",
        action="store_true",
        help="list the plan's project keys no project uses, instead of enrolling (a dry run)",
    )
    cleanup.add_argument("--delete", action="store_true", help="delete the keys listed")
    cleanup.add_argument(
        "--min-age-hours",
        type=float,
        default=1.0,
        help="leave keys younger than this (a project's creation may be under way): default 1",
    )
    cleanup.add_argument("--max-deletions", type=int, default=100, help="most keys one run deletes")
    return parser


def _print_orphan(orphan: OrphanKey) -> None:
    key = orphan.key
    print(
        "\t".join(
            [key.key_id, usage_key_name(key.project_id), format_instant(orphan.created_at), orphan.reason]
        )
    )


def main(argv: Sequence[str] | None = None, *, clock: Clock = utc_now) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.delete and not args.remove_orphan_keys:
        parser.error("--delete goes with --remove-orphan-keys")
    if args.min_age_hours < 1 or args.max_deletions < 1:
        parser.error("--min-age-hours and --max-deletions are 1 at least")
    table, plan_id = PROJECTS_AND_PLAN.names(parser, args)
    store = DynamoProjectStore(boto3.client("dynamodb", endpoint_url=args.endpoint_url), table)
    plan = ApiGatewayUsagePlan(boto3.client("apigateway", endpoint_url=args.endpoint_url), plan_id)
    if args.remove_orphan_keys:
        found = remove_orphan_usage_keys(
            store,
            plan,
            now=clock(),
            remove=args.delete,
            min_age=timedelta(hours=args.min_age_hours),
            limit=args.max_deletions,
            report=_print_orphan,
        )
        print(found.summary(removed=args.delete))
        return 0 if not found.orphans and not found.left else 1
    stats = enroll_old_projects(store, plan)
    print(stats.summary())
    return 0 if stats.projects == stats.keys == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
