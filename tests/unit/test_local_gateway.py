"""LocalGateway: the REST API of template.yaml, with recording fake functions and authorizer."""

from __future__ import annotations

import base64
import copy
import dataclasses
import importlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

import pytest

from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.tenancy import Principal
from kaibo_core.services.authorization import policy_for
from kaibo_local.gateway import (
    MAX_REQUEST_BYTES,
    FunctionCrashError,
    Handler,
    HttpRequest,
    HttpResponse,
    IntegrationTimeoutError,
    LambdaContext,
    LocalGateway,
    allows,
    load_handler,
)
from kaibo_local.template import (
    FunctionSpec,
    RouteSpec,
    authorizer_function,
    function_specs,
    load_template,
    routes,
)

TEMPLATE = load_template()
AUTHORIZER = authorizer_function(TEMPLATE)

ADMIN = Principal(role="admin", key_id="admin", project_id=None, scopes=frozenset({"admin"}))
PROJECT = Principal(
    role="project",
    key_id="0123456789abcdef",
    project_id=ProjectId("prj_01J0000000000000000000000A"),
    scopes=frozenset({"read", "write"}),
)
ADMIN_TOKEN = "Bearer admin-token"
PROJECT_TOKEN = "Bearer project-token"
TOKENS = {ADMIN_TOKEN: ADMIN, PROJECT_TOKEN: PROJECT}
OK = {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": "{}"}

Behaviour = Callable[[dict[str, Any]], Any]


def fake_authorizer(event: dict[str, Any]) -> Any:
    """Like functions/authorizer: a known token → policy_for(principal); otherwise 'Unauthorized'."""
    token = event["authorizationToken"]
    if token == "Bearer boom":
        raise RuntimeError("the projects table is gone")
    if token not in TOKENS:
        raise Exception("Unauthorized")
    return policy_for(TOKENS[token], event["methodArn"])


@dataclass
class FakeFunctions:
    """The loader: each function records its events and answers with its behaviour."""

    behaviours: dict[str, Behaviour] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    contexts: list[Any] = field(default_factory=list)

    def loader(self, spec: FunctionSpec) -> Handler:
        def handler(event: dict[str, Any], context: Any) -> Any:
            self.calls.append((spec.logical_id, event))
            self.contexts.append(context)
            behaviour = self.behaviours.get(spec.logical_id)
            if behaviour is not None:
                return behaviour(event)
            return fake_authorizer(event) if spec.logical_id == AUTHORIZER else OK

        return handler

    def called(self, logical_id: str) -> list[dict[str, Any]]:
        return [event for name, event in self.calls if name == logical_id]

    def functions_called(self) -> list[str]:
        return [name for name, _ in self.calls if name != AUTHORIZER]


@pytest.fixture
def fakes() -> FakeFunctions:
    return FakeFunctions()


@pytest.fixture
def gateway(fakes: FakeFunctions) -> LocalGateway:
    return LocalGateway(TEMPLATE, loader=fakes.loader)


def request(
    method: str,
    path: str,
    *,
    token: str | None = PROJECT_TOKEN,
    query: list[tuple[str, str]] | None = None,
    headers: list[tuple[str, str]] | None = None,
    body: bytes = b"",
) -> HttpRequest:
    sent = list(headers or [])
    if token is not None:
        sent.append(("Authorization", token))
    return HttpRequest(method=method, path=path, query=query or [], headers=sent, body=body)


def assert_error(response: HttpResponse, status: int, code: str) -> dict[str, Any]:
    assert response.status == status, response.body
    document = json.loads(response.body)
    assert set(document) == {"error"}
    assert document["error"]["code"] == code
    assert document["error"]["message"]
    assert document["error"]["details"]["requestId"] == response.header("x-amzn-RequestId")
    return document


def only_event(fakes: FakeFunctions, logical_id: str) -> dict[str, Any]:
    events = fakes.called(logical_id)
    assert len(events) == 1, fakes.calls
    return events[0]


# --- Routing ------------------------------------------------------------------------------------

#: A value for every path parameter that only arrives intact if it is URL-decoded.
PARAMETER_VALUE = "a b/ü%"


def concrete(route: RouteSpec) -> tuple[str, dict[str, str]]:
    names = re.findall(r"\{([A-Za-z0-9_]+)\}", route.path)
    raw = route.path
    for name in names:
        raw = raw.replace("{" + name + "}", quote(PARAMETER_VALUE, safe=""))
    return raw, dict.fromkeys(names, PARAMETER_VALUE)


ROUTES = routes(TEMPLATE)


def test_given_the_template_then_the_routes_under_test_are_all_of_its_api_events() -> None:
    assert {(r.method, r.path) for r in ROUTES} == {
        ("POST", "/v1/admin/projects"),
        ("POST", "/v1/admin/projects/{project_id}/keys"),
        ("DELETE", "/v1/admin/keys/{key_id}"),
        ("POST", "/v1/remember"),
        ("GET", "/v1/streams"),
        ("GET", "/v1/streams/{stream}/events"),
        ("POST", "/v1/recall"),
        ("GET", "/v1/memories/{memory_id}"),
        ("POST", "/v1/explain"),
        ("GET", "/v1/jobs/{job_id}"),
        ("POST", "/v1/forget"),
        ("GET", "/v1/ledger"),
        ("GET", "/v1/receipts/{receipt_id}"),
        ("GET", "/openapi.json"),
        ("GET", "/docs/llms.txt"),
        ("GET", "/docs/llms-full.txt"),
        ("GET", "/docs/docs.zip"),
        ("POST", "/v1/webhooks"),
        ("GET", "/v1/webhooks"),
        ("GET", "/v1/webhooks/{webhook_id}"),
        ("DELETE", "/v1/webhooks/{webhook_id}"),
        ("POST", "/v1/webhooks/{webhook_id}/rotate-secret"),
        ("POST", "/v1/webhooks/{webhook_id}/test"),
        ("GET", "/v1/webhooks/{webhook_id}/deliveries"),
    }


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_given_each_template_route_when_requested_then_its_function_gets_the_route_event(
    gateway: LocalGateway, fakes: FakeFunctions, route: RouteSpec
) -> None:
    raw_path, parameters = concrete(route)
    token = ADMIN_TOKEN if route.path.startswith("/v1/admin/") else PROJECT_TOKEN

    response = gateway.handle(request(route.method, raw_path, token=token))

    assert response.status == 200, response.body
    assert fakes.functions_called() == [route.function_logical_id]
    event = only_event(fakes, route.function_logical_id)
    assert event["resource"] == route.path
    assert event["requestContext"]["resourcePath"] == route.path
    assert event["pathParameters"] == (parameters or None)
    assert event["httpMethod"] == route.method
    assert event["path"] == unquote(raw_path)
    assert fakes.contexts[-1].function_name == route.function_logical_id


def test_given_a_trailing_slash_when_requested_then_the_route_still_matches(
    gateway: LocalGateway, fakes: FakeFunctions
) -> None:
    assert gateway.handle(request("GET", "/v1/streams/")).status == 200
    assert fakes.functions_called() == ["EventsFunction"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/nothing-here"),
        ("GET", "/"),
        ("GET", "/v1/streams/s/events/extra"),
        ("DELETE", "/v1/remember"),
        ("GET", "/v1/remember"),
        ("HEAD", "/v1/streams"),
        ("OPTIONS", "/v1/remember"),
    ],
)
def test_given_no_route_for_the_path_and_method_then_the_missing_token_response_in_our_error_shape(
    gateway: LocalGateway, fakes: FakeFunctions, method: str, path: str
) -> None:
    response = gateway.handle(request(method, path))

    assert_error(response, 404, "not_found")
    assert response.header("Content-Type") == "application/json"
    assert fakes.calls == []  # not even the authorizer


