"""Calling the real handlers in-process with API Gateway events."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kaibo_local.apigw_events import rest_proxy_event
from tests.integration.iam_calls import checked_invocation


@dataclass
class FakeLambdaContext:
    function_name: str = "kaibo-test"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:kaibo-test"
    aws_request_id: str = "test-request"

    def get_remaining_time_in_millis(self) -> int:
        return 10_000  # the template's default Timeout, untouched


@dataclass
class Reply:
    status: int
    body: Any
    headers: dict[str, str]


def handler_module(name: str) -> ModuleType:
    return importlib.import_module(f"functions.{name}.app")


def project_context(project: str, scopes: str = "forget read write") -> dict[str, Any]:
    return {
        "role": "project",
        "keyId": "0123456789abcdef",
        "projectId": project,
        "scopes": scopes,
        "principalId": "0123456789abcdef",
    }


ADMIN_CONTEXT = {"role": "admin", "keyId": "admin", "scopes": "admin", "principalId": "admin"}


def call(
    function: str,
    method: str,
    path: str,
    *,
    resource: str | None = None,
    path_parameters: dict[str, str] | None = None,
    body: Any = None,
    raw_body: bytes | str | None = None,
    query: list[tuple[str, str]] | None = None,
    context: dict[str, Any] | None = None,
    headers: list[tuple[str, str]] | None = None,
    services: dict[str, Any] | None = None,
    iam_checked: bool = True,
    lambda_context: Any = None,
) -> Reply:
    """One request through the function's handler; ``services`` are injected into it
    (``lambda_handler(event, context, **services)``), else the function wires its own. Every AWS
    call it makes must be allowed by the function's role in template.yaml (tests/integration/iam_calls.py),
    unless ``iam_checked`` is False: a test that runs another function's code inside this one.
    ``lambda_context``: the invocation's context (default: a FakeLambdaContext with 10 s left)."""
    payload = raw_body if raw_body is not None else (json.dumps(body) if body is not None else None)
    event = rest_proxy_event(
        method,
        path,
        resource=resource,
        path_parameters=path_parameters,
        query=query or [],
        headers=[("Content-Type", "application/json"), *(headers or [])],
        body=payload,
        authorizer=context,
    )
    handler = handler_module(function).lambda_handler

    def invoke() -> dict[str, Any]:
        answer: dict[str, Any] = handler(event, lambda_context or FakeLambdaContext(), **(services or {}))
        return answer

    result = checked_invocation(function, invoke) if iam_checked else invoke()
    text = result.get("body") or ""
    response_headers = {
        **{name: values[-1] for name, values in (result.get("multiValueHeaders") or {}).items()},
        **(result.get("headers") or {}),
    }
    if response_headers.get("Content-Type", "").startswith("text/event-stream"):
        return Reply(result["statusCode"], text, response_headers)  # the event stream, as text
    return Reply(result["statusCode"], json.loads(text) if text else None, response_headers)


def get_job(project: str, job_id: str) -> Reply:
    """``GET /v1/jobs/{job_id}`` with a read key of ``project``."""
    return call(
        "memories",
        "GET",
        f"/v1/jobs/{job_id}",
        resource="/v1/jobs/{job_id}",
        path_parameters={"job_id": job_id},
        context=project_context(project, "read"),
    )
