"""Tenancy (ARCHITECTURE.md, invariant 7), route by route: project B given project A's ids,
streams, questions and jobs answers exactly as for things that do not exist.

The routes come from template.yaml (what API Gateway serves), so a new route without a case here
fails ``test_given_every_route_then_it_has_an_isolation_case``. Every stored item carries its
project in its key (one module builds them: kaibo_core/core/storage_keys.py), checked by a scan of
every table.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from kaibo_local.template import load_template, routes
from tests.integration.api import ADMIN_CONTEXT, Reply, call, project_context
from tests.integration.test_remember_api import message, new_project, remember

pytestmark = pytest.mark.usefixtures("handler_env")

#: What a reply may differ in between the two sides: ids of the request, and the moment asked.
_VOLATILE = re.compile(r'"(requestId|asOf)": "[^"]*"')


@dataclass(frozen=True)
class ProjectA:
    project: str
    stream: str
    key: str
    memory_id: str
    job_id: str
    question: str


def normalized(reply: Reply, *ids: str) -> tuple[int, str]:
    text = json.dumps(reply.body, sort_keys=True)
    for number, value in enumerate(ids):
        text = text.replace(value, f"<id{number}>")
    return reply.status, _VOLATILE.sub(r'"\1": "<volatile>"', text)


def as_project(project: str, method: str, path: str, resource: str, **kwargs: Any) -> Reply:
    params = kwargs.pop("path_parameters", None) or None
    return call(
        FUNCTION_OF[resource],
        method,
        path,
        resource=resource,
        path_parameters=params,
        context=project_context(project, "forget read write"),
        **kwargs,
    )


FUNCTION_OF = {
    "/v1/remember": "remember",
    "/v1/streams": "events",
    "/v1/streams/{stream}/events": "events",
    "/v1/recall": "recall",
    "/v1/memories/{memory_id}": "memories",
    "/v1/explain": "memories",
    "/v1/jobs/{job_id}": "memories",
    "/v1/ledger": "memories",
    "/v1/receipts/{receipt_id}": "memories",
    "/v1/forget": "forget",
    "/openapi.json": "docs",
    "/v1/admin/projects": "admin",
    "/v1/admin/projects/{project_id}/keys": "admin",
    "/v1/admin/keys/{key_id}": "admin",
    "/v1/webhooks": "webhooks",
    "/v1/webhooks/{webhook_id}": "webhooks",
    "/v1/webhooks/{webhook_id}/rotate-secret": "webhooks",
    "/v1/webhooks/{webhook_id}/test": "webhooks",
    "/v1/webhooks/{webhook_id}/deliveries": "webhooks",
}


@pytest.fixture
def project_a() -> ProjectA:
    project, stream, key = new_project(), f"secret-{secrets.token_hex(3)}", f"k-{secrets.token_hex(4)}"
    reply = remember(
        project, {"stream": stream, "events": [message(key, "The zeppelin launch moved to Friday")]}
    )
    assert reply.status == 202, reply.body
    return ProjectA(
        project,
        stream,
        key,
        reply.body["memories"][0]["id"],
        reply.body["jobId"],
        "When is the zeppelin launch?",
    )


def unknown_memory_id(a: ProjectA) -> str:
    return a.memory_id[:-6] + "ZZZZZZ"


def unknown_job_id(a: ProjectA) -> str:
    return a.job_id[:-6] + "ZZZZZZ"


Case = Callable[[ProjectA, str], tuple[tuple[int, str], tuple[int, str]]]


def _remember(a: ProjectA, b: str) -> tuple[tuple[int, str], tuple[int, str]]:
    # B writes A's stream name with A's idempotency key: a first event of B's own, nothing replayed.
    def shape(reply: Reply) -> tuple[int, str]:
        (event,) = reply.body["events"]
        return reply.status, f"seq={event['seq']} replayed={event['replayed']}"

    on_a = remember(b, {"stream": a.stream, "events": [message(a.key, "another text")]})
    fresh = remember(b, {"stream": "never-used", "events": [message("never-used", "another text")]})
    return shape(on_a), shape(fresh)


def _list_streams(a: ProjectA, b: str) -> tuple[tuple[int, str], tuple[int, str]]:
    empty = new_project()
    return (
        normalized(as_project(b, "GET", "/v1/streams", "/v1/streams")),
        normalized(as_project(empty, "GET", "/v1/streams", "/v1/streams")),
    )


def _stream_events(a: ProjectA, b: str) -> tuple[tuple[int, str], tuple[int, str]]:
    def events(stream: str) -> Reply:
        return as_project(
            b,
            "GET",
            f"/v1/streams/{stream}/events",
            "/v1/streams/{stream}/events",
            path_parameters={"stream": stream},
        )

    return normalized(events(a.stream), a.stream), normalized(events("never-used-x"), "never-used-x")


def _recall(a: ProjectA, b: str) -> tuple[tuple[int, str], tuple[int, str]]:
    body = {"question": a.question}
    empty = new_project()
    return (
        normalized(as_project(b, "POST", "/v1/recall", "/v1/recall", body=body)),
        normalized(as_project(empty, "POST", "/v1/recall", "/v1/recall", body=body)),
    )


def _memory(a: ProjectA, b: str) -> tuple[tuple[int, str], tuple[int, str]]:
    def get(memory_id: str) -> Reply:
        return as_project(
            b,
            "GET",
            f"/v1/memories/{memory_id}",
            "/v1/memories/{memory_id}",
            path_parameters={"memory_id": memory_id},
        )

    missing = unknown_memory_id(a)
    return normalized(get(a.memory_id), a.memory_id), normalized(get(missing), missing)


def _explain(a: ProjectA, b: str) -> tuple[tuple[int, str], tuple[int, str]]:
    def explain(memory_id: str) -> Reply:
        return as_project(b, "POST", "/v1/explain", "/v1/explain", body={"memoryId": memory_id})

    missing = unknown_memory_id(a)
    return normalized(explain(a.memory_id), a.memory_id), normalized(explain(missing), missing)


def _job(a: ProjectA, b: str) -> tuple[tuple[int, str], tuple[int, str]]:
    def get(job_id: str) -> Reply:
        return as_project(
            b, "GET", f"/v1/jobs/{job_id}", "/v1/jobs/{job_id}", path_parameters={"job_id": job_id}
        )

    missing = unknown_job_id(a)
    return normalized(get(a.job_id), a.job_id), normalized(get(missing), missing)


def _forget(a: ProjectA, b: str) -> tuple[tuple[int, str], tuple[int, str]]:
    # B names A's memory, A's stream and A's words: each answers as for a memory, stream or word
    # that exists nowhere (and nothing of A is touched).
    def forget(project: str, body: dict[str, Any]) -> Reply:
        return as_project(project, "POST", "/v1/forget", "/v1/forget", body={"reason": "r", **body})

    missing, empty = unknown_memory_id(a), new_project()
    seen = [
        normalized(forget(b, {"memoryId": a.memory_id}), a.memory_id),
        normalized(forget(b, {"stream": a.stream}), a.stream),
        normalized(forget(b, {"query": "zeppelin launch"})),
    ]
    absent = [
        normalized(forget(b, {"memoryId": missing}), missing),
        normalized(forget(b, {"stream": "never-used-y"}), "never-used-y"),
        normalized(forget(empty, {"query": "zeppelin launch"})),
    ]
    return (200, json.dumps(seen)), (200, json.dumps(absent))


def _ledger(a: ProjectA, b: str) -> tuple[tuple[int, str], tuple[int, str]]:
    remember(a.project, {"stream": "to-forget", "events": [message("f1", "A private note")]})
    assert (
        as_project(
            a.project, "POST", "/v1/forget", "/v1/forget", body={"stream": "to-forget", "reason": "r"}
        ).status
        == 200
    )
    empty = new_project()
    return (
        normalized(as_project(b, "GET", "/v1/ledger", "/v1/ledger")),
        normalized(as_project(empty, "GET", "/v1/ledger", "/v1/ledger")),
    )


def _receipt(a: ProjectA, b: str) -> tuple[tuple[int, str], tuple[int, str]]:
    remember(a.project, {"stream": "to-forget", "events": [message("f1", "A private note")]})
    forgotten = as_project(
        a.project, "POST", "/v1/forget", "/v1/forget", body={"stream": "to-forget", "reason": "r"}
    )
    receipt_id = forgotten.body["receipt"]["id"]

    def get(rid: str) -> Reply:
        return as_project(
            b, "GET", f"/v1/receipts/{rid}", "/v1/receipts/{receipt_id}", path_parameters={"receipt_id": rid}
        )

    missing = receipt_id[:-6] + "ZZZZZZ"
    return normalized(get(receipt_id), receipt_id), normalized(get(missing), missing)


def a_webhook(a: ProjectA) -> str:
    created = as_project(
        a.project,
        "POST",
        "/v1/webhooks",
        "/v1/webhooks",
        body={"url": "https://example.com/hook", "events": ["memory.forgotten"]},
    )
    assert created.status == 201, created.body
    return str(created.body["id"])


def _webhooks(a: ProjectA, b: str) -> tuple[tuple[int, str], tuple[int, str]]:
    a_webhook(a)
    empty = new_project()
    return (
        normalized(as_project(b, "GET", "/v1/webhooks", "/v1/webhooks")),
        normalized(as_project(empty, "GET", "/v1/webhooks", "/v1/webhooks")),
    )


def _create_webhook(a: ProjectA, b: str) -> tuple[tuple[int, str], tuple[int, str]]:
    # B's new webhook is B's alone: A's list does not change, and B's holds only its own.
    a_webhook(a)
    body = {"url": "https://example.com/b", "events": ["memory.structured"]}
    made = as_project(b, "POST", "/v1/webhooks", "/v1/webhooks", body=body)
    assert made.status == 201
    listed = as_project(b, "GET", "/v1/webhooks", "/v1/webhooks").body["webhooks"]
    theirs = as_project(a.project, "GET", "/v1/webhooks", "/v1/webhooks").body["webhooks"]
    return (made.status, json.dumps([w["id"] for w in listed])), (201, json.dumps([made.body["id"]])) if all(
        w["id"] != made.body["id"] for w in theirs
    ) else (0, "B's webhook is in A's list")


def _webhook(method: str, suffix: str = "") -> Case:
    """A route naming one webhook: A's id, given by B, answers as an id that exists nowhere."""

    def case(a: ProjectA, b: str) -> tuple[tuple[int, str], tuple[int, str]]:
        def ask(webhook_id: str) -> Reply:
            return as_project(
                b,
                method,
                f"/v1/webhooks/{webhook_id}{suffix}",
                f"/v1/webhooks/{{webhook_id}}{suffix}",
                path_parameters={"webhook_id": webhook_id},
            )

        mine, missing = a_webhook(a), "wh_" + "z" * 20
        seen = normalized(ask(mine), mine)
        assert (
            as_project(
                a.project,
                "GET",
                f"/v1/webhooks/{mine}",
                "/v1/webhooks/{webhook_id}",
                path_parameters={"webhook_id": mine},
            ).status
            == 200
        )  # untouched
        return seen, normalized(ask(missing), missing)

    return case