def test_given_overlapping_routes_then_the_most_specific_route_wins_segment_by_segment(
    fakes: FakeFunctions,
) -> None:
    template = copy.deepcopy(TEMPLATE)
    events = template["Resources"]["RememberFunction"]["Properties"]["Events"]
    api = {"RestApiId": {"Ref": "KaiboApi"}}
    events["Greedy"] = {"Type": "Api", "Properties": {**api, "Path": "/v1/{proxy+}", "Method": "ANY"}}
    events["Param"] = {"Type": "Api", "Properties": {**api, "Path": "/v1/{kind}/x/events", "Method": "GET"}}
    events["AnyStreams"] = {"Type": "Api", "Properties": {**api, "Path": "/v1/streams", "Method": "ANY"}}
    gateway = LocalGateway(template, loader=fakes.loader)

    cases = {
        # A literal segment beats a parameter at the first place they differ.
        "/v1/streams/x/events": "/v1/streams/{stream}/events",
        "/v1/other/x/events": "/v1/{kind}/x/events",
        # A parameter beats a greedy path; a greedy path takes what is left.
        "/v1/a/b/c": "/v1/{proxy+}",
        # An explicit method beats ANY on the same resource.
        "/v1/streams": "/v1/streams",
    }
    for path, resource in cases.items():
        fakes.calls.clear()
        assert gateway.handle(request("GET", path)).status == 200
        (event,) = [e for name, e in fakes.calls if name != AUTHORIZER]
        assert event["resource"] == resource, path
    fakes.calls.clear()
    gateway.handle(request("GET", "/v1/streams"))
    assert fakes.functions_called() == ["EventsFunction"]
    fakes.calls.clear()
    gateway.handle(request("PUT", "/v1/streams"))
    assert fakes.functions_called() == ["RememberFunction"]


