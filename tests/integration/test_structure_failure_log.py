"""A structuring failure through the real structure function: the batch processor swallows it, so
the function writes one log line per failed record naming the project, the job and its events
(issue #20), and never the events' text."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from kaibo_core.core.models.jobs import MAX_RECEIVE_COUNT
from kaibo_core.runtime import wiring
from kaibo_local.workers import sqs_event
from tests.fixtures.scripted_structurer import ScriptedStructurer
from tests.integration.api import FakeLambdaContext, handler_module
from tests.integration.test_remember_api import message, new_project, remember
from tests.integration.test_structuring_api import take_job_messages

MARKER = "zanzibar-secret-marker"
QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:q"


class _FailsOnMarker(ScriptedStructurer):
    """Structures as scripted, but fails on an event whose text holds the marker."""

    def structure(self, event: Any, search: Any) -> list[Any]:
        if MARKER in event.text:
            raise RuntimeError(f"cannot structure {event.text}")  # text in the message: never logged
        return list(super().structure(event, search))


def failure_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == "structuring failed"]


def test_given_the_second_event_fails_then_one_line_names_project_job_events_and_the_failing_one(
    handler_env: Any, caplog: pytest.LogCaptureFixture
) -> None:
    project = new_project()
    reply = remember(
        project, {"stream": "s", "events": [message("k1", "Ship it"), message("k2", f"{MARKER} plans")]}
    )
    assert reply.status == 202, reply.body
    job_id = reply.body["jobId"]
    event_ids = [e["id"] for e in reply.body["events"]]
    messages = take_job_messages(handler_env, {job_id})
    service = wiring.build_structuring_service(_FailsOnMarker())
    with caplog.at_level(logging.INFO):
        result = handler_module("structure").lambda_handler(
            sqs_event(messages, QUEUE_ARN), FakeLambdaContext(), service=service
        )
    assert [f["itemIdentifier"] for f in result["batchItemFailures"]] == [messages[0]["MessageId"]]
    (line,) = failure_lines(caplog)
    fields = line.__dict__
    assert fields["projectId"] == project
    assert fields["jobId"] == job_id
    assert fields["messageId"] == messages[0]["MessageId"]
    assert fields["eventIds"] == event_ids
    assert fields["eventId"] == event_ids[1]
    assert fields["attempt"] == 1
    assert fields["jobFailed"] is False
    assert fields["error"] == "RuntimeError"
    assert MARKER not in caplog.text
    assert MARKER not in json.dumps([r.__dict__ for r in caplog.records], default=str)


def test_given_the_last_attempt_fails_then_its_line_says_the_job_failed(
    handler_env: Any, caplog: pytest.LogCaptureFixture
) -> None:
    project = new_project()
    reply = remember(project, {"stream": "s", "events": [message("k1", f"{MARKER} plans")]})
    job_id = reply.body["jobId"]
    messages = take_job_messages(handler_env, {job_id})
    service = wiring.build_structuring_service(_FailsOnMarker())
    receives = range(1, MAX_RECEIVE_COUNT + 1)
    with caplog.at_level(logging.INFO):
        for count in receives:
            delivered = [{**m, "Attributes": {"ApproximateReceiveCount": str(count)}} for m in messages]
            handler_module("structure").lambda_handler(
                sqs_event(delivered, QUEUE_ARN), FakeLambdaContext(), service=service
            )
    lines = failure_lines(caplog)
    assert [r.__dict__["receiveCount"] for r in lines] == list(receives)
    assert [r.__dict__["attempt"] for r in lines] == list(receives)
    assert [r.__dict__["jobFailed"] for r in lines] == [False] * (MAX_RECEIVE_COUNT - 1) + [True]
    assert MARKER not in caplog.text
