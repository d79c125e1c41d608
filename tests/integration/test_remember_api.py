"""remember and the event-log reads through the real handlers, against the emulator."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from kaibo_core.core import chain
from kaibo_core.core.limits import MAX_EVENTS_PER_BATCH
from tests.integration.api import Reply, call, get_job, project_context


def new_project() -> str:
    return "prj_01J" + secrets.token_hex(12).upper()[:23]


def message(key: str, text: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"idempotencyKey": key, "kind": "message", "payload": {"role": "user", "text": text}, **extra}


def remember(
    project: str, body: Any = None, raw_body: str | None = None, scopes: str = "read write"
) -> Reply:
    return call(
        "remember",
        "POST",
        "/v1/remember",
        body=body,
        raw_body=raw_body,
        context=project_context(project, scopes),
    )


def events(project: str, stream: str, **query: str) -> Reply:
    return call(
        "events",
        "GET",
        f"/v1/streams/{stream}/events",
        resource="/v1/streams/{stream}/events",
        path_parameters={"stream": stream},
        query=list(query.items()),
        context=project_context(project),
    )


def streams(project: str) -> Reply:
    return call("events", "GET", "/v1/streams", context=project_context(project))


def assert_error(reply: Reply, status: int, code: str) -> None:
    assert reply.status == status, reply.body
    assert reply.body["error"]["code"] == code
    assert reply.body["error"]["message"]
    assert isinstance(reply.body["error"]["details"], dict)


def test_given_a_batch_when_remembered_then_202_receipts_and_the_served_chain_verifies(handler_env) -> None:
    project = new_project()
    reply = remember(project, {"stream": "chat-42", "events": [message("k1", "Grüße"), message("k2")]})
    assert reply.status == 202, reply.body
    receipts = reply.body["events"]
    assert [(r["seq"], r["replayed"], r["idempotencyKey"]) for r in receipts] == [
        (1, False, "k1"),
        (2, False, "k2"),
    ]
    assert receipts[0]["prevHash"] == chain.GENESIS_PREV_HASH
    assert receipts[1]["prevHash"] == receipts[0]["hash"]

    page = events(project, "chat-42")
    assert page.status == 200
    served = page.body["events"]
    assert served[0]["payload"] == {"role": "user", "text": "Grüße"}
    verifier = chain.ChainVerifier("chat-42")
    for event in served:
        verifier.feed(event)
    assert verifier.finish() is None
    assert verifier.payloads_checked == 2
    assert streams(project).body["streams"] == [{"stream": "chat-42", "seq": 2, "hash": receipts[1]["hash"]}]


def test_given_a_replayed_key_then_original_event_with_replayed_true_and_nothing_appended(
    handler_env,
) -> None:
    project = new_project()
    first = remember(project, {"stream": "s", "events": [message("k1")]}).body["events"][0]
    again = remember(project, {"stream": "s", "events": [message("k1"), message("k2")]})
    assert again.status == 202
    assert again.body["events"][0] == {**first, "replayed": True}
    assert again.body["events"][1]["seq"] == 2
    assert [e["seq"] for e in events(project, "s").body["events"]] == [1, 2]


def test_given_events_when_paging_then_next_from_seq_walks_the_whole_stream(handler_env) -> None:
    project = new_project()
    remember(project, {"stream": "paged", "events": [message(f"k{i}") for i in range(7)]})
    seen, next_seq = [], 1
    while next_seq is not None:
        page = events(project, "paged", fromSeq=str(next_seq), limit="3").body
        seen += [e["seq"] for e in page["events"]]
        next_seq = page.get("nextFromSeq")
    assert seen == list(range(1, 8))


def test_given_another_projects_stream_when_read_then_it_looks_like_no_stream(handler_env) -> None:
    owner, stranger = new_project(), new_project()
    remember(owner, {"stream": "private", "events": [message("k1", "owner's words")]})
    assert events(stranger, "private").body == {"events": []}
    assert streams(stranger).body["streams"] == []
    # and the stranger's own key "k1" is free
    assert (
        remember(stranger, {"stream": "private", "events": [message("k1")]}).body["events"][0]["replayed"]
        is False
    )


def test_given_a_read_only_key_when_remembering_then_403_and_nothing_written(handler_env) -> None:
    project = new_project()
    assert_error(
        remember(project, {"stream": "s", "events": [message("k")]}, scopes="read"), 403, "insufficient_scope"
    )
    assert streams(project).body["streams"] == []


BIG = "x" * (200 * 1024)


@pytest.mark.parametrize(
    ("body", "raw", "status", "code"),
    [
        (None, '{"stream": "s", "events": [', 400, "malformed_json"),
        (
            None,
            '{"stream": "s", "events": [{"idempotencyKey": "k", "kind": "message", '
            '"payload": {"role": "user", "text": NaN}}]}',
            400,
            "malformed_json",
        ),
        (
            None,
            '{"stream": "s", "events": [{"idempotencyKey": "k", "kind": "message", '
            '"payload": {"role": "user", "text": "\\ud800"}}]}',
            422,
            "not_canonicalizable",
        ),
        (
            None,
            '{"stream": "s", "events": [{"idempotencyKey": "k", "kind": "message", '
            '"payload": {"role": "user", "text": "t", "n": 9007199254740992}}]}',
            422,
            "not_canonicalizable",
        ),
        (
            {"stream": "s", "events": [{"idempotencyKey": "k", "kind": "email", "payload": {}}]},
            None,
            422,
            "unknown_kind",
        ),
        (
            {"stream": "s", "events": [{"kind": "message", "payload": {"role": "u", "text": "t"}}]},
            None,
            422,
            "missing_field",
        ),
        ({"stream": "bad stream!", "events": [message("k")]}, None, 422, "invalid_stream_name"),
        ({"stream": "#s", "events": [message("k")]}, None, 422, "invalid_stream_name"),
        ({"stream": "s", "events": []}, None, 422, "no_events"),
        (
            {"stream": "s", "events": [message(f"k{i}") for i in range(MAX_EVENTS_PER_BATCH + 1)]},
            None,
            422,
            "too_many_events",
        ),
        ({"stream": "s", "events": [message("k"), message("k")]}, None, 422, "duplicate_idempotency_key"),
        (
            {"stream": "s", "events": [message("k", occurredAt="2999-01-01T00:00:00Z")]},
            None,
            422,
            "occurred_at_in_future",
        ),
        (
            {"stream": "s", "events": [message("k", occurredAt="2026-06-02 09:30")]},
            None,
            422,
            "invalid_timestamp",
        ),
        ({"stream": "s", "events": [message("k", "x" * (300 * 1024))]}, None, 413, "event_too_large"),
        ({"stream": "s", "events": [message(f"k{i}", BIG) for i in range(21)]}, None, 413, "batch_too_large"),
        (
            {"stream": "s", "events": [{**message("k"), "payload": {"role": 7, "text": "t"}}]},
            None,
            422,
            "invalid_request",
        ),
        ([1, 2], None, 422, "invalid_request"),
    ],
)
def test_given_bad_input_then_4xx_error_shape_and_nothing_written(
    handler_env, body, raw, status, code
) -> None:
    project = new_project()
    # a valid event first in the batch: it must not be written either
    if isinstance(body, dict) and body.get("events"):
        body = {**body, "events": [message("valid-first"), *body["events"]]}
        if code == "too_many_events":
            body["events"] = body["events"][1:]
    assert_error(remember(project, body, raw), status, code)
    assert streams(project).body["streams"] == []
    assert events(project, "s").body["events"] == []


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({**message("k"), "payload": {"role": 7, "text": "t"}}, "events[0].payload.role"),
        ({"idempotencyKey": "k", "kind": "tool_call", "payload": {}}, "events[0].payload.tool"),
        ({"idempotencyKey": "k", "kind": "commit", "payload": {"message": 1}}, "events[0].payload.message"),
    ],
)
def test_given_a_bad_field_then_the_error_names_it_as_the_request_does(
    handler_env, event: dict[str, Any], field: str
) -> None:
    reply = remember(new_project(), {"stream": "s", "events": [event]})
    assert reply.status == 422, reply.body
    assert [e["field"] for e in reply.body["error"]["details"]["errors"]] == [field]  # no kind in the path


def test_given_a_key_used_in_one_stream_then_another_stream_cannot_take_it(handler_env) -> None:
    project = new_project()
    assert remember(project, {"stream": "one", "events": [message("k1")]}).status == 202
    again = remember(project, {"stream": "two", "events": [message("k1")]})
    assert_error(again, 409, "idempotency_key_reused")  # keys are unique per project, not per stream
    assert events(project, "two").body["events"] == []


def test_given_wait_when_structuring_does_not_finish_in_time_then_202_with_the_job_to_poll(
    handler_env, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kaibo_core.runtime.settings import get_settings

    monkeypatch.setenv("KAIBO_WAIT_SECONDS", "0.3")
    get_settings.cache_clear()
    try:
        project = new_project()
        reply = remember(
            project, {"stream": "s", "wait": True, "events": [message("k1")]}
        )  # nobody structures
    finally:
        monkeypatch.delenv("KAIBO_WAIT_SECONDS")
        get_settings.cache_clear()
    assert reply.status == 202, reply.body
    assert reply.body["jobId"]
    assert reply.body["memories"][0]["status"] == "provisional"
    job_id = reply.body["jobId"]
    job = get_job(project, job_id)
    assert job.body["status"] == "queued"  # the job to poll, not finished


def test_given_bad_query_parameters_when_paging_then_422(handler_env) -> None:
    project = new_project()
    assert events(project, "s", limit="0").status == 422
    assert events(project, "s", fromSeq="zero").status == 422
    assert_error(
        call("events", "GET", "/v1/streams", query=[("cursor", "!!!")], context=project_context(project)),
        422,
        "invalid_cursor",
    )


def test_given_a_used_key_with_a_different_payload_then_409_and_nothing_of_the_batch_written(
    handler_env,
) -> None:
    project = new_project()
    remember(project, {"stream": "s", "events": [message("k1", "first")]})
    reply = remember(project, {"stream": "s", "events": [message("k2"), message("k1", "changed")]})
    assert_error(reply, 409, "idempotency_key_reused")
    assert [e["idempotencyKey"] for e in events(project, "s").body["events"]] == ["k1"]


def test_given_no_authorizer_context_then_401(handler_env) -> None:
    reply = call(
        "remember", "POST", "/v1/remember", body={"stream": "s", "events": [message("k")]}, context=None
    )
    assert_error(reply, 401, "unauthorized")


def test_given_an_unknown_route_then_404_in_error_shape(handler_env) -> None:
    assert_error(
        call("remember", "GET", "/v1/nowhere", context=project_context(new_project())), 404, "not_found"
    )
