"""Every sample event in events/ invokes the function template.yaml routes it to, with the documented result.

The samples are REST API (payload format 1.0) proxy events as API Gateway delivers them after
the token authorizer, plus one TOKEN authorizer event; they also work with
``sam local invoke -e events/<file>`` where Docker exists. Here each one runs in-process against
the emulator, with the tables created from template.yaml and each function's environment
resolved from it (kaibo_local.template), so samples, template and handlers cannot drift apart.

The expected status of each file lives below (``EXPECTED_STATUS``), not in the event file: a new
file in events/ without an entry fails ``test_given_events_dir_then_every_sample_has_an_expected_outcome``.
"""

from __future__ import annotations

import copy
import importlib
import json
import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore.config import Config

from kaibo_core.adapters.dynamodb_projects import DynamoProjectStore
from kaibo_core.core import api_keys
from kaibo_core.core.models.keys import CreatedKey
from kaibo_core.core.tenancy import Principal
from kaibo_core.runtime import wiring
from kaibo_core.services.admin import AdminService
from kaibo_local.emulator import Emulator, start_emulator
from kaibo_local.kms_keys import create_keys
from kaibo_local.template import (
    REPO_ROOT,
    FunctionSpec,
    RouteSpec,
    authorizer_function,
    create_tables,
    function_specs,
    load_template,
    resolve_environment,
)
from kaibo_local.workers import create_queues

EVENTS_DIR = REPO_ROOT / "events"
TEMPLATE = load_template()
SPECS = {spec.logical_id: spec for spec in function_specs(TEMPLATE)}
ROUTES = {(route.method, route.path): route for spec in SPECS.values() for route in spec.routes}

#: HTTP status each proxy sample answers with, after the setup ``PREPARE`` gives it.
EXPECTED_STATUS: dict[str, int] = {
    "remember.json": 202,  # two new events (message + commit) appended to stream chat-42
    "remember-invalid.json": 422,  # kind "voice_note" does not exist → unknown_kind
    "list-streams.json": 200,  # after remember.json: the chat-42 head
    "list-events.json": 200,  # after remember.json: chat-42 seq 1 and 2
    "create-project.json": 201,  # a project and its first key (admin key)
    "create-key.json": 201,  # after its project exists (id patched into the path)
    "revoke-key.json": 204,  # after its key exists (id patched into the path)
    "recall.json": 200,  # after remember.json: the release-target memory, cited
    "recall-stream.json": 200,  # the same, as server-sent events (candidates, packed, final)
    "get-memory.json": 200,  # after remember.json: its first provisional memory (id patched in)
    "explain.json": 200,  # after remember.json: the chain of its first memory (id patched in)
    "get-job.json": 200,  # after remember.json: its structuring job (id patched in)
    "forget.json": 200,  # after remember.json: a dry run of forgetting the release target
    "get-ledger.json": 200,  # the project's deletion ledger (empty until a forget)
    "get-receipt.json": 200,  # after a real forget: its receipt (id patched in)
    "get-openapi.json": 200,  # no key: the OpenAPI document
    "get-llms-txt.json": 200,  # no key
    "get-llms-full-txt.json": 200,  # no key
    "get-docs-zip.json": 200,  # no key: binary, base64-encoded
    "create-webhook.json": 201,  # a subscription; its secret shown once
    "list-webhooks.json": 200,
    "get-webhook.json": 200,  # after create-webhook.json (id patched in)
    "delete-webhook.json": 204,  # after create-webhook.json (id patched in)
    "rotate-webhook-secret.json": 200,  # after create-webhook.json (id patched in)
    "test-webhook.json": 202,  # after create-webhook.json: a webhook.test event queued
    "webhook-deliveries.json": 200,  # after create-webhook.json: no attempt yet
}
#: Samples of the queue and schedule triggers (not proxy events): structure a job, sweep.
TRIGGER_SAMPLES = {"structure-jobs.json", "sweep.json", "purge.json"}
#: Error code of each sample expected to fail.
EXPECTED_ERROR_CODE: dict[str, str] = {"remember-invalid.json": "unknown_kind"}
#: TOKEN authorizer samples (no status): Allow + context for a live key, Exception("Unauthorized")
#: for the sample's own key, which exists nowhere.
AUTHORIZER_SAMPLES = {"authorizer.json"}

