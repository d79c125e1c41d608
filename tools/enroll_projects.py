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

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import timedelta

import boto3

from kaibo_core.adapters.apigateway_usage_plans import ApiGatewayUsagePlan, usage_key_name
from kaibo_core.adapters.dynamodb_projects import DynamoProjectStore
from kaibo_core.core.clock import Clock, format_instant, utc_now
from kaibo_core.services.admin import OrphanKey, enroll_old_projects, remove_orphan_usage_keys


def stack_outputs(stack_name: str) -> tuple[str, str]:
    stack = boto3.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"][0]
    outputs = {output["OutputKey"]: output["OutputValue"] for output in stack.get("Outputs", [])}
    if "ProjectUsagePlanId" not in outputs:
        raise SystemExit(
            f"stack {stack_name} has no ProjectUsagePlanId output: deploy with ProjectThrottles=on"
        )
    return outputs["ProjectsTableName"], outputs["ProjectUsagePlanId"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--stack-name", help="the deployed stack (its outputs name the table and plan)")
    where.add_argument("--projects-table", help="the projects table (with --usage-plan-id)")
    parser.add_argument("--usage-plan-id", help="the usage plan (with --projects-table)")
    parser.add_argument("--endpoint-url", help="an AWS endpoint (an emulator); default: AWS")
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
    if args.projects_table and not args.usage_plan_id:
        parser.error("--projects-table needs --usage-plan-id")
    if args.delete and not args.remove_orphan_keys:
        parser.error("--delete goes with --remove-orphan-keys")
    if args.min_age_hours < 1 or args.max_deletions < 1:
        parser.error("--min-age-hours and --max-deletions are 1 at least")
    table, plan_id = (
        stack_outputs(args.stack_name) if args.stack_name else (args.projects_table, args.usage_plan_id)
    )
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
