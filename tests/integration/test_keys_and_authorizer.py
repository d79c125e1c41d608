"""Projects, API keys and the token authorizer, through the real handlers and the emulator."""

from __future__ import annotations

from typing import Any

import pytest

from kaibo_core.core.storage_keys import api_key_key
from tests.integration.api import (
    ADMIN_CONTEXT,
    FakeLambdaContext,
    Reply,
    call,
    handler_module,
    project_context,
)

METHOD_ARN = "arn:aws:execute-api:us-east-1:123456789012:abcdef1234/prod/POST/v1/remember"


def authorize(token: str | None) -> dict[str, Any]:
    event = {"type": "TOKEN", "methodArn": METHOD_ARN}
    if token is not None:
        event["authorizationToken"] = token
    return handler_module("authorizer").lambda_handler(event, FakeLambdaContext())


def add_key(project_id: str, body: dict[str, Any]) -> Reply:
    return call(
        "admin",
        "POST",
        f"/v1/admin/projects/{project_id}/keys",
        resource="/v1/admin/projects/{project_id}/keys",
        path_parameters={"project_id": project_id},
        body=body,
        context=ADMIN_CONTEXT,
    )


def create_project(name: str = "demo") -> dict[str, Any]:
    reply = call("admin", "POST", "/v1/admin/projects", body={"name": name}, context=ADMIN_CONTEXT)
    assert reply.status == 201, reply.body
    return reply.body


def test_given_admin_when_creating_a_project_then_its_key_authorizes_to_that_project(handler_env) -> None:
    created = create_project()
    assert created["apiKey"].startswith(f"kb_{created['keyId']}_")
    policy = authorize(f"Bearer {created['apiKey']}")
    assert policy["context"]["projectId"] == created["projectId"]
    assert policy["context"]["scopes"] == "forget read write"
    statements = {(s["Effect"], s["Resource"]) for s in policy["policyDocument"]["Statement"]}
    assert statements == {
        ("Allow", "arn:aws:execute-api:us-east-1:123456789012:abcdef1234/*/*/v1/*"),
        ("Deny", "arn:aws:execute-api:us-east-1:123456789012:abcdef1234/*/*/v1/admin/*"),
    }


def test_given_a_created_key_then_only_a_salted_hash_is_stored(handler_env) -> None:
    created = create_project()
    secret = created["apiKey"].split("_", 2)[2]
    item = handler_env.dynamodb.get_item(
        TableName=handler_env.tables["ProjectsTable"], Key={"pk": {"S": api_key_key(created["keyId"])["pk"]}}
    )["Item"]
    stored = repr(item)
    assert secret not in stored
    assert created["apiKey"] not in stored
    assert {"salt", "secretHash", "projectId", "scopes"} <= item.keys()


@pytest.mark.parametrize(
    "token",
    [None, "", "Bearer", "Basic abc", "Bearer kb_0123456789abcdef_" + "A" * 43, "Bearer not-a-key"],
)
def test_given_a_missing_or_unknown_key_then_unauthorized(handler_env, token) -> None:
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        authorize(token)


def test_given_a_known_key_id_with_a_wrong_secret_then_unauthorized(handler_env) -> None:
    created = create_project()
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        authorize(f"Bearer kb_{created['keyId']}_{'B' * 43}")


def test_given_a_revoked_key_then_unauthorized(handler_env) -> None:
    created = create_project()
    reply = call(
        "admin",
        "DELETE",
        f"/v1/admin/keys/{created['keyId']}",
        resource="/v1/admin/keys/{key_id}",
        path_parameters={"key_id": created["keyId"]},
        context=ADMIN_CONTEXT,
    )
    assert reply.status == 204
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        authorize(f"Bearer {created['apiKey']}")


def test_given_the_admin_key_then_only_admin_routes_are_allowed(handler_env) -> None:
    policy = authorize(f"Bearer {handler_env.admin_key}")
    assert policy["context"]["role"] == "admin"
    assert "projectId" not in policy["context"]
    assert [(s["Effect"], s["Resource"]) for s in policy["policyDocument"]["Statement"]] == [
        ("Allow", "arn:aws:execute-api:us-east-1:123456789012:abcdef1234/*/*/v1/admin/*")
    ]


def test_given_a_project_when_adding_a_read_key_then_it_has_only_read(handler_env) -> None:
    created = create_project()
    reply = add_key(created["projectId"], {"scopes": ["read"]})
    assert reply.status == 201, reply.body
    policy = authorize(f"Bearer {reply.body['apiKey']}")
    assert policy["context"]["scopes"] == "read"
    assert policy["context"]["projectId"] == created["projectId"]


def test_given_no_scopes_when_adding_a_key_then_it_reads_and_writes_but_cannot_erase(handler_env) -> None:
    created = create_project()
    reply = add_key(created["projectId"], {})
    assert reply.status == 201, reply.body
    assert reply.body["scopes"] == ["read", "write"]
    assert authorize(f"Bearer {reply.body['apiKey']}")["context"]["scopes"] == "read write"


def test_given_an_unknown_project_when_adding_a_key_then_404_and_no_key_stored(handler_env) -> None:
    missing = "prj_" + "0" * 26
    reply = add_key(missing, {"scopes": ["read"]})
    assert reply.status == 404
    assert reply.body["error"]["code"] == "project_not_found"


def test_given_a_project_key_on_an_admin_route_then_403(handler_env) -> None:
    reply = call("admin", "POST", "/v1/admin/projects", body={"name": "x"}, context=project_context("prj_x"))
    assert reply.status == 403
    assert reply.body["error"]["code"] == "insufficient_scope"


def test_given_an_unknown_scope_then_422(handler_env) -> None:
    created = create_project()
    reply = add_key(created["projectId"], {"scopes": ["root"]})
    assert reply.status == 422
