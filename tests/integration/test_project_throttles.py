"""Per-project throttles: each project's API Gateway API key in the usage plan, and the authorizer
naming it (``usageIdentifierKey``), through the real handlers against the emulator's API Gateway.

The emulator does not throttle: what is checked is what API Gateway meters by, the key the
authorizer returns for each caller, and that the plan holds exactly one key per project.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kaibo_core.adapters import aws
from kaibo_core.adapters.apigateway_usage_plans import ApiGatewayUsagePlan, usage_key_name
from kaibo_core.adapters.dynamodb_projects import DynamoProjectStore
from kaibo_core.core.storage_keys import ProjectId, api_key_key, project_key
from kaibo_core.runtime import wiring
from kaibo_core.services.admin import AdminService
from kaibo_local.template import function_specs, load_template, resolve_environment
from tests.conftest import AwsStack, emulator_client, scan_all
from tests.fixtures.faults import Fault, FaultInjector, Kind
from tests.integration.api import ADMIN_CONTEXT, call
from tests.integration.test_keys_and_authorizer import add_key, authorize, create_project
from tools.enroll_projects import main as enroll_main


@dataclass(frozen=True)
class Plan:
    """The deployment's usage plan in the emulator, with its shared key."""

    stack: AwsStack
    apigateway: Any  # a client of the emulator's API Gateway, without hooks
    plan_id: str
    shared_value: str

    def keys_named(self, name: str) -> list[dict[str, Any]]:
        items = self.apigateway.get_api_keys(nameQuery=name, includeValues=True, limit=500)["items"]
        return [key for key in items if key["name"] == name]

    def values_in_plan(self) -> set[str]:
        plan_keys = self.apigateway.get_usage_plan_keys(usagePlanId=self.plan_id, limit=500)["items"]
        return {key["value"] for key in plan_keys}

    def stored(self, key: dict[str, str]) -> dict[str, Any]:
        table = self.stack.tables["ProjectsTable"]
        item: dict[str, Any] = self.stack.dynamodb.get_item(
            TableName=table, Key={k: {"S": v} for k, v in key.items()}
        )["Item"]
        return item


def new_plan(stack: AwsStack) -> tuple[Any, str, str]:
    """A usage plan holding a shared key, as template.yaml deploys them: (client, plan id, value)."""
    apigateway = emulator_client("apigateway", stack.endpoint_url)
    plan_id = apigateway.create_usage_plan(name=f"kaibo-projects-{secrets.token_hex(4)}")["id"]
    shared_value = f"kaibo-shared-{secrets.token_hex(8)}"
    shared = apigateway.create_api_key(name="kaibo-shared", enabled=True, value=shared_value)
    apigateway.create_usage_plan_key(usagePlanId=plan_id, keyId=shared["id"], keyType="API_KEY")
    return apigateway, plan_id, shared_value


def turn_on(monkeypatch: pytest.MonkeyPatch, plan_id: str, shared_value: str) -> None:
    """The admin and authorizer functions' environment with ProjectThrottles=on."""
    monkeypatch.setenv("KAIBO_USAGE_PLAN_ID", plan_id)
    monkeypatch.setenv("KAIBO_SHARED_USAGE_KEY", shared_value)
    wiring.reset()


@pytest.fixture
def plan(handler_env: AwsStack, monkeypatch: pytest.MonkeyPatch) -> Plan:
    apigateway, plan_id, shared_value = new_plan(handler_env)
    turn_on(monkeypatch, plan_id, shared_value)
    return Plan(handler_env, apigateway, plan_id, shared_value)


@pytest.fixture
def apigateway_faults(plan: Plan) -> Iterator[FaultInjector]:
    """Fault hooks on the container's own API Gateway client (the admin function's)."""
    injector = FaultInjector(aws.apigateway_client(), plan.apigateway)
    yield injector
    injector.remove()