# --- The token authorizer -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "token", [None, "", "Basic dXNlcjpwYXNz", "Bearer", "Bearer ", "Bearer a.b", "Bearerabc", "Bearer a b"]
)
def test_given_a_missing_or_malformed_authorization_header_then_401_without_calling_the_authorizer(
    gateway: LocalGateway, fakes: FakeFunctions, token: str | None
) -> None:
    response = gateway.handle(request("POST", "/v1/remember", token=token))

    assert_error(response, 401, "unauthorized")
    assert response.header("WWW-Authenticate") == "Bearer"  # the template's ResponseParameters
    assert fakes.calls == []


def test_given_the_authorization_header_in_any_case_then_it_is_the_identity_source(
    gateway: LocalGateway, fakes: FakeFunctions
) -> None:
    response = gateway.handle(
        request("GET", "/v1/streams", token=None, headers=[("authorization", PROJECT_TOKEN)])
    )
    assert response.status == 200
    assert only_event(fakes, AUTHORIZER)["authorizationToken"] == PROJECT_TOKEN


def test_given_a_valid_looking_header_then_the_authorizer_gets_a_token_event_with_the_method_arn(
    gateway: LocalGateway, fakes: FakeFunctions
) -> None:
    gateway.handle(request("GET", "/v1/streams/my%20stream/events"))

    event = only_event(fakes, AUTHORIZER)
    assert event["type"] == "TOKEN"
    assert event["authorizationToken"] == PROJECT_TOKEN
    assert re.fullmatch(
        r"arn:aws:execute-api:us-east-1:\d{12}:[a-z0-9]+/prod/GET/v1/streams/my stream/events",
        event["methodArn"],
    )


def test_given_the_authorizer_raises_unauthorized_then_401_and_no_function_runs(
    gateway: LocalGateway, fakes: FakeFunctions
) -> None:
    response = gateway.handle(request("POST", "/v1/remember", token="Bearer unknown-key"))

    assert_error(response, 401, "unauthorized")
    assert len(fakes.called(AUTHORIZER)) == 1
    assert fakes.functions_called() == []


