"""Hostile input through the real handlers (issue #20's findings): every one a 4xx with its own
code, never a 500, and nothing written."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from kaibo_core.runtime import wiring
from kaibo_core.services.recall import RecallService
from kaibo_local.workers import sqs_event
from tests.integration.api import ADMIN_CONTEXT, FakeLambdaContext, call, handler_module, project_context
from tests.integration.test_recall_api import recall
from tests.integration.test_remember_api import message, new_project, remember
from tests.integration.test_structuring_api import take_job_messages

pytestmark = pytest.mark.usefixtures("handler_env")


def streams_of(project: str) -> list[Any]:
    reply = call(
        "events",
        "GET",
        "/v1/streams",
        context=project_context(project, "read"),
    )
    assert reply.status == 200
    return list(reply.body["streams"])


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        # A duplicate name: the last value would have been stored and hashed, not what was sent.
        (
            '{"stream": "s", "events": [{"idempotencyKey": "k", "kind": "message", '
            '"payload": {"role": "user", "text": "one", "text": "two"}}]}',
            "duplicate_key",
        ),
        ('{"stream": "s", "stream": "t", "events": []}', "duplicate_key"),
        # Nesting 10,000 deep in the payload and in the body: was a 500 (RecursionError).
        (
            '{"stream": "s", "events": [{"idempotencyKey": "k", "kind": "tool_call", "payload": '
            '{"tool": "t", "input": ' + "[" * 10_000 + "]" * 10_000 + "}}]}",
            "json_too_deep",
        ),
        ("[" * 10_000 + "]" * 10_000, "json_too_deep"),
        # An integer of 5,000 digits: was a 500 (Python's digit limit).
        (
            '{"stream": "s", "events": [{"idempotencyKey": "k", "kind": "tool_call", '
            '"payload": {"tool": "t", "input": ' + "9" * 5000 + "}}]}",
            "number_too_long",
        ),
    ],
)
def test_given_json_beyond_the_reader_limits_then_400_with_its_code_and_nothing_written(
    raw: str, code: str
) -> None:
    project = new_project()
    reply = remember(project, raw_body=raw)
    assert reply.status == 400, reply.body
    assert reply.body["error"]["code"] == code
    assert streams_of(project) == []


@pytest.mark.parametrize("body", ["[" * 10_000 + "]" * 10_000, '{"question": "a", "question": "b"}'])
def test_given_a_hostile_recall_body_then_400(body: str) -> None:
    reply = call(
        "recall",
        "POST",
        "/v1/recall",
        raw_body=body,
        context={
            "role": "project",
            "keyId": "k",
            "projectId": new_project(),
            "scopes": "read",
            "principalId": "k",
        },
    )
    assert reply.status == 400, reply.body


@pytest.mark.parametrize("wait", ["yes", "true", 1])
def test_given_a_wait_that_is_not_a_boolean_then_422_and_nothing_written(wait: Any) -> None:
    project = new_project()
    reply = remember(project, {"stream": "s", "events": [message("k")], "wait": wait})
    assert reply.status == 422, reply.body
    assert streams_of(project) == []


@pytest.mark.parametrize("budget", ["100", True, 100.5])
def test_given_a_budget_that_is_not_an_integer_then_422(budget: Any) -> None:
    reply = recall(new_project(), {"question": "release target", "budget": budget})
    assert reply.status == 422, reply.body
    assert reply.body["error"]["code"] == "invalid_request"


@pytest.mark.parametrize(
    ("field", "value"),
    [("occurredAt", "0001-01-01T00:00:00+14:00"), ("occurredAt", "0500-01-01T00:00:00Z")],
)
def test_given_an_occurred_at_nothing_could_read_back_then_422_not_500(field: str, value: str) -> None:
    project = new_project()
    reply = remember(project, {"stream": "s", "events": [message("k", **{field: value})]})
    assert reply.status == 422, reply.body
    assert reply.body["error"]["code"] in {"invalid_timestamp", "occurred_at_too_early"}
    assert streams_of(project) == []


@pytest.mark.parametrize("as_of", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_given_an_as_of_outside_the_representable_years_then_422_not_500(as_of: str) -> None:
    reply = recall(new_project(), {"question": "release target", "asOf": as_of})
    assert reply.status == 422, reply.body
    assert reply.body["error"]["code"] == "invalid_timestamp"


def test_given_a_project_key_asked_with_the_admin_scope_then_422() -> None:
    created = call("admin", "POST", "/v1/admin/projects", body={"name": "scopes"}, context=ADMIN_CONTEXT)
    assert created.status == 201
    project = created.body["projectId"]
    reply = call(
        "admin",
        "POST",
        f"/v1/admin/projects/{project}/keys",
        resource="/v1/admin/projects/{project_id}/keys",
        path_parameters={"project_id": project},
        body={"scopes": ["read", "admin"]},
        context=ADMIN_CONTEXT,
    )
    assert reply.status == 422, reply.body


class _Broken:
    """A structurer that fails: the structure function must say so in one log line."""

    name = "broken"

    def structure(self, event: Any, search: Any) -> list[Any]:
        raise RuntimeError(f"cannot structure {event.text}")  # text in the message: must not be logged


def test_given_a_structuring_failure_then_one_log_line_with_ids_and_the_error_class_only(
    handler_env: Any, caplog: pytest.LogCaptureFixture
) -> None:
    project = new_project()
    marker = "zanzibar-secret-marker"
    reply = remember(project, {"stream": "s", "events": [message("k", f"{marker} plans")]})
    job_id = reply.body["jobId"]
    messages = take_job_messages(handler_env, {job_id})
    service = wiring.build_structuring_service(_Broken())
    with caplog.at_level(logging.INFO):
        result = handler_module("structure").lambda_handler(
            sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:q"), FakeLambdaContext(), service=service
        )
    assert len(result["batchItemFailures"]) == 1
    failures = [r for r in caplog.records if r.getMessage() == "structuring failed"]
    assert len(failures) == 1
    assert failures[0].__dict__["jobId"] == job_id
    assert failures[0].__dict__["error"] == "RuntimeError"
    assert marker not in caplog.text
    assert marker not in json.dumps([r.__dict__ for r in caplog.records], default=str)


class _Failing(RecallService):
    """A recall service that fails with people's words in its message."""

    def __init__(self) -> None:
        pass  # nothing to read from: it fails first

    def recall(self, *_: Any, **__: Any) -> Any:
        raise RuntimeError("zanzibar-secret-marker in a message")


def test_given_a_fault_of_ours_then_500_and_one_log_line_without_the_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failing = _Failing()
    with caplog.at_level(logging.INFO):
        reply = call(
            "recall",
            "POST",
            "/v1/recall",
            body={"question": "release target"},
            context=project_context(new_project(), "read"),
            services={"service": failing},
        )
    assert reply.status == 500
    assert reply.body["error"]["code"] == "internal_error"
    (line,) = [r for r in caplog.records if r.getMessage() == "unhandled error"]
    assert line.__dict__["error"] == "RuntimeError"
    assert line.__dict__["where"].startswith("test_hostile_input.py:")
    assert line.exc_info is None  # no traceback text
    assert "zanzibar-secret-marker" not in caplog.text