#: What API Gateway adds to the authorizer's context in requestContext.authorizer.
GATEWAY_CONTEXT_KEYS = {"principalId", "integrationLatency"}
REGION = "us-east-1"

# The events and admin handlers publish no metric of their own; Powertools warns about it.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")


def load_event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS_DIR / name).read_text(encoding="utf-8"))
    return event


def proxy_samples() -> list[str]:
    return sorted(EXPECTED_STATUS)


def route_of(event: dict[str, Any]) -> RouteSpec:
    route = ROUTES.get((event["httpMethod"], event["resource"]))
    assert route is not None, f"no route {event['httpMethod']} {event['resource']} in template.yaml"
    return route


def with_path_parameter(event: dict[str, Any], name: str, value: str) -> dict[str, Any]:
    """The event with one path parameter changed, and its paths rebuilt as API Gateway would."""
    patched = copy.deepcopy(event)
    patched["pathParameters"][name] = value
    path = patched["resource"]
    for key, param in patched["pathParameters"].items():
        path = path.replace("{" + key + "}", param)
    patched["path"] = path
    patched["requestContext"]["path"] = f"/{patched['requestContext']['stage']}{path}"
    return patched


def with_authorizer_output(event: dict[str, Any], policy: dict[str, Any]) -> dict[str, Any]:
    """The event as API Gateway passes it on after this authorizer answer."""
    patched = copy.deepcopy(event)
    patched["requestContext"]["authorizer"] = {
        **policy["context"],
        "principalId": policy["principalId"],
        "integrationLatency": 17,
    }
    return patched


@dataclass
class FakeLambdaContext:
    function_name: str
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = ""
    aws_request_id: str = field(default_factory=lambda: secrets.token_hex(16))

    def __post_init__(self) -> None:
        if not self.invoked_function_arn:
            self.invoked_function_arn = f"arn:aws:lambda:{REGION}:123456789012:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return 10_000  # the template's default Timeout, untouched


@dataclass
class Reply:
    status: int
    body: Any
    content_type: str | None


@dataclass
class LocalStack:
    """The template's tables in the emulator, and its functions invoked in-process."""

    tables: dict[str, str]  # and queue URLs: every resource's Ref value by logical id
    admin_key: str
    admin_key_hash: str
    dynamodb: Any
    monkeypatch: pytest.MonkeyPatch

    @property
    def projects(self) -> DynamoProjectStore:
        return DynamoProjectStore(self.dynamodb, self.tables["ProjectsTable"])

    def create_project(self, name: str = "contract") -> CreatedKey:
        return AdminService(self.projects).create_project(name).key

    def invoke_function(self, spec: FunctionSpec, event: dict[str, Any]) -> Any:
        """Call the function's handler as Lambda would: its template environment, fresh caches."""
        env = resolve_environment(
            spec.environment, self.tables, {"AdminKeyHash": self.admin_key_hash}, TEMPLATE
        )
        for other in {name for s in SPECS.values() for name in s.environment} - set(env):
            self.monkeypatch.delenv(other, raising=False)
        for name, value in env.items():
            self.monkeypatch.setenv(name, value)
        module = importlib.import_module(spec.qualified_module)
        wiring.reset()
        handler: Callable[[dict[str, Any], Any], Any] = getattr(module, spec.handler_name)
        return handler(copy.deepcopy(event), FakeLambdaContext(function_name=f"kaibo-{spec.logical_id}"))

    def invoke(self, event: dict[str, Any]) -> Reply:
        """A proxy event, to the function template.yaml routes it to."""
        result = self.invoke_function(SPECS[route_of(event).function_logical_id], event)
        headers = {k.lower(): v for k, v in (result.get("headers") or {}).items()}
        multi = {k.lower(): v for k, v in (result.get("multiValueHeaders") or {}).items()}
        content_type = headers.get("content-type") or (multi.get("content-type") or [None])[0]
        text = result.get("body") or ""
        if (content_type or "").startswith(("text/", "application/zip")):  # event streams, the docs
            return Reply(result["statusCode"], text, content_type)
        return Reply(result["statusCode"], json.loads(text) if text else None, content_type)

    def authorize(self, event: dict[str, Any]) -> dict[str, Any]:
        policy: dict[str, Any] = self.invoke_function(SPECS[authorizer_function(TEMPLATE)], event)
        return policy


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    with start_emulator() as running:
        yield running


