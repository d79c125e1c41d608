"""The structure function's metrics (CloudWatch embedded metric format on stdout): a Bedrock model
that fails is seen as StructurerFallbacks, which StructurerFallbacksAlarm watches."""

from __future__ import annotations

import json
import os
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from kaibo_core.adapters.bedrock_structurer import BedrockStructurer
from kaibo_core.core.structuring.rules import RuleStructurer
from kaibo_core.runtime import wiring
from kaibo_core.runtime.observability import METRICS_NAMESPACE
from kaibo_local.workers import sqs_event
from tests.fixtures.faults import Fault, injected, mentions
from tests.integration.api import FakeLambdaContext, get_job, handler_module
from tests.integration.iam_calls import checked_invocation
from tests.integration.test_remember_api import message, new_project, remember
from tests.integration.test_structuring_api import take_job_messages

QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:q"


def published_metrics(stdout: str) -> dict[str, list[float]]:
    """Each metric's values in the EMF documents a handler printed (one JSON document a line)."""
    values: dict[str, list[float]] = {}
    for line in stdout.splitlines():
        if not line.startswith("{") or '"_aws"' not in line:
            continue
        document = json.loads(line)
        for directive in document["_aws"]["CloudWatchMetrics"]:
            # This stack's series: the service dimension is its name (POWERTOOLS_SERVICE_NAME)
            assert directive["Namespace"] == METRICS_NAMESPACE
            assert directive["Dimensions"] == [["service"]]
            assert document["service"] == os.environ["POWERTOOLS_SERVICE_NAME"]
            for metric in directive["Metrics"]:
                value = document[metric["Name"]]
                values.setdefault(metric["Name"], []).extend(value if isinstance(value, list) else [value])
    return values


def structure_with_model(handler_env: Any, job_ids: set[str], client: Any) -> dict[str, Any]:
    return deliver(take_job_messages(handler_env, job_ids), client)


def deliver(messages: list[dict[str, Any]], client: Any) -> dict[str, Any]:
    """The structure function on ``messages``, its structurer the Bedrock model behind ``client``."""
    structurer = BedrockStructurer(client, "anthropic.claude-3-haiku-20240307-v1:0", RuleStructurer())
    service = wiring.build_structuring_service(structurer)
    handler = handler_module("structure").lambda_handler
    result: dict[str, Any] = checked_invocation(
        "structure", handler, sqs_event(messages, QUEUE_ARN), FakeLambdaContext(), service=service
    )
    return result


def remember_three_events() -> tuple[str, str]:
    """A new project and the job of the three events it remembered."""
    project = new_project()
    events = [message(f"k{i}", text) for i, text in enumerate(("Ship it", "Ann owns it", "Bob reviews"))]
    reply = remember(project, {"stream": "s", "events": events})
    assert reply.status == 202, reply.body
    return project, reply.body["jobId"]


def model_client() -> Any:
    return boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )


def refuse_calls(stubber: Stubber, calls: int) -> None:
    """The model refuses the next ``calls`` calls: the function's role may not call it."""
    for _ in range(calls):
        stubber.add_client_error("converse", service_error_code="AccessDeniedException", http_status_code=403)


def test_given_a_model_that_refuses_every_call_then_each_event_is_published_as_a_fallback(
    handler_env: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a job of three events and a model the function's role may not call
    _, job_id = remember_three_events()
    client = model_client()
    capsys.readouterr()

    # When the structure function structures it
    with Stubber(client) as stubber:
        refuse_calls(stubber, 3)
        result = structure_with_model(handler_env, {job_id}, client)
        stubber.assert_no_pending_responses()

    # Then the rules structured every event (the job succeeded) and the metric counts all three
    assert result["batchItemFailures"] == []
    published = published_metrics(capsys.readouterr().out)
    assert published["StructurerFallbacks"] == [3]
    assert published["EventsStructured"] == [3]


def test_given_a_job_that_fails_after_its_model_failed_then_its_fallbacks_are_published_all_the_same(
    handler_env: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a job of three events, a model refused on each, and the third event's commit refused
    project, job_id = remember_three_events()
    client = model_client()
    third_commit = Fault("TransactWriteItems", "throughput", nth=3, when=mentions(project, '":replaced"'))
    capsys.readouterr()

    # When the structure function structures it
    with Stubber(client) as stubber, injected(wiring.dynamodb(), handler_env.dynamodb, third_commit):
        refuse_calls(stubber, 3)
        result = structure_with_model(handler_env, {job_id}, client)
        stubber.assert_no_pending_responses()

    # Then the job's message fails (retried), and the three events the model failed on are published
    assert third_commit.fired == ["TransactWriteItems"]
    assert len(result["batchItemFailures"]) == 1
    published = published_metrics(capsys.readouterr().out)
    assert published["StructurerFallbacks"] == [3]
    assert published["EventsStructured"] == [3]
    assert published["MemoriesStructured"] == [2]  # the first two events' memories were committed


def test_given_a_job_delivered_again_after_its_events_were_committed_then_they_are_not_counted_again(
    handler_env: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a job whose three events were committed but which was not marked done (its message failed)
    project, job_id = remember_three_events()
    client = model_client()
    messages = take_job_messages(handler_env, {job_id})
    job_finished = Fault("UpdateItem", "throughput", when=mentions(project, "memoryIds = :ids"))
    capsys.readouterr()
    with Stubber(client) as stubber, injected(wiring.dynamodb(), handler_env.dynamodb, job_finished):
        refuse_calls(stubber, 3)
        first = deliver(messages, client)
    assert job_finished.fired == ["UpdateItem"]
    assert len(first["batchItemFailures"]) == 1
    assert published_metrics(capsys.readouterr().out)["EventsStructured"] == [3]

    # When SQS delivers its message again
    with Stubber(client) as stubber:
        again = deliver(messages, client)

    # Then the job is done, and the redelivery counts no event, memory or fallback a second time
    assert again["batchItemFailures"] == []
    assert get_job(project, job_id).body["status"] == "done"
    published = published_metrics(capsys.readouterr().out)
    assert published["EventsStructured"] == [0]
    assert published["MemoriesStructured"] == [0]
    assert published["StructurerFallbacks"] == [0]


def test_given_a_model_that_answers_then_no_fallback_is_published(
    handler_env: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    project = new_project()
    reply = remember(project, {"stream": "s", "events": [message("k1", "Ship it")]})
    client = model_client()
    answer = {"drafts": [{"type": "decision", "content": "Ship it", "confidence": 0.9}]}
    capsys.readouterr()

    with Stubber(client) as stubber:
        stubber.add_response(
            "converse",
            {
                "output": {
                    "message": {
                        "role": "assistant",
                        "content": [
                            {"toolUse": {"toolUseId": "t1", "name": "record_memories", "input": answer}}
                        ],
                    }
                },
                "stopReason": "tool_use",
                "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
                "metrics": {"latencyMs": 5},
            },
        )
        result = structure_with_model(handler_env, {reply.body["jobId"]}, client)

    assert result["batchItemFailures"] == []
    assert published_metrics(capsys.readouterr().out)["StructurerFallbacks"] == [0]