def _public(path: str) -> Case:
    """The docs name no project: B is answered exactly as anyone (the same document)."""

    def case(a: ProjectA, b: str) -> tuple[tuple[int, str], tuple[int, str]]:
        return normalized(as_project(b, "GET", path, path)), normalized(
            as_project(a.project, "GET", path, path)
        )

    return case


def _admin(method: str, path: str, resource: str, **kwargs: Any) -> Case:
    """Admin routes name no project of the caller's: a project key is refused (403) whatever it
    names, exactly as when it names its own project."""

    def case(a: ProjectA, b: str) -> tuple[tuple[int, str], tuple[int, str]]:
        concrete = path.replace("{project_id}", a.project).replace("{key_id}", "0123456789abcdef")
        params = {"project_id": a.project} if "{project_id}" in path else {}
        if "{key_id}" in path:
            params = {"key_id": "0123456789abcdef"}
        by_b = as_project(b, method, concrete, resource, path_parameters=params, **kwargs)
        by_a = as_project(a.project, method, concrete, resource, path_parameters=params, **kwargs)
        return normalized(by_b), normalized(by_a)

    return case


CASES: dict[tuple[str, str], Case] = {
    ("POST", "/v1/remember"): _remember,
    ("GET", "/v1/streams"): _list_streams,
    ("GET", "/v1/streams/{stream}/events"): _stream_events,
    ("POST", "/v1/recall"): _recall,
    ("GET", "/v1/memories/{memory_id}"): _memory,
    ("POST", "/v1/explain"): _explain,
    ("GET", "/v1/jobs/{job_id}"): _job,
    ("POST", "/v1/forget"): _forget,
    ("GET", "/v1/ledger"): _ledger,
    ("GET", "/v1/receipts/{receipt_id}"): _receipt,
    ("GET", "/openapi.json"): _public("/openapi.json"),
    ("POST", "/v1/admin/projects"): _admin(
        "POST", "/v1/admin/projects", "/v1/admin/projects", body={"name": "x"}
    ),
    ("POST", "/v1/admin/projects/{project_id}/keys"): _admin(
        "POST",
        "/v1/admin/projects/{project_id}/keys",
        "/v1/admin/projects/{project_id}/keys",
        body={"scopes": ["read"]},
    ),
    ("DELETE", "/v1/admin/keys/{key_id}"): _admin(
        "DELETE", "/v1/admin/keys/{key_id}", "/v1/admin/keys/{key_id}"
    ),
    ("POST", "/v1/webhooks"): _create_webhook,
    ("GET", "/v1/webhooks"): _webhooks,
    ("GET", "/v1/webhooks/{webhook_id}"): _webhook("GET"),
    ("DELETE", "/v1/webhooks/{webhook_id}"): _webhook("DELETE"),
    ("POST", "/v1/webhooks/{webhook_id}/rotate-secret"): _webhook("POST", "/rotate-secret"),
    ("POST", "/v1/webhooks/{webhook_id}/test"): _webhook("POST", "/test"),
    ("GET", "/v1/webhooks/{webhook_id}/deliveries"): _webhook("GET", "/deliveries"),
}