@pytest.fixture
def stack(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalStack]:
    """Fresh tables from template.yaml (unique suffix) and an AWS environment aimed at the emulator."""
    for name, value in {
        "AWS_ENDPOINT_URL": emulator.endpoint_url,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "POWERTOOLS_SERVICE_NAME": "kaibo",
        "POWERTOOLS_METRICS_NAMESPACE": "Kaibo",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "POWERTOOLS_DEV"):
        monkeypatch.delenv(name, raising=False)
    client = boto3.client(
        "dynamodb",
        endpoint_url=emulator.endpoint_url,
        region_name=REGION,
        config=Config(retries={"max_attempts": 1}),
    )
    sqs = boto3.client("sqs", endpoint_url=emulator.endpoint_url, region_name=REGION)
    suffix = secrets.token_hex(6)
    resources = {**create_tables(client, TEMPLATE, suffix), **create_queues(sqs, TEMPLATE, suffix)}
    kms = boto3.client("kms", endpoint_url=emulator.endpoint_url, region_name=REGION)
    resources |= {name: key_id for name, (key_id, _material) in create_keys(kms, TEMPLATE, {}).items()}
    admin_key, admin_key_hash = api_keys.issue_admin_key()
    yield LocalStack(resources, admin_key, admin_key_hash, client, monkeypatch)
    wiring.reset()


# --- Setup per sample --------------------------------------------------------------------------------


def _remember_first(stack: LocalStack, event: dict[str, Any]) -> dict[str, Any]:
    assert stack.invoke(load_event("remember.json")).status == 202
    return event


def _memory_exists(stack: LocalStack, event: dict[str, Any]) -> dict[str, Any]:
    remembered = stack.invoke(load_event("remember.json"))
    assert remembered.status == 202
    return with_path_parameter(event, "memory_id", remembered.body["memories"][0]["id"])


def _explainable_memory(stack: LocalStack, event: dict[str, Any]) -> dict[str, Any]:
    remembered = stack.invoke(load_event("remember.json"))
    assert remembered.status == 202
    patched = copy.deepcopy(event)
    patched["body"] = json.dumps({"memoryId": remembered.body["memories"][0]["id"]})
    return patched


def _job_exists(stack: LocalStack, event: dict[str, Any]) -> dict[str, Any]:
    remembered = stack.invoke(load_event("remember.json"))
    assert remembered.status == 202
    return with_path_parameter(event, "job_id", remembered.body["jobId"])


def _receipt_exists(stack: LocalStack, event: dict[str, Any]) -> dict[str, Any]:
    assert stack.invoke(load_event("remember.json")).status == 202
    dry_run = load_event("forget.json")
    real = copy.deepcopy(dry_run)
    real["body"] = json.dumps({**json.loads(dry_run["body"]), "dryRun": False})
    forgotten = stack.invoke(real)
    assert forgotten.status == 200, forgotten.body
    return with_path_parameter(event, "receipt_id", forgotten.body["receipt"]["id"])


def _project_exists(stack: LocalStack, event: dict[str, Any]) -> dict[str, Any]:
    return with_path_parameter(event, "project_id", stack.create_project().project_id)


def _key_exists(stack: LocalStack, event: dict[str, Any]) -> dict[str, Any]:
    return with_path_parameter(event, "key_id", stack.create_project().key_id)


def _webhook_exists(stack: LocalStack, event: dict[str, Any]) -> dict[str, Any]:
    created = stack.invoke(load_event("create-webhook.json"))
    assert created.status == 201, created.body
    return with_path_parameter(event, "webhook_id", created.body["id"])