def test_given_the_authorizer_fails_otherwise_then_the_authorizer_failure_response(
    gateway: LocalGateway, fakes: FakeFunctions
) -> None:
    response = gateway.handle(request("POST", "/v1/remember", token="Bearer boom"))

    assert_error(response, 500, "internal_error")
    assert fakes.functions_called() == []


@pytest.mark.parametrize(
    "answer",
    [
        None,
        "Allow",
        {"principalId": "x", "context": {}},  # no policy
        {"policyDocument": {"Statement": []}, "context": {}},  # no principalId
        {"principalId": "x", "policyDocument": {"Statement": []}, "context": {"nested": {"a": 1}}},
    ],
    ids=["none", "string", "no-policy", "no-principal", "nested-context"],
)
def test_given_the_authorizer_answers_what_api_gateway_refuses_then_500_and_no_function_runs(
    gateway: LocalGateway, fakes: FakeFunctions, answer: Any
) -> None:
    fakes.behaviours[AUTHORIZER] = lambda _event: answer

    response = gateway.handle(request("GET", "/v1/streams"))

    assert_error(response, 500, "internal_error")
    assert fakes.functions_called() == []


@pytest.mark.parametrize(
    ("token", "method", "path"),
    [
        (PROJECT_TOKEN, "POST", "/v1/admin/projects"),
        (PROJECT_TOKEN, "DELETE", "/v1/admin/keys/0123456789abcdef"),
        (ADMIN_TOKEN, "POST", "/v1/remember"),
        (ADMIN_TOKEN, "GET", "/v1/streams"),
    ],
)
def test_given_a_policy_that_does_not_allow_the_route_then_403_forbidden(
    gateway: LocalGateway, fakes: FakeFunctions, token: str, method: str, path: str
) -> None:
    response = gateway.handle(request(method, path, token=token))

    assert_error(response, 403, "forbidden")
    assert len(fakes.called(AUTHORIZER)) == 1
    assert fakes.functions_called() == []


@dataclass(frozen=True)
class AllowedCase:
    principal: Principal
    token: str
    method: str
    path: str
    function: str


@pytest.mark.parametrize(
    "case",
    [
        AllowedCase(PROJECT, PROJECT_TOKEN, "POST", "/v1/remember", "RememberFunction"),
        AllowedCase(ADMIN, ADMIN_TOKEN, "POST", "/v1/admin/projects", "AdminFunction"),
    ],
    ids=["project", "admin"],
)
def test_given_an_allowed_key_then_the_function_gets_the_authorizer_context_and_principal_id(
    gateway: LocalGateway, fakes: FakeFunctions, case: AllowedCase
) -> None:
    assert gateway.handle(request(case.method, case.path, token=case.token)).status == 200

    event = only_event(fakes, case.function)
    assert event["requestContext"]["authorizer"] == {
        **case.principal.context(),
        "principalId": case.principal.key_id,
    }
    assert Principal.from_context(event["requestContext"]["authorizer"]) == case.principal


def test_given_context_numbers_and_booleans_then_the_function_gets_them_as_strings(
    gateway: LocalGateway, fakes: FakeFunctions
) -> None:
    def answer(event: dict[str, Any]) -> dict[str, Any]:
        policy = policy_for(PROJECT, event["methodArn"])
        return {**policy, "context": {**policy["context"], "count": 3, "ratio": 0.5, "flag": True}}

    fakes.behaviours[AUTHORIZER] = answer

    assert gateway.handle(request("GET", "/v1/streams")).status == 200

    context = only_event(fakes, "EventsFunction")["requestContext"]["authorizer"]
    assert (context["count"], context["ratio"], context["flag"]) == ("3", "0.5", "true")


