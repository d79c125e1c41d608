"""Parameters read exactly as documented (issue #20): query-string numbers are plain decimal digits
within range, a project key cannot be given the admin scope, and the auth scheme is read in any
case."""

from __future__ import annotations

from typing import Any

import pytest

from kaibo_core.api.models import MAX_QUERY_SEQ
from tests.integration.api import ADMIN_CONTEXT, Reply, call, project_context
from tests.integration.test_keys_and_authorizer import authorize, create_project
from tests.integration.test_remember_api import new_project

pytestmark = pytest.mark.usefixtures("handler_env")


def events_page(query: list[tuple[str, str]]) -> Reply:
    return call(
        "events",
        "GET",
        "/v1/streams/s/events",
        resource="/v1/streams/{stream}/events",
        path_parameters={"stream": "s"},
        query=query,
        context=project_context(new_project()),
    )


def streams_page(query: list[tuple[str, str]]) -> Reply:
    return call("events", "GET", "/v1/streams", query=query, context=project_context(new_project()))


def ledger_page(query: list[tuple[str, str]]) -> Reply:
    return call("memories", "GET", "/v1/ledger", query=query, context=project_context(new_project()))


def assert_invalid(reply: Reply, field: str) -> None:
    assert reply.status == 422, reply.body
    assert reply.body["error"]["code"] == "invalid_request"
    assert [e["field"] for e in reply.body["error"]["details"]["errors"]] == [field]


# Each of these int() would take (and did: a 200 for a number the caller did not write).
LAX_NUMBERS = [" 5", "5 ", "5\n", "+5", "5.0", "1_000", "05.", "-0"]


@pytest.mark.parametrize("value", LAX_NUMBERS)
@pytest.mark.parametrize("page", [events_page, streams_page])
def test_given_a_limit_that_is_not_plain_digits_then_422(page: Any, value: str) -> None:
    assert_invalid(page([("limit", value)]), "query.limit")


@pytest.mark.parametrize("value", LAX_NUMBERS)
@pytest.mark.parametrize("page", [events_page, ledger_page])
def test_given_a_from_seq_that_is_not_plain_digits_then_422(page: Any, value: str) -> None:
    assert_invalid(page([("fromSeq", value)]), "query.fromSeq")


@pytest.mark.parametrize("value", [str(MAX_QUERY_SEQ + 1), "9" * 40, "9" * 5000])
@pytest.mark.parametrize("page", [events_page, ledger_page])
def test_given_a_from_seq_past_any_sequence_number_then_422(page: Any, value: str) -> None:
    # 40 digits: DynamoDB holds 38 (moto does not check; the service would answer 500).
    assert_invalid(page([("fromSeq", value)]), "query.fromSeq")


@pytest.mark.parametrize("page", [events_page, ledger_page])
def test_given_plain_digits_then_the_page_is_served(page: Any) -> None:
    assert page([("fromSeq", str(MAX_QUERY_SEQ))]).status == 200
    assert events_page([("fromSeq", "007"), ("limit", "1000")]).status == 200
    assert streams_page([("limit", "1")]).status == 200


@pytest.mark.parametrize("scopes", [["admin"], ["read", "admin"]])
def test_given_the_admin_scope_for_a_project_key_then_422_saying_admin_is_the_deployments_key(
    scopes: list[str],
) -> None:
    project = create_project()["projectId"]
    reply = call(
        "admin",
        "POST",
        f"/v1/admin/projects/{project}/keys",
        resource="/v1/admin/projects/{project_id}/keys",
        path_parameters={"project_id": project},
        body={"scopes": scopes},
        context=ADMIN_CONTEXT,
    )
    assert_invalid(reply, "scopes")
    assert "deployment's admin key" in reply.body["error"]["message"]


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
def test_given_the_bearer_scheme_in_any_case_then_the_key_is_accepted(scheme: str) -> None:
    created = create_project()
    policy = authorize(f"{scheme} {created['apiKey']}")
    assert policy["context"]["projectId"] == created["projectId"]