PREPARE: dict[str, Callable[[LocalStack, dict[str, Any]], dict[str, Any]]] = {
    "list-streams.json": _remember_first,
    "list-events.json": _remember_first,
    "create-key.json": _project_exists,
    "revoke-key.json": _key_exists,
    "recall.json": _remember_first,
    "recall-stream.json": _remember_first,
    "get-memory.json": _memory_exists,
    "explain.json": _explainable_memory,
    "get-job.json": _job_exists,
    "forget.json": _remember_first,
    "get-receipt.json": _receipt_exists,
    "get-webhook.json": _webhook_exists,
    "delete-webhook.json": _webhook_exists,
    "rotate-webhook-secret.json": _webhook_exists,
    "test-webhook.json": _webhook_exists,
    "webhook-deliveries.json": _webhook_exists,
}


def assert_error_shape(reply: Reply, code: str | None = None) -> None:
    assert reply.content_type == "application/json"
    assert set(reply.body) == {"error"}
    error = reply.body["error"]
    assert set(error) == {"code", "message", "details"}
    assert re.fullmatch(r"[a-z][a-z0-9_]*", error["code"]), error["code"]
    assert isinstance(error["message"], str)
    assert error["message"]
    assert isinstance(error["details"], dict)
    if code is not None:
        assert error["code"] == code


# --- The samples themselves ---------------------------------------------------------------------------


def test_given_events_dir_then_every_sample_has_an_expected_outcome() -> None:
    on_disk = {path.name for path in EVENTS_DIR.glob("*.json")}
    documented = set(EXPECTED_STATUS) | AUTHORIZER_SAMPLES | TRIGGER_SAMPLES
    assert on_disk - documented == set(), "samples without an expected outcome (add them to EXPECTED_STATUS)"
    assert documented - on_disk == set(), "expected outcomes of samples that do not exist"
    assert set(PREPARE) <= set(EXPECTED_STATUS)
    assert set(EXPECTED_ERROR_CODE) == {name for name, status in EXPECTED_STATUS.items() if status >= 400}


def test_given_the_template_then_every_route_has_a_sample() -> None:
    sampled = {(load_event(name)["httpMethod"], load_event(name)["resource"]) for name in proxy_samples()}
    assert set(ROUTES) <= sampled, f"routes without a sample event: {sorted(set(ROUTES) - sampled)}"


@pytest.mark.parametrize("name", proxy_samples())
def test_given_a_sample_then_it_is_what_api_gateway_delivers_after_the_authorizer(name: str) -> None:
    event = load_event(name)
    route = route_of(event)
    context = event["requestContext"]
    path = event["resource"]
    for key, value in (event["pathParameters"] or {}).items():
        path = path.replace("{" + key + "}", value)
    assert "{" not in path, "a path parameter of the resource is missing from pathParameters"
    assert event["path"] == path
    assert context["path"] == f"/{context['stage']}{path}"
    assert (context["resourcePath"], context["httpMethod"]) == (event["resource"], event["httpMethod"])
    assert event["isBase64Encoded"] is False
    assert event["body"] is None or isinstance(json.loads(event["body"]), dict)
    assert {k: [v] for k, v in event["headers"].items()} == event["multiValueHeaders"]
    query = event["queryStringParameters"] or {}
    assert {k: [v] for k, v in query.items()} == (event["multiValueQueryStringParameters"] or {})
    if not route.authorized:  # the docs: no key, no authorizer context
        assert "Authorization" not in event["headers"]
        assert "authorizer" not in context
        return
    assert event["headers"]["Authorization"].startswith("Bearer kb_")
    authorizer = context["authorizer"]
    assert authorizer["principalId"] == authorizer["keyId"]
    given = Principal.from_context(authorizer)
    if event["resource"].startswith("/v1/admin/"):
        assert given == Principal(role="admin", key_id="admin", project_id=None, scopes=frozenset({"admin"}))
    else:
        assert given.role == "project"
        assert given.scopes == {"read", "write", "forget"}
    # Exactly what the authorizer puts there (plus API Gateway's own keys), nothing invented.
    assert set(authorizer) - GATEWAY_CONTEXT_KEYS == set(given.context())