@pytest.mark.parametrize(
    ("statements", "expected"),
    [
        ([{"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": "arn:x:api/*"}], True),
        ([{"Effect": "Allow", "Action": "execute-api:*", "Resource": ["arn:y", "arn:x:api/*/GET/*"]}], True),
        ([{"Effect": "Allow", "Action": "*", "Resource": "arn:x:api/prod/GET/v1/?treams"}], True),
        ([{"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": "arn:x:api/*/POST/*"}], False),
        ([{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}], False),
        ([{"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": "arn:x:api/[p]rod/*"}], False),
        (
            [
                {"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": "*"},
                {"Effect": "Deny", "Action": "execute-api:Invoke", "Resource": "arn:x:api/*/*/v1/*"},
            ],
            False,
        ),
        ([], False),
    ],
)
def test_given_a_policy_then_iam_evaluation_needs_an_allow_and_no_deny(
    statements: list[dict[str, Any]], expected: bool
) -> None:
    policy = {"Version": "2012-10-17", "Statement": statements}
    assert allows(policy, "arn:x:api/prod/GET/v1/streams") is expected


# --- The proxy event (payload format 1.0) ------------------------------------------------------


def test_given_repeated_headers_and_parameters_then_single_values_are_the_last_and_multi_values_all(
    gateway: LocalGateway, fakes: FakeFunctions
) -> None:
    gateway.handle(
        request(
            "GET",
            "/v1/streams",
            query=[("fromSeq", "1"), ("fromSeq", "7"), ("limit", "5"), ("empty", "")],
            headers=[("X-Tag", "first"), ("Accept", "application/json"), ("X-Tag", "second")],
        )
    )

    event = only_event(fakes, "EventsFunction")
    assert event["headers"]["X-Tag"] == "second"
    assert event["multiValueHeaders"]["X-Tag"] == ["first", "second"]
    assert event["headers"]["Accept"] == "application/json"
    assert event["multiValueHeaders"]["Authorization"] == [PROJECT_TOKEN]
    assert event["queryStringParameters"] == {"fromSeq": "7", "limit": "5", "empty": ""}
    assert event["multiValueQueryStringParameters"] == {"fromSeq": ["1", "7"], "limit": ["5"], "empty": [""]}


def test_given_no_query_and_no_body_then_those_fields_are_null(
    gateway: LocalGateway, fakes: FakeFunctions
) -> None:
    gateway.handle(request("GET", "/v1/streams"))

    event = only_event(fakes, "EventsFunction")
    assert event["queryStringParameters"] is None
    assert event["multiValueQueryStringParameters"] is None
    assert event["pathParameters"] is None
    assert event["body"] is None
    assert event["isBase64Encoded"] is False


def test_given_a_utf8_body_then_it_arrives_as_text(gateway: LocalGateway, fakes: FakeFunctions) -> None:
    text = '{"stream":"s","events":[{"text":"héllo ✓"}]}'
    gateway.handle(request("POST", "/v1/remember", body=text.encode()))

    event = only_event(fakes, "RememberFunction")
    assert event["body"] == text
    assert event["isBase64Encoded"] is False


def test_given_a_non_utf8_body_then_it_arrives_base64_encoded(
    gateway: LocalGateway, fakes: FakeFunctions
) -> None:
    raw = b'{"text":"\xff\xfe\x80"}'
    gateway.handle(request("POST", "/v1/remember", body=raw))

    event = only_event(fakes, "RememberFunction")
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == raw


def test_given_a_body_over_10_mb_then_413_and_nothing_runs(
    gateway: LocalGateway, fakes: FakeFunctions
) -> None:
    response = gateway.handle(request("POST", "/v1/remember", body=b"x" * (MAX_REQUEST_BYTES + 1)))

    assert_error(response, 413, "request_too_large")
    assert fakes.calls == []


def test_given_a_body_of_exactly_10_mb_then_it_is_delivered(
    gateway: LocalGateway, fakes: FakeFunctions
) -> None:
    assert gateway.handle(request("POST", "/v1/remember", body=b"x" * MAX_REQUEST_BYTES)).status == 200
    assert len(only_event(fakes, "RememberFunction")["body"]) == MAX_REQUEST_BYTES


