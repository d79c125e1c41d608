"""What a function's handler asks of AWS, as IAM actions on template resources, checked against the
function's policy in template.yaml: a call its role would be refused on AWS fails the test here
(the emulator checks no permissions). ``call()`` and the scheduled and queue handlers' test helpers
run every handler through ``checked_invocation``.

Recorded: every call made through the container's clients (``wiring.dynamodb()``, ``wiring.sqs()``,
the KMS and API Gateway clients), as the IAM actions AWS evaluates for it (a transaction needs each
item's action; ``SendMessageBatch`` needs ``sqs:SendMessage``; API Gateway's actions are the HTTP
verb on the resource's path, ``apigateway:POST`` on ``/apikeys``; a KMS call whose encryption
context names a ``purpose`` needs a grant conditioned on that purpose, one that names a ``webhook``
a grant conditioned on its presence). A grant under a template
condition counts when the condition holds with the template's default parameters. Reads on
recall's direct path bypass botocore and are not seen; services a test injects with clients of
its own are not seen either.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any, TypeVar

from kaibo_local.template import condition_holds, load_template, parameter_values
from tests.contract.test_template import permissions

_T = TypeVar("_T")
_NAMED = re.compile(r"kaibo-(?P<logical>[A-Za-z]+)-[0-9a-f]+(?:\.fifo)?")
_TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}
_SQS_ACTIONS = {"SendMessageBatch": "SendMessage", "DeleteMessageBatch": "DeleteMessage"}
#: API Gateway operations: (HTTP verb, resource path with ``{usagePlanId}`` in place).
_APIGATEWAY_ACTIONS = {
    "CreateApiKey": ("POST", "/apikeys"),
    "GetApiKeys": ("GET", "/apikeys"),
    "CreateUsagePlanKey": ("POST", "/usageplans/{usagePlanId}/keys"),
}
_ONLY_IF = re.compile(r" if (?P<condition>\w+)$")


def logical_id(function_dir: str) -> str:
    """``functions/webhook_dispatch`` → ``WebhookDispatchFunction``."""
    return "".join(part.title() for part in function_dir.split("_")) + "Function"


@cache
def policy(function: str) -> frozenset[tuple[str, str]]:
    """The function's grants; one under a template condition when it holds by default."""
    template = load_template()
    defaults = parameter_values(template)
    granted = set()
    for action, resource in permissions(template, function):
        only_if = _ONLY_IF.search(resource)
        if only_if is None:
            granted.add((action, resource))
        elif condition_holds(template, only_if["condition"], defaults):
            granted.add((action, resource[: only_if.start()]))
    return frozenset(granted)


def _usage_plan(plan_id: str) -> str:
    """The usage plan as the template's policy names it (the one the function is configured with)."""
    return "${ProjectUsagePlan}" if plan_id == os.environ.get("KAIBO_USAGE_PLAN_ID") else plan_id


def _logical(physical: str) -> str:
    match = _NAMED.fullmatch(physical.rsplit("/", 1)[-1])
    return match.group("logical") if match else physical


def iam_pairs(service: str, operation: str, params: dict[str, Any]) -> list[tuple[str, str]]:
    """The (action, resource) pairs IAM checks for one API call."""
    if service == "kms":  # every grant is conditioned on the context: a purpose, or a webhook named
        context = params.get("EncryptionContext", {})
        if "purpose" in context:
            return [(f"kms:{operation}", f"WebhookSecretsKey for purpose {context['purpose']}")]
        return [
            (
                f"kms:{operation}",
                "WebhookSecretsKey" + (" for webhook contexts" if "webhook" in context else ""),
            )
        ]
    if service == "apigateway":
        verb, path = _APIGATEWAY_ACTIONS[operation]
        return [
            (
                f"apigateway:{verb}",
                "apigateway:" + path.format(usagePlanId=_usage_plan(params.get("usagePlanId", ""))),
            )
        ]
    if service == "sqs":
        return [(f"sqs:{_SQS_ACTIONS.get(operation, operation)}", _logical(params.get("QueueUrl", "?")))]
    if operation in ("TransactWriteItems", "TransactGetItems"):
        return [
            (f"dynamodb:{_TRANSACT_ACTIONS[kind]}", _logical(body["TableName"]))
            for item in params["TransactItems"]
            for kind, body in item.items()
        ]
    if operation in ("BatchGetItem", "BatchWriteItem"):
        return [(f"dynamodb:{operation}", _logical(table)) for table in params["RequestItems"]]
    resource = _logical(params.get("TableName", "?"))
    if params.get("IndexName"):
        resource += f"/index/{params['IndexName']}"
    return [(f"dynamodb:{operation}", resource)]


def _container_clients() -> list[Any]:
    """The clients the wiring hands to the function's stores (made on first use, as in Lambda)."""
    from kaibo_core.adapters import aws
    from kaibo_core.runtime import wiring

    clients = []
    for make in (wiring.dynamodb, wiring.sqs, aws.kms_client, aws.apigateway_client):
        try:
            clients.append(make())
        except Exception:
            continue
    return clients


@contextmanager
def recorded_calls() -> Iterator[set[tuple[str, str]]]:
    seen: set[tuple[str, str]] = set()

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        seen.update(iam_pairs(model.service_model.service_name, model.name, params))

    clients = _container_clients()
    for client in clients:
        client.meta.events.register("provide-client-params.*.*", record)
    try:
        yield seen
    finally:
        for client in clients:
            client.meta.events.unregister("provide-client-params.*.*", record)


def checked_invocation(function_dir: str, handler: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``handler(*args, **kwargs)``, then: every call it made is allowed by the function's policy."""
    function = logical_id(function_dir)
    with recorded_calls() as seen:
        result = handler(*args, **kwargs)
    refused = sorted(seen - policy(function))
    assert not refused, f"{function}'s role in template.yaml does not allow {refused}"
    return result
