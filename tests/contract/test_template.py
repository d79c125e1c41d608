"""template.yaml: it lints, and it says what the architecture needs where cfn-lint cannot tell.

cfn-lint and ``sam validate --lint`` check the template's syntax and types. The tests below
pin the decisions that a valid template can still get wrong: which function serves which
route, how the authorizer is wired, each function's exact IAM actions on exact tables (least
privilege), the tables' durability settings, and the gateway responses' error shape.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from kaibo_core.adapters.dynamodb_events import STREAM_HEADS_INDEX
from kaibo_core.core import api_keys
from kaibo_core.runtime.observability import METRICS_NAMESPACE
from kaibo_local.template import (
    REPO_ROOT,
    TemplateError,
    authorizer_function,
    function_property,
    function_specs,
    parse_template,
    resolve_environment,
    resources_of_type,
    table_specs,
)
from kaibo_local.workers import triggers

TEMPLATE_PATH = REPO_ROOT / "template.yaml"
TOOL_TIMEOUT_SECONDS = 180

EXPECTED_ROUTES: dict[tuple[str, str], str] = {
    ("POST", "/v1/admin/projects"): "AdminFunction",
    ("POST", "/v1/admin/projects/{project_id}/keys"): "AdminFunction",
    ("DELETE", "/v1/admin/keys/{key_id}"): "AdminFunction",
    ("POST", "/v1/remember"): "RememberFunction",
    ("GET", "/v1/streams"): "EventsFunction",
    ("GET", "/v1/streams/{stream}/events"): "EventsFunction",
    ("POST", "/v1/recall"): "RecallFunction",
    ("GET", "/v1/memories/{memory_id}"): "MemoriesFunction",
    ("POST", "/v1/explain"): "MemoriesFunction",
    ("GET", "/v1/jobs/{job_id}"): "MemoriesFunction",
    ("GET", "/v1/ledger"): "MemoriesFunction",
    ("GET", "/v1/receipts/{receipt_id}"): "MemoriesFunction",
    ("POST", "/v1/forget"): "ForgetFunction",
    ("GET", "/openapi.json"): "DocsFunction",
    ("GET", "/docs/llms.txt"): "DocsFunction",
    ("GET", "/docs/llms-full.txt"): "DocsFunction",
    ("GET", "/docs/docs.zip"): "DocsFunction",
    ("POST", "/v1/webhooks"): "WebhooksFunction",
    ("GET", "/v1/webhooks"): "WebhooksFunction",
    ("GET", "/v1/webhooks/{webhook_id}"): "WebhooksFunction",
    ("DELETE", "/v1/webhooks/{webhook_id}"): "WebhooksFunction",
    ("POST", "/v1/webhooks/{webhook_id}/rotate-secret"): "WebhooksFunction",
    ("POST", "/v1/webhooks/{webhook_id}/test"): "WebhooksFunction",
    ("GET", "/v1/webhooks/{webhook_id}/deliveries"): "WebhooksFunction",
}

#: Function → the exact (action, resource) pairs it is allowed; resources as "Table" or
#: "Table/index/Name". Anything more is a least-privilege regression; anything less breaks it.
EXPECTED_PERMISSIONS: dict[str, set[tuple[str, str]]] = {
    "AuthorizerFunction": {("dynamodb:GetItem", "ProjectsTable")},
    "AdminFunction": {
        ("dynamodb:GetItem", "ProjectsTable"),
        ("dynamodb:PutItem", "ProjectsTable"),
        ("dynamodb:UpdateItem", "ProjectsTable"),
        ("dynamodb:ConditionCheckItem", "ProjectsTable"),
        # A new project's API key, in the usage plan (per-project throttles); GET finds the key an
        # earlier try made (adapters/apigateway_usage_plans.py).
        ("apigateway:POST", "apigateway:/apikeys if ProjectThrottlesOn"),
        ("apigateway:GET", "apigateway:/apikeys if ProjectThrottlesOn"),
        ("apigateway:POST", "apigateway:/usageplans/${ProjectUsagePlan}/keys if ProjectThrottlesOn"),
    },
    "RememberFunction": {
        ("dynamodb:GetItem", "EventsTable"),
        ("dynamodb:PutItem", "EventsTable"),
        ("dynamodb:BatchGetItem", "EventsTable"),
        ("dynamodb:PutItem", "IdempotencyTable"),
        ("dynamodb:PutItem", "MemoriesTable"),
        ("dynamodb:BatchGetItem", "MemoriesTable"),
        ("dynamodb:ConditionCheckItem", "MemoriesTable"),  # a chunk before the memory item
        ("dynamodb:PutItem", "TermIndexTable"),
        ("dynamodb:UpdateItem", "TermIndexTable"),
        ("dynamodb:GetItem", "TermIndexTable"),  # the index marker, read by a retry
        ("dynamodb:DeleteItem", "TermIndexTable"),  # and deleted once the index is done
        ("dynamodb:PutItem", "JobsTable"),
        ("dynamodb:GetItem", "JobsTable"),
        ("sqs:SendMessage", "StructuringQueue"),
    },
    "RecallFunction": {
        ("dynamodb:Query", "TermIndexTable"),
        ("dynamodb:BatchGetItem", "MemoriesTable"),
        ("dynamodb:BatchGetItem", "EventsTable"),  # context: the neighbouring events' ids (read only)
    },
    "MemoriesFunction": {
        ("dynamodb:GetItem", "MemoriesTable"),
        ("dynamodb:BatchGetItem", "MemoriesTable"),
        ("dynamodb:GetItem", "JobsTable"),
        ("dynamodb:GetItem", "LedgerTable"),
        ("dynamodb:Query", "LedgerTable"),
    },
    "ForgetFunction": {
        ("dynamodb:GetItem", "MemoriesTable"),
        ("dynamodb:BatchGetItem", "MemoriesTable"),
        ("dynamodb:PutItem", "MemoriesTable"),
        ("dynamodb:UpdateItem", "MemoriesTable"),
        ("dynamodb:Query", "TermIndexTable"),
        ("dynamodb:UpdateItem", "TermIndexTable"),
        ("dynamodb:DeleteItem", "TermIndexTable"),
        ("dynamodb:Query", "EventsTable"),
        ("dynamodb:GetItem", "EventsTable"),  # a keyed retry finishing a dead forget's placeholders
        ("dynamodb:GetItem", "LedgerTable"),
        ("dynamodb:PutItem", "LedgerTable"),
        ("dynamodb:UpdateItem", "LedgerTable"),
        # webhook events in the outbox, in the same transaction, then queued for fan-out
        ("dynamodb:GetItem", "WebhooksTable"),
        ("dynamodb:PutItem", "WebhooksTable"),
        ("dynamodb:UpdateItem", "WebhooksTable"),
        ("sqs:SendMessage", "WebhookQueue"),
        # a keyed forget's record keeps its reason salt encrypted; a retry decrypts it (salts only)
        ("kms:Encrypt", "WebhookSecretsKey for purpose forget-key-salt"),
        ("kms:Decrypt", "WebhookSecretsKey for purpose forget-key-salt"),
    },
    "StructureFunction": {
        ("dynamodb:BatchGetItem", "EventsTable"),
        ("dynamodb:GetItem", "MemoriesTable"),
        ("dynamodb:BatchGetItem", "MemoriesTable"),
        ("dynamodb:PutItem", "MemoriesTable"),
        ("dynamodb:UpdateItem", "MemoriesTable"),
        ("dynamodb:ConditionCheckItem", "MemoriesTable"),
        ("dynamodb:Query", "TermIndexTable"),
        ("dynamodb:GetItem", "TermIndexTable"),
        ("dynamodb:PutItem", "TermIndexTable"),
        ("dynamodb:UpdateItem", "TermIndexTable"),
        ("dynamodb:DeleteItem", "TermIndexTable"),
        ("dynamodb:UpdateItem", "JobsTable"),
        ("dynamodb:GetItem", "ProjectsTable"),
        # Only with Structurer=bedrock: the model of this region, or an inference profile and the
        # models it routes to (any region, only through that profile; a global one's have no region).
        ("bedrock:InvokeModel", "foundation-model/${BedrockModelId} if BedrockStructurer"),
        ("bedrock:InvokeModel", "inference-profile/${BedrockModelId} if BedrockStructurer"),
        (
            "bedrock:InvokeModel",
            "any region: foundation-model/* via inference-profile/${BedrockModelId} if BedrockStructurer",
        ),
        (
            "bedrock:InvokeModel",
            "no region: foundation-model/* via inference-profile/${BedrockModelId} if BedrockStructurer",
        ),
        # webhook events in the outbox, in the same transaction, then queued for fan-out
        ("dynamodb:GetItem", "WebhooksTable"),
        ("dynamodb:PutItem", "WebhooksTable"),
        ("dynamodb:UpdateItem", "WebhooksTable"),
        ("sqs:SendMessage", "WebhookQueue"),
    },
    "PurgeFunction": {
        ("dynamodb:Query", "LedgerTable/index/PurgeDue"),
        ("dynamodb:Query", "LedgerTable/index/Unapplied"),
        ("dynamodb:UpdateItem", "LedgerTable"),
        ("dynamodb:DeleteItem", "LedgerTable"),  # a purged forget's idempotency key record
        ("dynamodb:GetItem", "MemoriesTable"),
        ("dynamodb:BatchGetItem", "MemoriesTable"),
        ("dynamodb:PutItem", "MemoriesTable"),
        ("dynamodb:UpdateItem", "MemoriesTable"),
        ("dynamodb:UpdateItem", "TermIndexTable"),
        ("dynamodb:DeleteItem", "TermIndexTable"),
        ("dynamodb:BatchGetItem", "TermIndexTable"),  # index markers of unfinished indexes
        ("dynamodb:GetItem", "EventsTable"),  # the events a dead forget never wrote placeholders for
        ("dynamodb:UpdateItem", "EventsTable"),
        # an entry older than stored event locations: its events searched for, keys and ids only
        ("dynamodb:Query", "EventsTable"),
        ("dynamodb:Query", "EventsTable/index/StreamHeads"),
    },
    "DocsFunction": set(),
    "SweeperFunction": {
        ("dynamodb:Query", "JobsTable/index/PendingJobs"),
        ("dynamodb:UpdateItem", "JobsTable"),
        ("sqs:SendMessage", "StructuringQueue"),
    },
    "EventsFunction": {
        ("dynamodb:Query", "EventsTable"),
        ("dynamodb:Query", "EventsTable/index/StreamHeads"),
    },
    "WebhooksFunction": {
        ("dynamodb:GetItem", "WebhooksTable"),
        ("dynamodb:PutItem", "WebhooksTable"),
        ("dynamodb:UpdateItem", "WebhooksTable"),
        ("dynamodb:DeleteItem", "WebhooksTable"),
        ("dynamodb:Query", "WebhooksTable"),
        ("kms:Encrypt", "WebhookSecretsKey for webhook contexts"),
        ("sqs:SendMessage", "WebhookQueue"),
    },
    "WebhookDispatchFunction": {
        ("dynamodb:GetItem", "WebhooksTable"),
        ("dynamodb:PutItem", "WebhooksTable"),
        ("dynamodb:UpdateItem", "WebhooksTable"),
        ("dynamodb:Query", "WebhooksTable"),
        ("dynamodb:Query", "WebhooksTable/index/Unrelayed"),
        ("kms:Decrypt", "WebhookSecretsKey for webhook contexts"),
        ("sqs:SendMessage", "WebhookQueue"),
        ("sqs:SendMessage", "WebhookDeadLetterQueue"),
    },
}

#: DynamoDB actions that change data: readers must have none.
WRITE_ACTIONS = {
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
    "dynamodb:PartiQLInsert",
    "dynamodb:PartiQLUpdate",
    "dynamodb:PartiQLDelete",
}

#: Gateway response type → (status code or None to keep API Gateway's, error code).
EXPECTED_GATEWAY_RESPONSES: dict[str, tuple[str | None, str]] = {
    "UNAUTHORIZED": ("401", "unauthorized"),
    "ACCESS_DENIED": ("403", "forbidden"),
    # No usage key from the authorizer, or one the usage plan lacks: the deployment's fault.
    "INVALID_API_KEY": ("500", "internal_error"),
    "API_CONFIGURATION_ERROR": ("500", "internal_error"),
    "MISSING_AUTHENTICATION_TOKEN": ("404", "not_found"),
    "RESOURCE_NOT_FOUND": ("404", "not_found"),
    "THROTTLED": ("429", "rate_limited"),
    "QUOTA_EXCEEDED": ("429", "quota_exceeded"),
    "REQUEST_TOO_LARGE": ("413", "request_too_large"),
    "BAD_REQUEST_BODY": ("400", "bad_request"),
    "AUTHORIZER_FAILURE": ("500", "internal_error"),
    "AUTHORIZER_CONFIGURATION_ERROR": ("500", "internal_error"),
    "INTEGRATION_TIMEOUT": ("504", "timeout"),
    "DEFAULT_4XX": (None, "bad_request"),
    "DEFAULT_5XX": (None, "internal_error"),
}

EXPECTED_TABLE_KEYS: dict[str, list[tuple[str, str, str]]] = {
    # table → [(attribute, type, key type)]
    "EventsTable": [("pk", "S", "HASH"), ("seq", "N", "RANGE")],
    "IdempotencyTable": [("pk", "S", "HASH")],
    "ProjectsTable": [("pk", "S", "HASH")],
    "MemoriesTable": [("pk", "S", "HASH")],
    "TermIndexTable": [("pk", "S", "HASH"), ("sk", "S", "RANGE")],
    "JobsTable": [("pk", "S", "HASH")],
    "LedgerTable": [("pk", "S", "HASH"), ("sk", "S", "RANGE")],
    "WebhooksTable": [("pk", "S", "HASH"), ("sk", "S", "RANGE")],
}


def api(template: Mapping[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = template["Resources"]["KaiboApi"]["Properties"]
    return props


def function_ids(template: Mapping[str, Any]) -> list[str]:
    return [logical_id for logical_id, _ in resources_of_type(template, "AWS::Serverless::Function")]


#: A Bedrock ARN of the template: its region (this one, any, or none), its account (none for a
#: foundation model), and the model or profile (a parameter, or any).
_BEDROCK_ARN = re.compile(
    r"arn:\$\{AWS::Partition\}:bedrock:(?P<region>\$\{AWS::Region\}|\*|):(?P<account>\$\{AWS::AccountId\})?:"
    r"(?P<resource>(?:foundation-model|inference-profile)/(?:\$\{\w+\}|\*))"
)
#: An API Gateway management ARN of this region: ``apigateway:<path>`` (``/apikeys``, ...).
_APIGATEWAY_ARN = re.compile(r"arn:\$\{AWS::Partition\}:apigateway:\$\{AWS::Region\}::(?P<path>/[\w/${}]+)")
_BEDROCK_REGIONS = {"${AWS::Region}": "", "*": "any region: ", "": "no region: "}


def resource_name(resource: Any) -> str:
    """``!GetAtt T.Arn`` → "T"; ``!Sub "${T.Arn}/index/I"`` → "T/index/I"; an API Gateway ARN →
    "apigateway:/apikeys" (its path, parameters left as ``${Name}``); a Bedrock ARN →
    "foundation-model/${Param}" in this region (or "any region: …", "no region: …"); anything else
    fails."""
    if isinstance(resource, dict) and "Fn::GetAtt" in resource:
        table, attribute = resource["Fn::GetAtt"]
        assert attribute == "Arn", resource
        return str(table)
    if isinstance(resource, dict) and isinstance(resource.get("Fn::Sub"), str):
        bedrock = _BEDROCK_ARN.fullmatch(resource["Fn::Sub"])
        if bedrock:
            # A profile is this account's, in this region; a foundation model belongs to no account.
            if bedrock["resource"].startswith("inference-profile/"):
                assert bedrock["region"] == "${AWS::Region}", resource
                assert bedrock["account"], resource
            else:
                assert not bedrock["account"], resource
            return _BEDROCK_REGIONS[bedrock["region"]] + bedrock["resource"]
        apigateway = _APIGATEWAY_ARN.fullmatch(resource["Fn::Sub"])
        if apigateway:
            return f"apigateway:{apigateway['path']}"
        match = re.fullmatch(r"\$\{(\w+)\.Arn\}(/index/\w+)", resource["Fn::Sub"])
        assert match, f"unexpected resource {resource}"
        return match.group(1) + match.group(2)
    raise AssertionError(f"resource {resource!r} is not an exact table or index ARN")


def permissions(template: Mapping[str, Any], function: str) -> set[tuple[str, str]]:
    policies = template["Resources"][function]["Properties"].get("Policies", [])
    pairs: set[tuple[str, str]] = set()
    for policy in policies:
        assert isinstance(policy, dict), (
            f"{function}: {policy!r} is a managed/SAM policy, not a statement list"
        )
        assert set(policy) == {"Statement"}, f"{function}: {sorted(policy)} (only inline Statement lists)"
        for listed in policy["Statement"]:
            # A statement granted only under a template condition: "… if Condition".
            statement, only_if = listed, ""
            if set(listed) == {"Fn::If"}:
                condition, statement, otherwise = listed["Fn::If"]
                assert otherwise == {"Ref": "AWS::NoValue"}, f"{function}: two grants in one !If"
                only_if = f" if {condition}"
            assert statement["Effect"] == "Allow"
            assert set(statement) <= {"Effect", "Action", "Resource", "Condition"}, statement
            only_via = condition_suffix(statement["Condition"]) if "Condition" in statement else ""
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            resources = (
                statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
            )
            for action in actions:
                assert "*" not in action, f"{function}: wildcard action {action}"
                for resource in resources:
                    pairs.add((action, resource_name(resource) + only_via + only_if))
    return pairs


def condition_suffix(condition: Any) -> str:
    """The conditions a grant may carry: the call comes through one inference profile
    (``bedrock:InferenceProfileArn``) → " via inference-profile/${Param}"; or a KMS call's
    encryption context names one purpose (``kms:EncryptionContext:purpose``) → " for purpose P", or
    names a webhook (``Null: kms:EncryptionContext:webhook = false``) → " for webhook contexts"."""
    ((operator, keys),) = condition.items()
    ((key, value),) = keys.items()
    if operator == "Null":
        assert (key, value) == ("kms:EncryptionContext:webhook", "false"), condition
        return " for webhook contexts"
    assert operator == "StringEquals", condition
    if key == "kms:EncryptionContext:purpose":
        assert isinstance(value, str), condition
        return f" for purpose {value}"
    assert key == "bedrock:InferenceProfileArn", condition
    name = resource_name(value)
    assert name.startswith("inference-profile/"), condition
    return f" via {name}"


def tool_env() -> dict[str, str]:
    """What the tools need, and no AWS credentials: both run offline."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "SAM_CLI_TELEMETRY": "0",
    }
    for name in ("LANG", "LC_ALL", "SYSTEMROOT"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def run_tool(tools_bin: Path, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    executable = tools_bin / tool
    assert executable.is_file(), f"{tool} is missing from {tools_bin} (see requirements-tools.txt)"
    return subprocess.run(
        [str(executable), *args],
        cwd=REPO_ROOT,
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_SECONDS,
        check=False,
    )


# --- Linters ---------------------------------------------------------------------------------------


def test_given_the_template_when_cfn_lint_runs_then_it_reports_nothing(tools_bin: Path) -> None:
    result = run_tool(tools_bin, "cfn-lint", "--", str(TEMPLATE_PATH))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "", result.stdout


def test_given_the_template_when_sam_validate_lints_it_then_it_is_valid(tools_bin: Path) -> None:
    # Run from the repository root, so samconfig.toml is read (and must parse) too.
    result = run_tool(tools_bin, "sam", "validate", "--lint", "--template-file", str(TEMPLATE_PATH))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "is a valid SAM Template" in output
    assert not re.search(r"\[[EWI]\d{4}", output), output


# --- Loader (local/kaibo_local/template.py) ---------------------------------------------------------


def test_given_short_form_tags_when_parsed_then_they_become_long_form_intrinsics() -> None:
    parsed = parse_template(
        "AWSTemplateFormatVersion: 2010-09-09\n"
        "Resources:\n"
        "  R:\n"
        "    Type: X\n"
        "    Properties:\n"
        "      a: !Ref P\n"
        "      b: !GetAtt T.StreamArn\n"
        "      c: !GetAtt [T, Arn]\n"
        "      d: !Sub '${T.Arn}/index/I'\n"
        "      e: !If [C, !Select [0, !Split [',', 'x,y']], !Ref 'AWS::NoValue']\n"
        "      f: !Not [!Equals [!Condition C, 'true']]\n"
        "      g: !GetAZs ''\n"
    )
    assert parsed["AWSTemplateFormatVersion"] == "2010-09-09"  # a string, as CloudFormation reads it
    props = parsed["Resources"]["R"]["Properties"]
    assert props["a"] == {"Ref": "P"}
    assert props["b"] == {"Fn::GetAtt": ["T", "StreamArn"]}
    assert props["c"] == {"Fn::GetAtt": ["T", "Arn"]}
    assert props["d"] == {"Fn::Sub": "${T.Arn}/index/I"}
    assert props["e"] == {
        "Fn::If": ["C", {"Fn::Select": [0, {"Fn::Split": [",", "x,y"]}]}, {"Ref": "AWS::NoValue"}]
    }
    assert props["f"] == {"Fn::Not": [{"Fn::Equals": [{"Condition": "C"}, "true"]}]}
    assert props["g"] == {"Fn::GetAZs": ""}


def test_given_a_document_without_resources_when_parsed_then_it_is_refused() -> None:
    with pytest.raises(TemplateError):
        parse_template("Parameters: {}\n")


def test_given_the_template_then_each_function_gets_its_own_timeout_else_the_global_one(
    template: dict[str, Any],
) -> None:
    default = template["Globals"]["Function"]["Timeout"]
    for spec in function_specs(template):
        own = template["Resources"][spec.logical_id]["Properties"].get("Timeout")
        assert spec.timeout_seconds == float(own or default), spec.logical_id
    assert {spec.timeout_seconds for spec in function_specs(template)} >= {300.0, float(default)}


def function_with(**properties: Any) -> dict[str, Any]:
    function_properties = {"CodeUri": "f/", "Handler": "app.h", **properties}
    return {"Resources": {"F": {"Type": "AWS::Serverless::Function", "Properties": function_properties}}}


def test_given_no_timeout_anywhere_then_lambdas_default_of_3_seconds() -> None:
    assert [spec.timeout_seconds for spec in function_specs(function_with())] == [3.0]


@pytest.mark.parametrize("timeout", [0, -1, "10", True, None])
def test_given_a_timeout_that_is_not_a_positive_number_then_the_template_is_refused(timeout: Any) -> None:
    template = function_with(Timeout=timeout)
    if timeout is None:
        assert function_specs(template)[0].timeout_seconds == 3.0  # YAML's empty value: not set
        return
    with pytest.raises(TemplateError, match="Timeout"):
        function_specs(template)


# --- Routes and authorizer --------------------------------------------------------------------------


def test_given_the_template_then_every_route_is_served_by_its_function(template: dict[str, Any]) -> None:
    routes = [route for spec in function_specs(template) for route in spec.routes]
    served = {(route.method, route.path): route.function_logical_id for route in routes}
    assert len(served) == len(routes), "a route is declared twice"
    assert served == EXPECTED_ROUTES


#: Routes served without a key: the docs (#17).
PUBLIC_ROUTES = {
    ("GET", "/openapi.json"),
    ("GET", "/docs/llms.txt"),
    ("GET", "/docs/llms-full.txt"),
    ("GET", "/docs/docs.zip"),
}


def test_given_the_template_then_every_route_is_on_kaibo_api_behind_the_authorizer_but_the_docs(
    template: dict[str, Any],
) -> None:
    background = {"SQS", "Schedule"}  # the structure queue's consumer and the sweeper: no routes
    for spec in function_specs(template):
        for name, event in (template["Resources"][spec.logical_id]["Properties"].get("Events") or {}).items():
            if event["Type"] in background:
                continue
            assert event["Type"] == "Api", f"{spec.logical_id}.{name}"
            assert event["Properties"]["RestApiId"] == {"Ref": "KaiboApi"}, f"{spec.logical_id}.{name}"
        public = {(route.method, route.path) for route in spec.routes if not route.authorized}
        assert public <= PUBLIC_ROUTES, spec.logical_id  # only the docs are served without a key
    assert not any("{proxy+}" in path for _, path in EXPECTED_ROUTES)


def test_given_the_api_then_the_token_authorizer_guards_it(template: dict[str, Any]) -> None:
    auth = api(template)["Auth"]
    assert auth["DefaultAuthorizer"] == "KeyAuthorizer"
    assert auth["AddDefaultAuthorizerToCorsPreflight"] is False
    authorizer = auth["Authorizers"]["KeyAuthorizer"]
    assert authorizer["FunctionPayloadType"] == "TOKEN"
    assert authorizer["FunctionArn"] == {"Fn::GetAtt": ["AuthorizerFunction", "Arn"]}
    identity = authorizer["Identity"]
    assert identity["Header"] == "Authorization"
    assert identity["ReauthorizeEvery"] == 60
    assert authorizer_function(template) == "AuthorizerFunction"
    assert not template["Resources"]["AuthorizerFunction"]["Properties"].get("Events")


def test_given_the_header_check_then_it_passes_real_keys_and_refuses_malformed_headers(
    template: dict[str, Any],
) -> None:
    pattern = re.compile(
        api(template)["Auth"]["Authorizers"]["KeyAuthorizer"]["Identity"]["ValidationExpression"]
    )
    admin_key, _ = api_keys.issue_admin_key()
    for key in (api_keys.issue_key().api_key, admin_key):
        for scheme in ("Bearer", "bearer", "BEARER", "bEaReR"):  # case-insensitive (RFC 9110)
            assert pattern.fullmatch(f"{scheme} {key}"), (scheme, key)
    for header in (
        "",
        "Bearer",
        "Bearer ",
        "Basic dXNlcjpwYXNz",
        "Bearer kb x",
        "Bearer kb_x\n",
    ):
        assert not pattern.fullmatch(header), repr(header)


def test_given_the_api_then_it_is_a_traced_throttled_rest_api_serving_zip(template: dict[str, Any]) -> None:
    props = api(template)
    assert template["Resources"]["KaiboApi"]["Type"] == "AWS::Serverless::Api"
    assert props["StageName"] == {"Ref": "StageName"}
    assert props["TracingEnabled"] is True
    assert [media.replace("~1", "/") for media in props["BinaryMediaTypes"]] == ["application/zip"]
    (defaults,) = props["MethodSettings"]
    assert (defaults["ResourcePath"], defaults["HttpMethod"]) == ("/*", "*")
    assert defaults["ThrottlingRateLimit"] > 0
    assert defaults["ThrottlingBurstLimit"] >= defaults["ThrottlingRateLimit"]
    assert not defaults.get("DataTraceEnabled"), "data trace would log request bodies (people's words)"


def test_given_per_project_throttles_then_every_v1_route_needs_the_usage_key_the_authorizer_returns(
    template: dict[str, Any],
) -> None:
    props = api(template)
    assert props["ApiKeySourceType"] == "AUTHORIZER"  # never a client's X-API-Key header
    assert props["Auth"]["ApiKeyRequired"] is True
    assert props["Auth"]["AddApiKeyRequiredToCorsPreflight"] is False
    for spec in function_specs(template):
        for name, event in (template["Resources"][spec.logical_id]["Properties"].get("Events") or {}).items():
            if event["Type"] != "Api":
                continue
            path, auth = event["Properties"]["Path"], event["Properties"].get("Auth") or {}
            if ("GET", path) in PUBLIC_ROUTES:
                assert auth == {"Authorizer": "NONE", "ApiKeyRequired": False}, f"{spec.logical_id}.{name}"
            else:
                assert path.startswith("/v1/"), path
                assert "ApiKeyRequired" not in auth, f"{spec.logical_id}.{name}: the API's default holds"


def test_given_the_usage_plan_then_it_meters_the_stage_per_project_below_the_stage_limit(
    template: dict[str, Any],
) -> None:
    resources = template["Resources"]
    plan = resources["ProjectUsagePlan"]
    assert plan["Type"] == "AWS::ApiGateway::UsagePlan"
    assert plan["Properties"]["ApiStages"] == [
        {"ApiId": {"Ref": "KaiboApi"}, "Stage": {"Ref": "KaiboApi.Stage"}}
    ]
    assert plan["Properties"]["Throttle"] == {
        "Fn::If": [
            "ProjectThrottlesOn",
            {"RateLimit": {"Ref": "ProjectRateLimit"}, "BurstLimit": {"Ref": "ProjectBurstLimit"}},
            {"Ref": "AWS::NoValue"},
        ]
    }
    assert plan["Properties"]["Quota"] == {
        "Fn::If": [
            "WithProjectQuota",
            {"Limit": {"Ref": "ProjectQuotaPerDay"}, "Period": "DAY"},
            {"Ref": "AWS::NoValue"},
        ]
    }
    parameters = template["Parameters"]
    assert parameters["ProjectThrottles"]["Default"] == "on"
    assert parameters["ProjectQuotaPerDay"]["Default"] == 0  # no quota unless asked
    (stage,) = api(template)["MethodSettings"]
    assert parameters["ProjectRateLimit"]["Default"] < stage["ThrottlingRateLimit"]
    assert parameters["ProjectBurstLimit"]["Default"] < stage["ThrottlingBurstLimit"]
    assert parameters["ProjectBurstLimit"]["Default"] >= parameters["ProjectRateLimit"]["Default"]


def test_given_the_shared_usage_key_then_it_is_in_the_plan_and_the_authorizer_returns_its_value(
    template: dict[str, Any],
) -> None:
    resources = template["Resources"]
    shared = resources["SharedUsageKey"]["Properties"]
    assert resources["SharedUsageKey"]["Type"] == "AWS::ApiGateway::ApiKey"
    assert shared["Enabled"] is True
    assert resources["SharedUsageKeyInPlan"]["Properties"] == {
        "KeyId": {"Ref": "SharedUsageKey"},
        "KeyType": "API_KEY",
        "UsagePlanId": {"Ref": "ProjectUsagePlan"},
    }
    specs = {spec.logical_id: spec for spec in function_specs(template)}
    assert specs["AuthorizerFunction"].environment["KAIBO_SHARED_USAGE_KEY"] == shared["Value"]
    # 20 to 128 characters: "kaibo-shared-" + a 10-character API id + "-" + a 12-digit account
    assert shared["Value"] == {"Fn::Sub": "kaibo-shared-${KaiboApi}-${AWS::AccountId}"}


@pytest.mark.parametrize(("throttles", "plan_id"), [("on", "ProjectUsagePlan"), ("off", "")])
def test_given_project_throttles_off_then_admin_gets_no_plan_and_the_plan_limits_nothing(
    template: dict[str, Any], throttles: str, plan_id: str
) -> None:
    from kaibo_local.template import chosen, condition_holds, parameter_values

    parameters = parameter_values(template, {"ProjectThrottles": throttles, "ProjectQuotaPerDay": "1000"})
    admin_env = {spec.logical_id: spec for spec in function_specs(template)}["AdminFunction"].environment
    configured = chosen(admin_env["KAIBO_USAGE_PLAN_ID"], template, parameters)
    assert configured == ({"Ref": plan_id} if plan_id else "")
    on = throttles == "on"
    assert condition_holds(template, "ProjectThrottlesOn", parameters) is on
    assert condition_holds(template, "WithProjectQuota", parameters) is on
    assert not condition_holds(
        template, "WithProjectQuota", parameter_values(template, {"ProjectThrottles": throttles})
    )


def test_given_access_logs_then_each_line_holds_ids_status_and_latency_never_a_body_header_or_key(
    template: dict[str, Any],
) -> None:
    setting = api(template)["AccessLogSetting"]["Fn::If"]
    assert setting[0] == "WithAccessLogs"
    logged = setting[1]
    assert logged["DestinationArn"] == {"Fn::GetAtt": ["ApiAccessLogs", "Arn"]}
    line = json.loads(logged["Format"])
    assert {"requestId", "status", "latencyMs", "resource", "method"} <= line.keys()
    variables = set(re.findall(r"\$[\w.]+", logged["Format"]))
    for forbidden in ("$input", "$context.requestOverride", "$context.identity.apiKey", "$method.request"):
        assert not any(v.startswith(forbidden) for v in variables), forbidden
    assert template["Resources"]["ApiAccessLogs"]["Properties"]["RetentionInDays"] == {
        "Ref": "LogRetentionDays"
    }


def test_given_a_structuring_backlog_then_it_cannot_take_the_accounts_whole_concurrency(
    template: dict[str, Any],
) -> None:
    structure = template["Resources"]["StructureFunction"]["Properties"]
    assert structure["ReservedConcurrentExecutions"] == {"Ref": "StructureConcurrency"}
    (trigger,) = structure["Events"].values()
    assert trigger["Properties"]["ScalingConfig"]["MaximumConcurrency"] == {"Ref": "StructureConcurrency"}
    assert template["Parameters"]["StructureConcurrency"]["MinValue"] >= 2  # SQS's own minimum


@pytest.mark.parametrize(
    ("alarm", "metric"),
    [
        ("StructuringDeadLetterAlarm", "ApproximateNumberOfMessagesVisible"),
        ("StructuringBacklogAlarm", "ApproximateAgeOfOldestMessage"),
        ("Api5xxAlarm", "5XXError"),
        ("ApiThrottlesAlarm", "Throttles"),
        ("BackgroundThrottlesAlarm", "Throttles"),
        ("StructurerFallbacksAlarm", "StructurerFallbacks"),
        ("PurgeErrorsAlarm", "Errors"),
        ("SweeperErrorsAlarm", "Errors"),
        ("WebhookDispatchErrorsAlarm", "Errors"),
    ],
)
def test_given_the_failures_an_operator_must_see_then_each_has_an_alarm(
    template: dict[str, Any], alarm: str, metric: str
) -> None:
    resource = template["Resources"][alarm]
    assert resource["Type"] == "AWS::CloudWatch::Alarm"
    props = resource["Properties"]
    metrics = [props.get("MetricName")] + [
        m.get("MetricStat", {}).get("Metric", {}).get("MetricName") for m in props.get("Metrics", [])
    ]
    assert metric in metrics
    assert props["TreatMissingData"] == "notBreaching"
    assert props["AlarmActions"]["Fn::If"][0] == "NotifyAlarms"
    if alarm == "StructuringDeadLetterAlarm":
        assert props["Dimensions"][0]["Value"] == {"Fn::GetAtt": ["StructuringDeadLetterQueue", "QueueName"]}
        assert (props["ComparisonOperator"], props["Threshold"]) == ("GreaterThanThreshold", 0)
    if alarm.endswith("ErrorsAlarm"):  # one function's errors, not the account's
        function = alarm.removesuffix("ErrorsAlarm") + "Function"
        assert props["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function}}]


def alarm_metrics(props: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The metrics a metric-math alarm reads (``MetricStat.Metric`` of each entry)."""
    return [m["MetricStat"]["Metric"] for m in props.get("Metrics", []) if "MetricStat" in m]


#: Runs in a fresh interpreter with a function's Powertools environment: what its metrics carry.
PUBLISHED_SERIES_PROBE = """
import json
from kaibo_core.runtime.observability import metrics
print(json.dumps({"namespace": metrics.namespace, "service": metrics.service}))
"""


def published_series(template: Mapping[str, Any], function: str, stack_name: str) -> dict[str, str]:
    """The namespace and ``service`` dimension ``function``'s custom metrics carry in a stack named
    ``stack_name``: observability imported with the environment the template gives the function."""
    (spec,) = [spec for spec in function_specs(template) if spec.logical_id == function]
    powertools = {name: value for name, value in spec.environment.items() if name.startswith("POWERTOOLS_")}
    environment = resolve_environment(powertools, {}, {"AWS::StackName": stack_name}, template)
    layer_dir = REPO_ROOT / template["Resources"]["KaiboCoreLayer"]["Properties"]["ContentUri"]
    result = subprocess.run(
        [sys.executable, "-c", PUBLISHED_SERIES_PROBE],
        env={"PYTHONPATH": str(layer_dir), "AWS_DEFAULT_REGION": "us-east-1", **environment},
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_SECONDS,
        check=True,
    )
    series: dict[str, str] = json.loads(result.stdout)
    return series


def test_given_two_stacks_in_one_account_then_each_fallbacks_alarm_reads_only_its_own_series(
    template: dict[str, Any],
) -> None:
    # Given the series the structure function publishes in two stacks of one account and region
    staging = published_series(template, "StructureFunction", "kaibo-staging")
    production = published_series(template, "StructureFunction", "kaibo-production")
    assert staging != production

    # Then each stack's alarm reads the series its own structure function publishes
    props = template["Resources"]["StructurerFallbacksAlarm"]["Properties"]
    for stack_name, series in (("kaibo-staging", staging), ("kaibo-production", production)):
        for metric in alarm_metrics(props):
            read = resolve_environment(
                {"namespace": metric["Namespace"], **{d["Name"]: d["Value"] for d in metric["Dimensions"]}},
                {},
                {"AWS::StackName": stack_name},
                template,
            )
            assert read == series, metric["MetricName"]


def test_given_the_bedrock_structurer_then_its_fallbacks_alarm_exists_only_with_it(
    template: dict[str, Any],
) -> None:
    assert template["Conditions"]["BedrockStructurer"] == {"Fn::Equals": [{"Ref": "Structurer"}, "bedrock"]}
    alarms = dict(resources_of_type(template, "AWS::CloudWatch::Alarm"))
    conditional = {name: alarm["Condition"] for name, alarm in alarms.items() if "Condition" in alarm}
    assert conditional == {"StructurerFallbacksAlarm": "BedrockStructurer"}
    props = alarms["StructurerFallbacksAlarm"]["Properties"]
    # The share of structured events the rules answered, over the function's own metrics.
    (rate,) = [m for m in props["Metrics"] if m.get("ReturnData")]
    assert rate["Expression"] == "IF(events > 0, 100 * fallbacks / events, 0)"
    read = {m["Id"]: m["MetricStat"]["Metric"] for m in props["Metrics"] if "MetricStat" in m}
    assert {i: m["MetricName"] for i, m in read.items()} == {
        "fallbacks": "StructurerFallbacks",
        "events": "EventsStructured",
    }
    structure_source = (REPO_ROOT / "functions" / "structure" / "app.py").read_text(encoding="utf-8")
    for metric in read.values():
        assert metric["Namespace"] == METRICS_NAMESPACE
        assert metric["Dimensions"] == [{"Name": "service", "Value": {"Ref": "AWS::StackName"}}]
        assert f'metrics.add_metric("{metric["MetricName"]}"' in structure_source


#: Throttles are by design for these: the purge runs one at a time, a run over its schedule's interval
#: throttles the next.
THROTTLED_BY_DESIGN = {"PurgeFunction"}


def test_given_throttles_then_the_alarms_watch_this_stack_s_functions_not_the_account(
    template: dict[str, Any],
) -> None:
    watched: list[str] = []
    for name, alarm in resources_of_type(template, "AWS::CloudWatch::Alarm"):
        props = alarm["Properties"]
        throttles = [m for m in [props, *alarm_metrics(props)] if m.get("MetricName") == "Throttles"]
        assert len(alarm_metrics(props)) <= 10, f"{name}: an alarm's metric math reads at most 10 metrics"
        for metric in throttles:
            (dimension,) = metric["Dimensions"]
            assert dimension["Name"] == "FunctionName", name
            watched.append(dimension["Value"]["Ref"])
    assert sorted(watched) == sorted(set(function_ids(template)) - THROTTLED_BY_DESIGN)


def test_given_the_bedrock_structurer_then_one_job_a_batch_so_one_slow_event_fits_the_timeout(
    template: dict[str, Any],
) -> None:
    from kaibo_core.adapters import bedrock_structurer
    from kaibo_core.adapters.bedrock_structurer import BedrockStructurer

    structure = template["Resources"]["StructureFunction"]["Properties"]
    batch = structure["Events"]["StructuringJobs"]["Properties"]["BatchSize"]
    assert batch == {"Fn::If": ["BedrockStructurer", 1, 5]}
    by_structurer = {
        structurer: next(
            t.batch_size
            for t in triggers(template, function_specs(template), {"Structurer": structurer})[0]
            if t.function == "StructureFunction"
        )
        for structurer in ("rules", "bedrock")
    }
    assert by_structurer == {"rules": 5, "bedrock": 1}
    # The longest an event can take before the rules answer it: every attempt connecting and reading
    # to the client's timeouts, plus the back-off between attempts. With one such event from each
    # job of a batch, the batch must still finish, so that each invocation structures something.
    config: Any = bedrock_structurer._BEDROCK_CONFIG  # botocore's Config declares its options untyped
    defaults = inspect.signature(BedrockStructurer).parameters
    attempts, delay = defaults["max_attempts"].default, defaults["retry_delay"].default
    slowest_event = attempts * (config.connect_timeout + config.read_timeout) + delay * 1.5 * sum(
        range(1, attempts)
    )
    assert by_structurer["bedrock"] * slowest_event <= structure["Timeout"]


SCHEDULED_FUNCTIONS = ("PurgeFunction", "SweeperFunction", "WebhookDispatchFunction")


@pytest.mark.parametrize("function", SCHEDULED_FUNCTIONS)
def test_given_a_scheduled_function_then_a_failed_run_is_left_to_the_next_one_not_retried(
    template: dict[str, Any], function: str
) -> None:
    props = template["Resources"][function]["Properties"]
    assert any(event["Type"] == "Schedule" for event in props["Events"].values())
    assert props["EventInvokeConfig"] == {"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60}


def test_given_the_purge_then_one_run_at_a_time(template: dict[str, Any]) -> None:
    props = template["Resources"]["PurgeFunction"]["Properties"]
    assert props["ReservedConcurrentExecutions"] == 1
    schedule = props["Events"]["Purge"]["Properties"]["Schedule"]
    assert schedule == "rate(5 minutes)"


def test_given_slow_webhook_receivers_then_deliveries_cannot_take_the_account_s_concurrency(
    template: dict[str, Any],
) -> None:
    deliveries = template["Resources"]["WebhookDispatchFunction"]["Properties"]["Events"]["Deliveries"]
    assert deliveries["Properties"]["ScalingConfig"] == {"MaximumConcurrency": 5}


def test_given_every_function_then_its_logs_go_to_a_group_that_expires(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    for function in function_ids(template):
        group = resources[function]["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
        assert resources[group]["Type"] == "AWS::Logs::LogGroup", function
        assert resources[group]["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}, function


@pytest.mark.parametrize(("response_type", "expected"), sorted(EXPECTED_GATEWAY_RESPONSES.items()))
def test_given_a_gateway_error_then_it_answers_in_the_api_error_shape(
    template: dict[str, Any], response_type: str, expected: tuple[str | None, str]
) -> None:
    status, code = expected
    response = api(template)["GatewayResponses"][response_type]
    assert (str(response["StatusCode"]) if "StatusCode" in response else None) == status
    body_template = response["ResponseTemplates"]["application/json"]
    assert "$context.requestId" in body_template
    body = json.loads(body_template.replace("$context.requestId", "req-1"))
    assert body == {
        "error": {"code": code, "message": body["error"]["message"], "details": {"requestId": "req-1"}}
    }
    assert body["error"]["message"].strip()
    headers = (response.get("ResponseParameters") or {}).get("Headers") or {}
    if status == "429":
        assert re.fullmatch(r"'\d+'", headers.get("Retry-After", "")), "429 needs a Retry-After header"
    if status == "401":
        assert headers.get("WWW-Authenticate") == "'Bearer'"


def test_given_the_gateway_responses_then_none_is_left_undeclared(template: dict[str, Any]) -> None:
    assert set(api(template)["GatewayResponses"]) == set(EXPECTED_GATEWAY_RESPONSES)


# --- Functions --------------------------------------------------------------------------------------


def test_given_every_function_then_its_permissions_are_exactly_the_listed_ones(
    template: dict[str, Any],
) -> None:
    assert set(function_ids(template)) == set(EXPECTED_PERMISSIONS), "a function without a permission list"
    for function, expected in EXPECTED_PERMISSIONS.items():
        props = template["Resources"][function]["Properties"]
        assert "Role" not in props, f"{function}: an explicit Role bypasses the reviewed Policies"
        assert permissions(template, function) == expected, function


def test_given_the_kms_key_then_each_role_uses_it_only_for_its_own_ciphertexts(
    template: dict[str, Any],
) -> None:
    """One key encrypts webhook secrets (context: project, webhook) and forget salts (context:
    project, purpose, attempt): every grant on it is conditioned on the context, so the dispatcher
    cannot decrypt a salt, nor the forget function a webhook secret."""
    kms_grants = {
        (function, action, resource)
        for function in function_ids(template)
        for action, resource in permissions(template, function)
        if action.startswith("kms:")
    }
    assert kms_grants == {
        ("ForgetFunction", "kms:Encrypt", "WebhookSecretsKey for purpose forget-key-salt"),
        ("ForgetFunction", "kms:Decrypt", "WebhookSecretsKey for purpose forget-key-salt"),
        ("WebhooksFunction", "kms:Encrypt", "WebhookSecretsKey for webhook contexts"),
        ("WebhookDispatchFunction", "kms:Decrypt", "WebhookSecretsKey for webhook contexts"),
    }


def test_given_the_readers_then_they_cannot_write(template: dict[str, Any]) -> None:
    for reader in ("EventsFunction", "AuthorizerFunction", "RecallFunction", "MemoriesFunction"):
        assert not {action for action, _ in permissions(template, reader)} & WRITE_ACTIONS, reader


def test_given_the_admin_key_hash_then_only_the_authorizer_receives_it(template: dict[str, Any]) -> None:
    specs = {spec.logical_id: spec for spec in function_specs(template)}
    holders = {name for name, spec in specs.items() if "KAIBO_ADMIN_KEY_HASH" in spec.environment}
    assert holders == {"AuthorizerFunction"}
    assert specs["AuthorizerFunction"].environment["KAIBO_ADMIN_KEY_HASH"] == {"Ref": "AdminKeyHash"}


def test_given_every_function_then_it_finds_its_tables_and_powertools_settings(
    template: dict[str, Any],
) -> None:
    for spec in function_specs(template):
        env = spec.environment
        assert env["KAIBO_EVENTS_TABLE"] == {"Ref": "EventsTable"}, spec.logical_id
        assert env["KAIBO_IDEMPOTENCY_TABLE"] == {"Ref": "IdempotencyTable"}, spec.logical_id
        assert env["KAIBO_PROJECTS_TABLE"] == {"Ref": "ProjectsTable"}, spec.logical_id
        assert env["KAIBO_MEMORIES_TABLE"] == {"Ref": "MemoriesTable"}, spec.logical_id
        assert env["KAIBO_INDEX_TABLE"] == {"Ref": "TermIndexTable"}, spec.logical_id
        assert env["KAIBO_JOBS_TABLE"] == {"Ref": "JobsTable"}, spec.logical_id
        # Each stack's own metric series (runtime/observability.py)
        assert env["POWERTOOLS_SERVICE_NAME"] == {"Ref": "AWS::StackName"}, spec.logical_id
        assert env["POWERTOOLS_METRICS_NAMESPACE"] == METRICS_NAMESPACE, spec.logical_id
        assert env["POWERTOOLS_LOG_LEVEL"] == env["LOG_LEVEL"] == {"Ref": "LogLevel"}
        assert "POWERTOOLS_DEV" not in env, "POWERTOOLS_DEV prints whole events"
        # pydantic would scan every installed package for plugins at the first validator it builds
        assert env["PYDANTIC_DISABLE_PLUGINS"] == "__all__", spec.logical_id


def test_given_every_function_then_it_runs_python311_on_x86_64_with_the_layer(
    template: dict[str, Any],
) -> None:
    for spec in function_specs(template):
        function = spec.logical_id
        assert function_property(template, function, "Runtime") == "python3.11", function
        assert function_property(template, function, "Architectures") == ["x86_64"], function
        assert function_property(template, function, "Tracing") == "Active", function
        layers = [{"Ref": "KaiboCoreLayer"}]
        if function in EMBEDDING_FUNCTIONS:  # they load recall by meaning's model
            layers.append({"Ref": "KaiboSemanticLayer"})
        assert function_property(template, function, "Layers") == layers, function
        assert (spec.handler_module, spec.handler_name) == ("app", "lambda_handler"), function
        if spec.routes:
            timeout = function_property(template, function, "Timeout")
            assert isinstance(timeout, int), function
            assert timeout < 29, f"{function}: API Gateway gives up at 29 s"


# --- Layer ------------------------------------------------------------------------------------------


#: The functions that embed text when recall by meaning is on, and carry the model's layer.
EMBEDDING_FUNCTIONS = ("RememberFunction", "RecallFunction", "StructureFunction")
#: Lambda's limit on a function's code and layers, unzipped.
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024


def layer_pins(layer_dir: Path) -> list[str]:
    requirements = [
        line.split("#", 1)[0].strip()
        for line in (layer_dir / "requirements.txt").read_text(encoding="utf-8").splitlines()
    ]
    return [line for line in requirements if line]


@pytest.mark.parametrize(
    ("logical_id", "content"),
    [("KaiboCoreLayer", "layers/kaibo_core/"), ("KaiboSemanticLayer", "layers/kaibo_semantic/")],
)
def test_given_the_layer_then_sam_builds_it_for_python311_x86_64_from_exact_pins(
    template: dict[str, Any], logical_id: str, content: str
) -> None:
    layer = template["Resources"][logical_id]
    assert layer["Type"] == "AWS::Serverless::LayerVersion"
    # layers/*/Makefile (tests/contract/test_layer_build.py): the pins plus bytecode
    assert layer["Metadata"] == {"BuildMethod": "makefile", "BuildArchitecture": "x86_64"}
    props = layer["Properties"]
    assert props["ContentUri"] == content
    assert props["CompatibleRuntimes"] == ["python3.11"]
    assert props["CompatibleArchitectures"] == ["x86_64"]
    layer_dir = REPO_ROOT / props["ContentUri"]
    assert f"build-{logical_id}:" in (layer_dir / "Makefile").read_text(encoding="utf-8")
    pins = layer_pins(layer_dir)
    assert pins, "the layer has no requirements"
    loose = [line for line in pins if not re.fullmatch(r"[A-Za-z0-9._-]+==[A-Za-z0-9.+!-]+", line)]
    assert not loose, f"sam build resolves these afresh; pin them exactly: {loose}"


def test_given_the_core_layer_then_it_holds_kaibo_core() -> None:
    assert (REPO_ROOT / "layers" / "kaibo_core" / "kaibo_core" / "__init__.py").is_file()


def test_given_the_model_layer_then_it_deploys_the_versions_the_tests_ran() -> None:
    tested = {}
    for name in ("requirements-dev.txt", "requirements-models.txt"):
        for line in (REPO_ROOT / name).read_text(encoding="utf-8").splitlines():
            pin = line.split("#", 1)[0].strip()
            if "==" in pin:
                package, version = pin.split("==", 1)
                tested[package.lower()] = version
    for pin in layer_pins(REPO_ROOT / "layers" / "kaibo_semantic"):
        package, version = pin.split("==", 1)
        assert tested.get(package.lower()) == version, f"{pin}: the tests ran {tested.get(package.lower())}"


def installed_size(requirement: str) -> int:
    """The bytes an installed distribution's files take (the wheel as Lambda unzips it)."""
    files = importlib.metadata.distribution(requirement.split("==", 1)[0]).files or []
    located = [Path(path.locate()) for path in files]
    return sum(path.stat().st_size for path in located if path.is_file())


def test_given_the_embedding_functions_then_their_layers_fit_in_lambda_s_250_mb() -> None:
    """Measured from the same wheels installed here (x86_64 manylinux, as the layers' build), plus
    kaibo_core's sources and a generous allowance for bytecode and the function's own code."""
    core = sum(installed_size(pin) for pin in layer_pins(REPO_ROOT / "layers" / "kaibo_core"))
    model = sum(installed_size(pin) for pin in layer_pins(REPO_ROOT / "layers" / "kaibo_semantic"))
    sources = sum(
        p.stat().st_size for p in (REPO_ROOT / "layers" / "kaibo_core" / "kaibo_core").rglob("*.py")
    )
    allowance = 3 * sources + 5 * 1024 * 1024
    assert model > 80 * 1024 * 1024  # the model's weights are in it: the measure can fail
    assert core + model + allowance < LAMBDA_UNZIPPED_LIMIT, (core, model, allowance)


def test_given_the_semantic_model_parameter_then_off_is_the_default_and_the_functions_get_it(
    template: dict[str, Any],
) -> None:
    parameter = template["Parameters"]["SemanticModel"]
    assert parameter["AllowedValues"] == ["off", "mini6"]
    assert parameter["Default"] in parameter["AllowedValues"]
    env = template["Globals"]["Function"]["Environment"]["Variables"]
    assert env["KAIBO_SEMANTIC_MODEL"] == {"Ref": "SemanticModel"}


# --- Tables -----------------------------------------------------------------------------------------


def test_given_the_tables_then_they_are_on_demand_recoverable_encrypted_and_retained(
    template: dict[str, Any],
) -> None:
    tables = dict(resources_of_type(template, "AWS::DynamoDB::Table"))
    assert set(tables) == set(EXPECTED_TABLE_KEYS)
    for name, table in tables.items():
        props = table["Properties"]
        assert props["BillingMode"] == "PAY_PER_REQUEST", name
        assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}, name
        assert props["SSESpecification"]["SSEEnabled"] is True, name
        assert table["DeletionPolicy"] == table["UpdateReplacePolicy"] == "Retain", name
        assert "TableName" not in props, f"{name}: a fixed name blocks replacement and a second stack"


def test_given_the_tables_then_their_keys_are_what_the_stores_use(template: dict[str, Any]) -> None:
    specs = {spec.logical_id: spec.create_table_kwargs for spec in table_specs(template, "contract")}
    for name, keys in EXPECTED_TABLE_KEYS.items():
        kwargs = specs[name]
        types = {a["AttributeName"]: a["AttributeType"] for a in kwargs["AttributeDefinitions"]}
        assert [
            (k["AttributeName"], types[k["AttributeName"]], k["KeyType"]) for k in kwargs["KeySchema"]
        ] == keys
        assert kwargs["TableName"] == f"kaibo-{name}-contract"
        assert set(kwargs) <= {
            "TableName",
            "AttributeDefinitions",
            "KeySchema",
            "BillingMode",
            "GlobalSecondaryIndexes",
        }
    (heads,) = specs["EventsTable"]["GlobalSecondaryIndexes"]
    assert heads["IndexName"] == STREAM_HEADS_INDEX
    assert [(k["AttributeName"], k["KeyType"]) for k in heads["KeySchema"]] == [
        ("headsPk", "HASH"),
        ("headsSk", "RANGE"),
    ]
    assert heads["Projection"]["ProjectionType"] == "INCLUDE"
    assert sorted(heads["Projection"]["NonKeyAttributes"]) == ["headHash", "headSeq", "stream"]
    for name in ("IdempotencyTable", "ProjectsTable"):
        assert "GlobalSecondaryIndexes" not in specs[name]


# --- Parameters and outputs -------------------------------------------------------------------------


def test_given_the_admin_key_hash_parameter_then_it_is_secret_and_takes_only_a_sha256(
    template: dict[str, Any],
) -> None:
    parameter = template["Parameters"]["AdminKeyHash"]
    assert parameter["NoEcho"] is True
    assert "Default" not in parameter
    pattern = re.compile(parameter["AllowedPattern"])
    _, good = api_keys.issue_admin_key()
    assert pattern.fullmatch(good)
    for bad in ("", good[:-1], good + "0", good.upper(), "g" * 64, api_keys.issue_admin_key()[0]):
        assert not pattern.fullmatch(bad), bad
    assert template["Parameters"]["StageName"]["Default"] == "prod"
    assert template["Parameters"]["LogLevel"]["Default"] == "INFO"


def test_given_the_outputs_then_they_name_the_api_url_tables_and_layer(template: dict[str, Any]) -> None:
    outputs = template["Outputs"]
    assert outputs["ApiUrl"]["Value"] == {
        "Fn::Sub": "https://${KaiboApi}.execute-api.${AWS::Region}.amazonaws.com/${StageName}"
    }
    assert outputs["EventsTableName"]["Value"] == {"Ref": "EventsTable"}
    assert outputs["IdempotencyTableName"]["Value"] == {"Ref": "IdempotencyTable"}
    assert outputs["ProjectsTableName"]["Value"] == {"Ref": "ProjectsTable"}
    assert outputs["KaiboCoreLayerArn"]["Value"] == {"Ref": "KaiboCoreLayer"}


def test_given_remember_with_wait_then_its_timeout_covers_the_wait_and_stays_under_the_gateways(
    template: dict[str, Any],
) -> None:
    from kaibo_core.runtime.settings import Settings

    timeout = template["Resources"]["RememberFunction"]["Properties"]["Timeout"]
    wait = Settings.model_fields["wait_seconds"].default
    assert wait + 5 <= timeout < 29, "remember's wait must end well before Lambda and API Gateway give up"


def test_given_the_structuring_queue_then_poison_messages_reach_its_dead_letter_queue(
    template: dict[str, Any],
) -> None:
    from kaibo_core.core.models.jobs import MAX_RECEIVE_COUNT

    queue = template["Resources"]["StructuringQueue"]["Properties"]
    consumer = template["Resources"]["StructureFunction"]["Properties"]
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {
        "Fn::GetAtt": ["StructuringDeadLetterQueue", "Arn"]
    }
    # The function marks a job failed on its message's last receive: it must know which one that is.
    max_receive_count = queue["RedrivePolicy"]["maxReceiveCount"]
    told = consumer["Environment"]["Variables"]["KAIBO_STRUCTURING_MAX_RECEIVE_COUNT"]
    assert int(told) == max_receive_count
    assert max_receive_count == MAX_RECEIVE_COUNT  # the default agrees
    assert queue["VisibilityTimeout"] >= 6 * consumer["Timeout"]  # as Lambda's SQS trigger advises
    assert consumer["Events"]["StructuringJobs"]["Properties"]["FunctionResponseTypes"] == [
        "ReportBatchItemFailures"
    ]


def test_given_the_webhook_queue_then_the_dispatcher_knows_its_last_receive(
    template: dict[str, Any],
) -> None:
    """A delivery the deadline cut short is recorded on its message's last receive, never failed
    into the dead-letter queue unrecorded: the dispatcher must know which receive that is."""
    from kaibo_core.core.webhooks import WEBHOOK_MAX_RECEIVE_COUNT

    queue = template["Resources"]["WebhookQueue"]["Properties"]
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["WebhookDeadLetterQueue", "Arn"]}
    assert queue["RedrivePolicy"]["maxReceiveCount"] == WEBHOOK_MAX_RECEIVE_COUNT