@pytest.mark.parametrize("name", proxy_samples())
def test_given_a_sample_when_its_function_is_invoked_then_it_answers_the_documented_status(
    stack: LocalStack, name: str
) -> None:
    event = load_event(name)
    prepare = PREPARE.get(name)
    if prepare is not None:
        event = prepare(stack, event)

    reply = stack.invoke(event)

    assert reply.status == EXPECTED_STATUS[name], reply.body
    if reply.status >= 400:
        assert_error_shape(reply, EXPECTED_ERROR_CODE[name])


# --- What the successful samples did -----------------------------------------------------------------


def test_given_remember_sample_when_invoked_twice_then_it_appends_once_and_replays(stack: LocalStack) -> None:
    first = stack.invoke(load_event("remember.json"))
    again = stack.invoke(load_event("remember.json"))

    assert first.status == again.status == 202
    events = first.body["events"]
    assert [(e["stream"], e["seq"], e["replayed"]) for e in events] == [
        ("chat-42", 1, False),
        ("chat-42", 2, False),
    ]
    assert events[1]["prevHash"] == events[0]["hash"]
    assert all(re.fullmatch(r"[0-9a-f]{64}", e["hash"]) for e in events)
    assert [(e["id"], e["replayed"]) for e in again.body["events"]] == [(e["id"], True) for e in events]


def test_given_remembered_events_when_streams_and_events_are_listed_then_they_show_them(
    stack: LocalStack,
) -> None:
    remembered = stack.invoke(load_event("remember.json")).body["events"]

    streams = stack.invoke(load_event("list-streams.json"))
    listed = stack.invoke(load_event("list-events.json"))

    assert streams.body["streams"] == [{"stream": "chat-42", "seq": 2, "hash": remembered[-1]["hash"]}]
    assert [(e["seq"], e["hash"]) for e in listed.body["events"]] == [
        (e["seq"], e["hash"]) for e in remembered
    ]
    assert listed.body.get("nextFromSeq") is None


def test_given_admin_samples_then_the_project_and_keys_they_make_authorize(stack: LocalStack) -> None:
    created = stack.invoke(load_event("create-project.json"))
    assert created.status == 201
    project = created.body["projectId"]
    assert re.fullmatch(r"prj_[0-9A-Z]{26}", project)
    assert set(created.body["scopes"]) == {"read", "write", "forget"}

    key = stack.invoke(with_path_parameter(load_event("create-key.json"), "project_id", project))
    assert key.status == 201
    assert key.body["scopes"] == ["read"]
    read_only = stack.authorize(
        {**load_event("authorizer.json"), "authorizationToken": f"Bearer {key.body['apiKey']}"}
    )
    assert read_only["context"] == {
        "role": "project",
        "keyId": key.body["keyId"],
        "projectId": project,
        "scopes": "read",
    }

    revoked = stack.invoke(with_path_parameter(load_event("revoke-key.json"), "key_id", key.body["keyId"]))
    assert revoked.status == 204
    stored = stack.projects.get_key(key.body["keyId"])
    assert stored is not None
    assert stored.revoked
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        stack.authorize(
            {**load_event("authorizer.json"), "authorizationToken": f"Bearer {key.body['apiKey']}"}
        )


@pytest.mark.parametrize(
    ("name", "code"), [("create-key.json", "project_not_found"), ("revoke-key.json", "key_not_found")]
)
def test_given_admin_samples_without_their_setup_then_they_answer_not_found(
    stack: LocalStack, name: str, code: str
) -> None:
    reply = stack.invoke(load_event(name))

    assert reply.status == 404
    assert_error_shape(reply, code)


# --- The authorizer sample ---------------------------------------------------------------------------


def test_given_authorizer_sample_as_is_when_invoked_then_its_unknown_key_is_refused(
    stack: LocalStack,
) -> None:
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        stack.authorize(load_event("authorizer.json"))