#: Static files served without a key, the same bytes to anyone (tests/contract/test_docs_site.py
#: checks they are exactly the built files): nothing of a project can be in them.
STATIC_DOCS = {("GET", "/docs/llms.txt"), ("GET", "/docs/llms-full.txt"), ("GET", "/docs/docs.zip")}


def test_given_every_route_then_it_has_an_isolation_case() -> None:
    served = {(route.method, route.path) for route in routes(load_template())} - STATIC_DOCS
    assert served == set(CASES), f"routes without a case: {served - set(CASES)}; stale: {set(CASES) - served}"


@pytest.mark.parametrize("route", sorted(CASES), ids=lambda route: f"{route[0]} {route[1]}")
def test_given_project_a_things_then_project_b_sees_them_as_missing(
    project_a: ProjectA, route: tuple[str, str]
) -> None:
    other = new_project()
    seen, missing = CASES[route](project_a, other)
    assert seen == missing
    assert project_a.stream not in seen[1] or route == ("GET", "/v1/streams/{stream}/events")


def test_given_every_table_then_every_key_carries_its_project(handler_env: Any, project_a: ProjectA) -> None:
    created = call("admin", "POST", "/v1/admin/projects", body={"name": "scan"}, context=ADMIN_CONTEXT)
    assert created.status == 201
    a_webhook(project_a)  # subscriptions and the outbox head
    project_key = re.compile(r"^prj_[0-9A-Za-z]+#")
    for table_name, table in handler_env.tables.items():
        pages = handler_env.dynamodb.get_paginator("scan").paginate(TableName=table)
        items = [item for page in pages for item in page["Items"]]
        assert items, table_name
        for item in items:
            pk = item["pk"]["S"]
            if table_name == "ProjectsTable":
                # A project's item, or an API key's (looked up by key id), which names its project.
                assert pk.startswith(("project#prj_", "apikey#")), pk
                if pk.startswith("apikey#"):
                    assert any(v.get("S", "").startswith("prj_") for v in item.values()), pk
            else:
                assert project_key.match(pk), (table_name, pk)


