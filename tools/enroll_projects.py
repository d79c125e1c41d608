"""Give each project created before per-project throttles its own API key in the usage plan.

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
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import boto3

from kaibo_core.adapters.apigateway_usage_plans import ApiGatewayUsagePlan
from kaibo_core.adapters.dynamodb_projects import DynamoProjectStore
from kaibo_core.services.admin import enroll_old_projects


def stack_outputs(stack_name: str) -> tuple[str, str]:
    stack = boto3.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"][0]
    outputs = {output["OutputKey"]: output["OutputValue"] for output in stack.get("Outputs", [])}
    if "ProjectUsagePlanId" not in outputs:
        raise SystemExit(
            f"stack {stack_name} has no ProjectUsagePlanId output: deploy with ProjectThrottles=on"
        )
    return outputs["ProjectsTableName"], outputs["ProjectUsagePlanId"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--stack-name", help="the deployed stack (its outputs name the table and plan)")
    where.add_argument("--projects-table", help="the projects table (with --usage-plan-id)")
    parser.add_argument("--usage-plan-id", help="the usage plan (with --projects-table)")
    parser.add_argument("--endpoint-url", help="an AWS endpoint (an emulator); default: AWS")
    args = parser.parse_args(argv)
    if args.projects_table and not args.usage_plan_id:
        parser.error("--projects-table needs --usage-plan-id")
    table, plan_id = (
        stack_outputs(args.stack_name) if args.stack_name else (args.projects_table, args.usage_plan_id)
    )
    store = DynamoProjectStore(boto3.client("dynamodb", endpoint_url=args.endpoint_url), table)
    plan = ApiGatewayUsagePlan(boto3.client("apigateway", endpoint_url=args.endpoint_url), plan_id)
    stats = enroll_old_projects(store, plan)
    print(stats.summary())
    return 0 if stats.projects == stats.keys == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