def test_given_authorizer_sample_with_a_live_key_then_it_allows_project_routes_with_context(
    stack: LocalStack,
) -> None:
    created = stack.create_project()
    event = {**load_event("authorizer.json"), "authorizationToken": f"Bearer {created.api_key}"}

    policy = stack.authorize(event)

    api_arn = event["methodArn"].split("/", 1)[0]
    assert policy["principalId"] == created.key_id
    assert policy["policyDocument"]["Statement"] == [
        {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": f"{api_arn}/*/*/v1/*"},
        {"Action": "execute-api:Invoke", "Effect": "Deny", "Resource": f"{api_arn}/*/*/v1/admin/*"},
    ]
    assert policy["context"] == {
        "role": "project",
        "keyId": created.key_id,
        "projectId": created.project_id,
        "scopes": "forget read write",
    }


def test_given_authorizer_sample_with_the_admin_key_then_it_allows_only_admin_routes(
    stack: LocalStack,
) -> None:
    event = {**load_event("authorizer.json"), "authorizationToken": f"Bearer {stack.admin_key}"}

    policy = stack.authorize(event)

    api_arn = event["methodArn"].split("/", 1)[0]
    assert policy["policyDocument"]["Statement"] == [
        {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": f"{api_arn}/*/*/v1/admin/*"}
    ]
    assert policy["context"] == {"role": "admin", "keyId": "admin", "scopes": "admin"}


def test_given_the_authorizers_answer_when_passed_on_then_the_handler_serves_that_project(
    stack: LocalStack,
) -> None:
    created = stack.create_project()
    policy = stack.authorize(
        {**load_event("authorizer.json"), "authorizationToken": f"Bearer {created.api_key}"}
    )

    remembered = stack.invoke(with_authorizer_output(load_event("remember.json"), policy))
    listed = stack.invoke(with_authorizer_output(load_event("list-streams.json"), policy))
    sample_project = stack.invoke(load_event("list-streams.json"))

    assert remembered.status == 202
    assert [s["stream"] for s in listed.body["streams"]] == ["chat-42"]
    assert sample_project.body["streams"] == [], "another project's streams leaked"


# --- Queue and schedule samples ------------------------------------------------------------------------


def test_given_the_structure_sample_with_a_real_job_then_the_batch_succeeds_and_the_job_is_done(
    stack: LocalStack,
) -> None:
    remembered = stack.invoke(load_event("remember.json"))
    job_id = remembered.body["jobId"]
    project = load_event("remember.json")["requestContext"]["authorizer"]["projectId"]
    event = load_event("structure-jobs.json")
    event["Records"][0]["body"] = json.dumps({"v": 1, "projectId": project, "jobId": job_id})
    result = stack.invoke_function(SPECS["StructureFunction"], event)
    assert result == {"batchItemFailures": []}
    job = stack.invoke(with_path_parameter(load_event("get-job.json"), "job_id", job_id))
    assert job.body["status"] == "done"
    assert len(job.body["memoryIds"]) >= 2  # one or more memories per remembered event


def test_given_the_sample_job_that_exists_nowhere_then_the_structure_function_acks_it(
    stack: LocalStack,
) -> None:
    """An unknown job is not retried forever: there is nothing to structure."""
    result = stack.invoke_function(SPECS["StructureFunction"], load_event("structure-jobs.json"))
    assert result == {"batchItemFailures": []}


def test_given_the_schedule_sample_then_the_sweeper_runs_and_reports_what_it_requeued(
    stack: LocalStack,
) -> None:
    result = stack.invoke_function(SPECS["SweeperFunction"], load_event("sweep.json"))
    assert result == {"pending": 0, "requeued": 0, "complete": True}


def test_given_the_purge_schedule_sample_then_the_purge_runs_and_reports_what_it_erased(
    stack: LocalStack,
) -> None:
    result = stack.invoke_function(SPECS["PurgeFunction"], load_event("purge.json"))
    assert result == {"applied": 0, "entries": 0, "memories": 0, "events": 0, "complete": True}