SMUGGLED = ("X-Kaibo-Project", "X-Project-Id", "projectId")


@pytest.mark.parametrize(
    ("method", "resource"),
    [("GET", "/v1/streams"), ("GET", "/v1/streams/{stream}/events"), ("GET", "/v1/memories/{memory_id}")],
)
def test_given_project_a_s_id_smuggled_in_headers_or_query_then_b_still_sees_only_its_own(
    project_a: ProjectA, method: str, resource: str
) -> None:
    """The project comes from the authorizer's context alone, never from what the caller sends."""
    b = new_project()
    params = {"stream": project_a.stream} if "{stream}" in resource else {}
    params |= {"memory_id": project_a.memory_id} if "{memory_id}" in resource else {}
    path = resource.format(**params)

    def ask(**smuggled: Any) -> tuple[int, str]:
        return normalized(as_project(b, method, path, resource, path_parameters=params, **smuggled))

    plain = ask()
    with_headers = ask(headers=[(name, project_a.project) for name in SMUGGLED])
    with_query = ask(query=[(name, project_a.project) for name in SMUGGLED])
    assert with_headers == plain
    assert with_query == plain or with_query[0] == 422  # an unknown parameter may be refused, never obeyed
    assert "zeppelin" not in with_headers[1] + with_query[1]  # nothing of A's text


def test_given_project_a_s_id_in_a_body_then_it_is_refused_not_obeyed(project_a: ProjectA) -> None:
    b = new_project()
    reply = as_project(
        b,
        "POST",
        "/v1/recall",
        "/v1/recall",
        body={"question": project_a.question, "projectId": project_a.project},
    )
    assert reply.status == 422, reply.body  # an unknown field: never read as the project
    assert project_a.memory_id not in json.dumps(reply.body)