def usage_key_of(api_key: str) -> str | None:
    found: str | None = authorize(f"Bearer {api_key}").get("usageIdentifierKey")
    return found


def project_items(stack: AwsStack) -> set[str]:
    items = scan_all(stack.dynamodb, stack.tables["ProjectsTable"])
    return {item["pk"]["S"] for item in items if item["pk"]["S"].startswith("project#")}


# -- on: one API key per project ----------------------------------------------------------------------


def test_given_throttles_on_when_creating_a_project_then_its_own_api_key_in_the_plan_meters_all_its_keys(
    plan: Plan, capsys: pytest.CaptureFixture[str]
) -> None:
    created = create_project("throttled")
    second = add_key(created["projectId"], {"scopes": ["read"]}).body

    (api_key,) = plan.keys_named(usage_key_name(ProjectId(created["projectId"])))
    assert api_key["enabled"] is True
    assert api_key["value"] in plan.values_in_plan()
    assert usage_key_of(created["apiKey"]) == api_key["value"]
    assert usage_key_of(second["apiKey"]) == api_key["value"]  # one limit per project, not per key
    assert api_key["value"] != plan.shared_value
    assert 20 <= len(api_key["value"]) <= 128
    # on the project's item, for the keys added later
    assert plan.stored(project_key(ProjectId(created["projectId"])))["usageKey"]["S"] == api_key["value"]
    assert api_key["value"] not in capsys.readouterr().out  # never logged


def test_given_throttles_on_then_two_projects_count_against_two_limits_and_the_admin_against_the_shared(
    plan: Plan,
) -> None:
    first, second = create_project("one"), create_project("two")

    assert usage_key_of(first["apiKey"]) != usage_key_of(second["apiKey"])
    assert {usage_key_of(first["apiKey"]), usage_key_of(second["apiKey"])} <= plan.values_in_plan()
    assert usage_key_of(plan.stack.admin_key) == plan.shared_value