def test_given_a_request_then_the_event_request_id_is_the_response_header(
    gateway: LocalGateway, fakes: FakeFunctions
) -> None:
    first = gateway.handle(request("GET", "/v1/streams"))
    second = gateway.handle(request("GET", "/v1/streams"))

    ids = [event["requestContext"]["requestId"] for event in fakes.called("EventsFunction")]
    assert ids == [first.header("x-amzn-RequestId"), second.header("x-amzn-RequestId")]
    assert ids[0] != ids[1]


# --- The proxy response --------------------------------------------------------------------------


def test_given_a_base64_response_then_the_client_gets_the_decoded_bytes(
    gateway: LocalGateway, fakes: FakeFunctions
) -> None:
    payload = bytes(range(256))
    fakes.behaviours["EventsFunction"] = lambda _event: {
        "statusCode": 200,
        "headers": {"Content-Type": "application/zip"},
        "body": base64.b64encode(payload).decode(),
        "isBase64Encoded": True,
    }

    response = gateway.handle(request("GET", "/v1/streams"))

    assert response.status == 200
    assert response.body == payload
    assert response.header("Content-Type") == "application/zip"


def test_given_multi_value_headers_then_each_value_is_a_header_and_they_replace_the_single_one(
    gateway: LocalGateway, fakes: FakeFunctions
) -> None:
    fakes.behaviours["RememberFunction"] = lambda _event: {
        "statusCode": 202,
        "headers": {"Content-Type": "application/json", "set-cookie": "ignored=1", "X-One": "1"},
        "multiValueHeaders": {"Set-Cookie": ["a=1", "b=2"]},
        "body": '{"ok":true}',
    }

    response = gateway.handle(request("POST", "/v1/remember", body=b"{}"))

    assert response.status == 202
    assert [v for k, v in response.headers if k.lower() == "set-cookie"] == ["a=1", "b=2"]
    assert response.header("X-One") == "1"
    assert response.body == b'{"ok":true}'
    assert response.header("x-amzn-RequestId")


def test_given_the_function_raises_then_502_in_our_error_shape(
    gateway: LocalGateway, fakes: FakeFunctions
) -> None:
    def explode(_event: dict[str, Any]) -> Any:
        raise RuntimeError("bug")

    fakes.behaviours["RememberFunction"] = explode

    assert_error(gateway.handle(request("POST", "/v1/remember")), 502, "internal_error")


def test_given_the_functions_container_dies_then_502_in_our_error_shape_and_one_log_line(
    gateway: LocalGateway, fakes: FakeFunctions, caplog: pytest.LogCaptureFixture
) -> None:
    def crash(_event: dict[str, Any]) -> Any:
        raise FunctionCrashError("the container running functions.remember.app was killed by SIGKILL")

    fakes.behaviours["RememberFunction"] = crash

    with caplog.at_level("ERROR", logger="kaibo_local.gateway"):
        assert_error(gateway.handle(request("POST", "/v1/remember")), 502, "internal_error")
    (record,) = caplog.records
    assert "killed by SIGKILL" in record.getMessage()
    assert record.exc_info is None  # what happened, not a traceback of the gateway's own code


def test_given_the_authorizers_container_dies_then_the_authorizer_failure_response(
    gateway: LocalGateway, fakes: FakeFunctions, caplog: pytest.LogCaptureFixture
) -> None:
    def crash(_event: dict[str, Any]) -> Any:
        raise FunctionCrashError("the container running functions.authorizer.app was killed by SIGKILL")

    fakes.behaviours[AUTHORIZER] = crash

    with caplog.at_level("ERROR", logger="kaibo_local.gateway"):
        assert_error(gateway.handle(request("POST", "/v1/remember")), 500, "internal_error")
    assert fakes.functions_called() == []
    assert [record.exc_info for record in caplog.records] == [None]


@pytest.mark.parametrize(
    "result",
    [
        None,
        {"body": "{}"},
        {"statusCode": "abc"},
        {"statusCode": 200, "body": {"not": "a string"}},
        {"statusCode": 200, "body": "not base64!", "isBase64Encoded": True},
        {"statusCode": 200, "headers": {"X-Bad": "a\r\nInjected: yes"}},
        {"statusCode": 200, "multiValueHeaders": {"X-Bad": "not-a-list"}},
    ],
    ids=["none", "no-status", "bad-status", "dict-body", "bad-base64", "crlf-header", "multi-not-list"],
)
def test_given_a_malformed_proxy_response_then_502_in_our_error_shape(
    gateway: LocalGateway, fakes: FakeFunctions, result: Any
) -> None:
    fakes.behaviours["EventsFunction"] = lambda _event: result

    assert_error(gateway.handle(request("GET", "/v1/streams")), 502, "internal_error")


def test_given_no_answer_within_the_integration_timeout_then_504_in_our_error_shape(
    gateway: LocalGateway, fakes: FakeFunctions
) -> None:
    def too_slow(_event: dict[str, Any]) -> Any:
        raise IntegrationTimeoutError("the function gave no answer in time")  # as the containers' loader

    fakes.behaviours["RememberFunction"] = too_slow

    assert_error(gateway.handle(request("POST", "/v1/remember")), 504, "timeout")


def test_given_a_function_raises_a_timeout_of_its_own_then_502_not_the_integration_timeout(
    gateway: LocalGateway, fakes: FakeFunctions
) -> None:
    def socket_timeout(_event: dict[str, Any]) -> Any:
        raise TimeoutError("timed out")  # socket.timeout: the function's failure

    fakes.behaviours["RememberFunction"] = socket_timeout

    assert_error(gateway.handle(request("POST", "/v1/remember")), 502, "internal_error")


REMAINING_TIMES: list[int] = []


def record_remaining_time(_event: dict[str, Any], context: LambdaContext) -> None:
    """A handler for load_handler (this module is its code)."""
    REMAINING_TIMES.append(context.get_remaining_time_in_millis())


def test_given_an_in_process_function_then_its_context_counts_down_from_its_template_timeout() -> None:
    structure = next(spec for spec in function_specs(TEMPLATE) if spec.logical_id == "StructureFunction")
    spec = dataclasses.replace(structure, qualified_module=__name__, handler_name="record_remaining_time")
    context = LambdaContext("StructureFunction")
    REMAINING_TIMES.clear()

    load_handler(spec)({}, context)

    assert context.get_remaining_time_in_millis() == 3_000  # Lambda's default: the caller's copy is untouched
    assert structure.timeout_seconds == 300.0  # the template's Timeout
    assert 290_000 < REMAINING_TIMES[0] <= 300_000


def test_given_the_loader_fails_then_502_not_an_exception(fakes: FakeFunctions) -> None:
    def broken(spec: FunctionSpec) -> Handler:
        if spec.logical_id == AUTHORIZER:
            return fakes.loader(spec)
        raise ImportError("no module")

    gateway = LocalGateway(TEMPLATE, loader=broken)

    assert_error(gateway.handle(request("GET", "/v1/streams")), 502, "internal_error")


# --- Gateway responses ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "status", "code"),
    [
        ("THROTTLED", 429, "rate_limited"),
        ("INTEGRATION_TIMEOUT", 504, "timeout"),
        # Not in the template: the DEFAULT_4XX/5XX body with API Gateway's own status.
        ("BAD_REQUEST_PARAMETERS", 400, "bad_request"),
        ("UNSUPPORTED_MEDIA_TYPE", 415, "bad_request"),
        ("INTEGRATION_FAILURE", 504, "internal_error"),
        ("API_CONFIGURATION_ERROR", 500, "internal_error"),
    ],
)
def test_given_a_gateway_response_type_then_the_template_body_and_the_right_status(
    gateway: LocalGateway, kind: str, status: int, code: str
) -> None:
    response = gateway.gateway_response(kind, "req-123")

    assert response.status == status
    assert json.loads(response.body)["error"]["details"]["requestId"] == "req-123"
    assert json.loads(response.body)["error"]["code"] == code
    assert response.header("x-amzn-RequestId") == "req-123"