def test_given_a_project_from_before_the_throttles_then_its_keys_share_the_fallback_key(
    handler_env: AwsStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = create_project("from before")  # no usage plan configured yet
    _, plan_id, shared_value = new_plan(handler_env)
    turn_on(monkeypatch, plan_id, shared_value)
    added = add_key(old["projectId"], {"scopes": ["read"]}).body

    assert usage_key_of(old["apiKey"]) == shared_value
    assert usage_key_of(added["apiKey"]) == shared_value
    stored = handler_env.dynamodb.get_item(
        TableName=handler_env.tables["ProjectsTable"], Key={"pk": {"S": api_key_key(added["keyId"])["pk"]}}
    )["Item"]
    assert "usageKey" not in stored  # the authorizer falls back; tools/enroll_projects.py gives it one


# -- retries and partial failure ------------------------------------------------------------------------


def test_given_create_api_key_s_answer_lost_and_retried_then_the_project_has_one_api_key(
    plan: Plan, apigateway_faults: FaultInjector
) -> None:
    fault = apigateway_faults.add(Fault("CreateApiKey", "lost_retried"))
    reply = call("admin", "POST", "/v1/admin/projects", body={"name": "retried"}, context=ADMIN_CONTEXT)

    assert fault.fired
    assert reply.status == 201, reply.body
    (api_key,) = plan.keys_named(usage_key_name(ProjectId(reply.body["projectId"])))  # was two
    assert api_key["value"] in plan.values_in_plan()
    assert usage_key_of(reply.body["apiKey"]) == api_key["value"]


def test_given_enrolling_twice_with_the_same_value_then_one_key_once_in_the_plan(plan: Plan) -> None:
    enrollment = ApiGatewayUsagePlan(plan.apigateway, plan.plan_id)
    project, value = ProjectId("prj_" + "7" * 26), "v" * 40

    enrollment.enroll(project, value)
    enrollment.enroll(project, value)

    assert [key["value"] for key in plan.keys_named(usage_key_name(project))] == [value]
    plan_keys = plan.apigateway.get_usage_plan_keys(usagePlanId=plan.plan_id, limit=500)["items"]
    assert [key["value"] for key in plan_keys].count(value) == 1


def test_given_the_plan_refuses_the_key_then_no_project_is_stored(
    plan: Plan, apigateway_faults: FaultInjector
) -> None:
    before = project_items(plan.stack)
    apigateway_faults.add(Fault("CreateUsagePlanKey", "unavailable"))
    reply = call("admin", "POST", "/v1/admin/projects", body={"name": "refused"}, context=ADMIN_CONTEXT)

    assert reply.status == 500
    assert project_items(plan.stack) == before  # no project whose key API Gateway would refuse


@pytest.mark.parametrize(
    "refusal",
    [
        ("CreateApiKey", "too_many_requests", 429, "usage_plan_busy"),
        ("CreateUsagePlanKey", "too_many_requests", 429, "usage_plan_busy"),
        ("CreateApiKey", "limit_exceeded", 503, "api_key_quota_reached"),
    ],
)
def test_given_api_gateway_throttled_or_out_of_api_keys_then_a_clear_answer_and_no_project_stored(
    plan: Plan, apigateway_faults: FaultInjector, refusal: tuple[str, Kind, int, str]
) -> None:
    operation, kind, status, code = refusal
    before = project_items(plan.stack)
    apigateway_faults.add(Fault(operation, kind))
    reply = call("admin", "POST", "/v1/admin/projects", body={"name": "refused"}, context=ADMIN_CONTEXT)

    assert reply.status == status, reply.body
    assert reply.body["error"]["code"] == code
    assert ("Retry-After" in reply.headers) == (status == 429)
    assert project_items(plan.stack) == before
    # Once API Gateway answers again, the same call creates the project.
    assert (
        call("admin", "POST", "/v1/admin/projects", body={"name": "later"}, context=ADMIN_CONTEXT).status
        == 201
    )


def test_given_a_usage_key_set_between_read_and_write_then_a_new_key_gets_it(plan: Plan) -> None:
    old = create_project("migrated meanwhile")
    project = ProjectId(old["projectId"])
    table = plan.stack.tables["ProjectsTable"]
    dynamodb = plan.stack.dynamodb

    class MigratedAfterRead(DynamoProjectStore):
        reads = 0

        def _usage_key(self, project: ProjectId) -> str | None:
            found = super()._usage_key(project)
            MigratedAfterRead.reads += 1
            if MigratedAfterRead.reads == 1:  # tools/enroll_projects.py, between the read and the write
                dynamodb.update_item(
                    TableName=table,
                    Key={k: {"S": v} for k, v in project_key(project).items()},
                    UpdateExpression="SET usageKey = :u",
                    ExpressionAttributeValues={":u": {"S": "u" * 40}},
                )
            return found

    store = MigratedAfterRead(dynamodb, table)
    created = AdminService(store).create_key(project, ["read"])

    assert MigratedAfterRead.reads == 2
    assert usage_key_of(created.api_key) == "u" * 40


# -- off, and the local stack ---------------------------------------------------------------------------


def test_given_throttles_off_then_no_api_gateway_call_and_no_usage_key(handler_env: AwsStack) -> None:
    hooked = FaultInjector(aws.apigateway_client(), None)
    try:
        created = create_project("unthrottled")
        add_key(created["projectId"], {"scopes": ["read"]})
    finally:
        hooked.remove()

    assert hooked.calls == []
    assert usage_key_of(created["apiKey"]) is None
    assert usage_key_of(handler_env.admin_key) is None


def test_given_the_local_stack_then_the_functions_get_no_usage_plan_and_no_shared_key() -> None:
    template = load_template()
    specs = {spec.logical_id: spec for spec in function_specs(template)}
    names = {"ProjectsTable": "projects"}
    for function, variable in (
        ("AdminFunction", "KAIBO_USAGE_PLAN_ID"),
        ("AuthorizerFunction", "KAIBO_SHARED_USAGE_KEY"),
    ):
        environment = {variable: specs[function].environment[variable]}
        assert resolve_environment(environment, names, {}, template) == {variable: ""}


# -- the migration: projects from before get their own key ---------------------------------------------


def tool_args(plan: Plan) -> list[str]:
    """tools/enroll_projects.py's options naming this test's projects table, plan and emulator."""
    return [
        "--projects-table",
        plan.stack.tables["ProjectsTable"],
        "--usage-plan-id",
        plan.plan_id,
        "--endpoint-url",
        plan.stack.endpoint_url,
    ]


def enroll(plan: Plan) -> int:
    return enroll_main(tool_args(plan))


def test_given_projects_from_before_when_the_migration_runs_twice_then_each_has_one_key_of_its_own(
    handler_env: AwsStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = create_project("from before")
    second = add_key(old["projectId"], {"scopes": ["read"]}).body
    apigateway, plan_id, shared_value = new_plan(handler_env)
    turn_on(monkeypatch, plan_id, shared_value)
    plan = Plan(handler_env, apigateway, plan_id, shared_value)
    assert usage_key_of(old["apiKey"]) == shared_value

    first_run = enroll(plan)
    (api_key,) = plan.keys_named(usage_key_name(ProjectId(old["projectId"])))

    assert api_key["value"] in plan.values_in_plan()
    assert usage_key_of(old["apiKey"]) == usage_key_of(second["apiKey"]) == api_key["value"]
    assert (first_run, enroll(plan)) == (1, 0)  # the second run finds nothing left to do
    assert len(plan.keys_named(usage_key_name(ProjectId(old["projectId"])))) == 1


def test_given_a_migration_that_stopped_after_creating_the_key_then_the_next_run_reuses_it(
    handler_env: AwsStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = create_project("interrupted")
    project = ProjectId(old["projectId"])
    apigateway, plan_id, shared_value = new_plan(handler_env)
    turn_on(monkeypatch, plan_id, shared_value)
    plan = Plan(handler_env, apigateway, plan_id, shared_value)
    made_before = "m" * 40
    apigateway.create_api_key(name=usage_key_name(project), enabled=True, value=made_before)  # then it died

    assert enroll(plan) == 1

    assert [key["value"] for key in plan.keys_named(usage_key_name(project))] == [made_before]
    assert made_before in plan.values_in_plan()
    assert usage_key_of(old["apiKey"]) == made_before


# -- unused API keys: failed creations leave them, the cleanup deletes them -----------------------------


def clean(plan: Plan, *options: str, hours_later: float = 2) -> int:
    """tools/enroll_projects.py --remove-orphan-keys, on a clock ``hours_later`` than the emulator's."""
    return enroll_main(
        [*tool_args(plan), "--remove-orphan-keys", *options],
        clock=lambda: datetime.now(UTC) + timedelta(hours=hours_later),
    )


def plan_key_names(plan: Plan) -> set[str]:
    plan_keys = plan.apigateway.get_usage_plan_keys(usagePlanId=plan.plan_id, limit=500)["items"]
    return {key["name"] for key in plan_keys}


def account_key_ids(plan: Plan) -> set[str]:
    return {key["id"] for key in plan.apigateway.get_api_keys(limit=500)["items"]}


def test_given_failed_creations_then_the_cleanup_deletes_only_the_plan_keys_no_project_uses(
    handler_env: AwsStack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Given the plan's keys of: a project, a project from before that an interrupted enroll made a
    key for, a creation whose project write failed, a key made twice for one project, the shared
    key; and another stack's plan with a key named for a project this stack does not have. When
    the cleanup runs: it lists the two no project uses only once they are an hour old, deletes
    them only with --delete, and touches nothing else."""
    from_before = ProjectId(create_project("from before")["projectId"])  # no usage plan yet
    apigateway, plan_id, shared_value = new_plan(handler_env)
    turn_on(monkeypatch, plan_id, shared_value)
    plan = Plan(handler_env, apigateway, plan_id, shared_value)
    enrollment = ApiGatewayUsagePlan(plan.apigateway, plan.plan_id)
    enrollment.enroll(from_before, "b" * 40)  # an enroll run that stopped before storing it
    live = create_project("live")
    made_twice = ProjectId(create_project("made twice")["projectId"])
    enrollment.enroll(made_twice, "t" * 40)  # a second key of its name; the project holds the first
    other_stack = apigateway.create_usage_plan(name=f"other-{secrets.token_hex(4)}")["id"]
    ApiGatewayUsagePlan(apigateway, other_stack).enroll(ProjectId("prj_" + "9" * 26), "o" * 40)
    before, values_before = plan_key_names(plan), plan.values_in_plan()
    dynamodb_faults = FaultInjector(wiring.dynamodb(), handler_env.dynamodb)
    dynamodb_faults.add(Fault("TransactWriteItems", "unavailable", times=20))  # the project write fails
    try:
        failed = call("admin", "POST", "/v1/admin/projects", body={"name": "x"}, context=ADMIN_CONTEXT)
    finally:
        dynamodb_faults.remove()
    assert failed.status == 500
    (failed_name,) = plan_key_names(plan) - before
    capsys.readouterr()

    young = clean(plan, "--delete", hours_later=0)
    assert (young, capsys.readouterr().out.splitlines()[-1].startswith("0 unused API keys deleted")) == (
        0,
        True,
    )
    keys_before = account_key_ids(plan)
    dry_run = clean(plan)
    listed = capsys.readouterr().out
    assert account_key_ids(plan) == keys_before  # a dry run deletes nothing
    deleted = clean(plan, "--delete")
    again = clean(plan, "--delete")

    orphans = {failed_name: "no_project", usage_key_name(made_twice): "project_uses_another_key"}
    assert (dry_run, deleted, again) == (1, 1, 0)
    assert {line.split("\t")[1]: line.split("\t")[3] for line in listed.splitlines()[:-1]} == orphans
    assert listed.splitlines()[-1].startswith("2 unused API keys to delete (dry run")
    assert plan.values_in_plan() == values_before - {"t" * 40}  # and the failed creation's
    assert len(account_key_ids(plan)) == len(keys_before) - 2
    assert "t" * 40 not in [key["value"] for key in plan.keys_named(usage_key_name(made_twice))]
    assert plan.keys_named(failed_name) == []  # deleted from the account, not only from the plan
    assert [key["value"] for key in plan.keys_named(usage_key_name(from_before))] == ["b" * 40]
    assert usage_key_of(live["apiKey"]) in plan.values_in_plan()  # the live project's key is kept
    assert shared_value in plan.values_in_plan()
    other_plan_keys = apigateway.get_usage_plan_keys(usagePlanId=other_stack, limit=500)["items"]
    assert [key["value"] for key in other_plan_keys] == ["o" * 40]


def test_given_more_unused_keys_than_the_run_may_delete_then_the_next_run_deletes_the_rest(
    plan: Plan,
) -> None:
    enrollment = ApiGatewayUsagePlan(plan.apigateway, plan.plan_id)
    for digit in "123":
        enrollment.enroll(ProjectId("prj_" + digit * 26), digit * 40)  # no such projects
    before = plan_key_names(plan)

    first = clean(plan, "--delete", "--max-deletions", "2")
    after_first = plan_key_names(plan)
    second = clean(plan, "--delete", "--max-deletions", "2")

    assert (first, second) == (1, 1)
    assert len(before - after_first) == 2
    assert not any(name.startswith("kaibo-prj_") for name in plan_key_names(plan))
    assert clean(plan, "--delete") == 0