def test_given_throttled_then_the_template_retry_after_header(gateway: LocalGateway) -> None:
    assert gateway.gateway_response("THROTTLED", "r").header("Retry-After") == "1"


# --- One invocation at a time ------------------------------------------------------------------


@dataclass
class Blocking:
    """A function behaviour that holds its invocation until released, counting overlaps."""

    release: threading.Event = field(default_factory=threading.Event)
    entered: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    active: int = 0
    most_active: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, _event: dict[str, Any]) -> Any:
        with self.lock:
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        self.entered.release()
        self.release.wait(10)
        with self.lock:
            self.active -= 1
        return OK


@pytest.fixture
def blocking(fakes: FakeFunctions) -> Iterator[Blocking]:
    behaviour = Blocking()
    fakes.behaviours["EventsFunction"] = behaviour
    fakes.behaviours["RememberFunction"] = behaviour
    yield behaviour
    behaviour.release.set()


def test_given_concurrent_requests_then_the_gateway_invokes_functions_concurrently(
    gateway: LocalGateway, blocking: Blocking
) -> None:
    # Where functions run is the loader's business (containers in the stack): the gateway itself
    # must not serialize requests, or races that matter on AWS could never happen locally.
    responses: list[HttpResponse] = []
    threads = [
        threading.Thread(target=lambda r=r: responses.append(gateway.handle(r)))
        for r in (request("GET", "/v1/streams"), request("POST", "/v1/remember"))
    ]
    for thread in threads:
        thread.start()
    assert blocking.entered.acquire(timeout=10)
    assert blocking.entered.acquire(timeout=10)  # both are inside their function at once

    blocking.release.set()
    for thread in threads:
        thread.join(timeout=10)

    assert [r.status for r in responses] == [200, 200]
    assert blocking.most_active == 2


def test_given_in_process_handlers_then_invocations_run_one_at_a_time(
    monkeypatch: pytest.MonkeyPatch, blocking: Blocking
) -> None:
    # Powertools keeps the current event in a class attribute shared by every resolver: two
    # invocations at once in one process would read each other's event (and principal).
    module = type("FakeModule", (), {"lambda_handler": staticmethod(lambda event, _context: blocking(event))})
    monkeypatch.setattr(importlib, "import_module", lambda _name: module)
    specs = [
        s for s in function_specs(load_template()) if s.logical_id in ("EventsFunction", "RememberFunction")
    ]
    handlers = [load_handler(spec) for spec in specs]
    threads = [threading.Thread(target=h, args=({}, None)) for h in handlers]
    for thread in threads:
        thread.start()
    assert blocking.entered.acquire(timeout=10)  # one invocation is in its function...
    assert not blocking.entered.acquire(timeout=0.3)  # ...and the other waits for it
    blocking.release.set()
    for thread in threads:
        thread.join(timeout=10)
    assert blocking.most_active == 1


def test_given_a_slow_function_then_a_request_that_needs_no_function_is_not_held_up(
    gateway: LocalGateway, blocking: Blocking
) -> None:
    thread = threading.Thread(target=lambda: gateway.handle(request("GET", "/v1/streams")))
    thread.start()
    assert blocking.entered.acquire(timeout=10)

    started = time.monotonic()
    assert gateway.handle(request("GET", "/nowhere")).status == 404
    assert time.monotonic() - started < 5

    blocking.release.set()
    thread.join(timeout=10)
