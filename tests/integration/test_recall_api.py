"""recall and memories through the real handlers, against the emulator: provisional memories
searchable at once, citations that verify against the chain, SSE, errors and tenancy."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kaibo.verify import verify_events
from kaibo_core.adapters.dynamodb_memories import DynamoMemoryStore
from tests.integration.api import Reply, call, project_context
from tests.integration.test_remember_api import assert_error, events, message, new_project, remember


def recall(project: str, body: Any, scopes: str = "read", accept: str | None = None) -> Reply:
    headers = [("Accept", accept)] if accept else None
    return call(
        "recall", "POST", "/v1/recall", body=body, context=project_context(project, scopes), headers=headers
    )


def get_memory(project: str, memory_id: str) -> Reply:
    return call(
        "memories",
        "GET",
        f"/v1/memories/{memory_id}",
        resource="/v1/memories/{memory_id}",
        path_parameters={"memory_id": memory_id},
        context=project_context(project),
    )


def parse_sse(text: str) -> list[tuple[str, Any]]:
    parsed = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        parsed.append((lines["event"], json.loads(lines["data"])))
    return parsed


def test_given_remembered_events_then_recall_finds_them_at_once_and_citations_verify(handler_env) -> None:
    project = new_project()
    remembered = remember(
        project,
        {
            "stream": "chat-42",
            "events": [
                message("m1", "Lunch with the design team is on Friday."),
                message("m2", "Move the release target from July 13 to July 17."),
            ],
        },
    )
    assert remembered.status == 202, remembered.body
    memories = remembered.body["memories"]
    assert [m["status"] for m in memories] == ["provisional", "provisional"]
    assert memories[1]["content"] == "Move the release target from July 13 to July 17."

    answer = recall(project, {"question": "When is the release target?", "budget": 100})
    assert answer.status == 200, answer.body
    [item] = answer.body["items"]
    assert item["memoryId"] == memories[1]["id"]
    receipt = remembered.body["events"][1]
    assert item["citations"] == [
        {"eventId": receipt["id"], "stream": "chat-42", "seq": receipt["seq"], "hash": receipt["hash"]}
    ]
    served = events(project, "chat-42").body["events"]
    report = verify_events("chat-42", served, expect_head=(2, served[-1]["hash"]))
    assert report.ok
    cited = next(e for e in served if e["seq"] == item["citations"][0]["seq"])
    assert cited["hash"] == item["citations"][0]["hash"]
    assert cited["payload"]["text"] == item["text"]


def test_given_a_memory_id_then_get_returns_it_and_other_projects_get_404(handler_env) -> None:
    project = new_project()
    remembered = remember(project, {"stream": "s", "events": [message("m1", "Alice prefers tea.")]})
    memory_id = remembered.body["memories"][0]["id"]
    got = get_memory(project, memory_id)
    assert got.status == 200
    assert got.body["content"] == "Alice prefers tea."
    assert got.body["sourceEventIds"] == [remembered.body["events"][0]["id"]]
    assert got.body["validTo"] is None
    assert "subject" not in got.body
    missing = get_memory(project, "mem_01NOSUCHMEMORY0000000000000")
    foreign = get_memory(new_project(), memory_id)
    assert_error(foreign, 404, "memory_not_found")
    assert missing.status == 404
    assert foreign.body["error"]["message"].replace(memory_id, "X") == missing.body["error"][
        "message"
    ].replace("mem_01NOSUCHMEMORY0000000000000", "X")


def test_given_another_projects_memories_then_recall_never_sees_them(handler_env) -> None:
    owner, stranger = new_project(), new_project()
    remember(owner, {"stream": "s", "events": [message("m1", "The vault code is in the blue binder.")]})
    answer = recall(stranger, {"question": "vault code blue binder"})
    assert answer.body["abstain"]["reason"] == "no_match"


def test_given_an_indexing_failure_then_remember_still_acknowledges_and_a_replay_completes_it(
    handler_env, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = new_project()
    body = {"stream": "s", "events": [message("m1", "The quarterly offsite is in Lisbon.")]}

    def broken(self: DynamoMemoryStore, memory: Any) -> bool:
        raise ConnectionError("DynamoDB unreachable")

    with monkeypatch.context() as patched:
        patched.setattr(DynamoMemoryStore, "index_new", broken)
        first = remember(project, body)
    assert first.status == 202
    assert first.body["memories"] == []
    assert recall(project, {"question": "offsite Lisbon"}).body["abstain"]["abstained"] is True

    replay = remember(project, body)
    assert replay.body["events"][0]["replayed"] is True
    assert [m["content"] for m in replay.body["memories"]] == ["The quarterly offsite is in Lisbon."]
    assert recall(project, {"question": "offsite Lisbon"}).body["items"][0]["text"] == (
        "The quarterly offsite is in Lisbon."
    )


def test_given_accept_event_stream_then_candidates_packed_final_and_final_equals_the_json(
    handler_env,
) -> None:
    project = new_project()
    remember(project, {"stream": "s", "events": [message("m1", "Deploys are frozen on Fridays.")]})
    body = {"question": "deploy friday", "asOf": "2099-01-01T00:00:00Z"}
    streamed = recall(project, body, accept="text/event-stream")
    assert streamed.status == 200
    assert streamed.headers["Content-Type"].startswith("text/event-stream")
    names = [name for name, _ in parse_sse(streamed.body)]
    assert names == ["candidates", "packed", "final"]
    sse = dict(parse_sse(streamed.body))
    plain = recall(project, body)
    assert sse["final"] == plain.body
    assert [c["memoryId"] for c in sse["candidates"]["candidates"]] == [
        i["memoryId"] for i in plain.body["items"]
    ]
    assert sse["packed"] == {"items": plain.body["items"], "usedTokens": plain.body["usedTokens"]}


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"budget": 10}, 422, "missing_field"),
        ({"question": "", "budget": 10}, 422, "invalid_request"),
        ({"question": "x", "budget": 0}, 422, "invalid_request"),
        ({"question": "x", "budget": 10**6}, 422, "invalid_request"),
        ({"question": "x", "asOf": "tomorrow"}, 422, "invalid_timestamp"),
        ({"question": "x", "types": ["gossip"]}, 422, "invalid_request"),
        ({"question": "x", "streams": ["bad stream"]}, 422, "invalid_request"),
        ({"question": "x", "surprise": 1}, 422, "invalid_request"),
    ],
)
def test_given_bad_recall_input_then_4xx_with_a_stable_code(
    handler_env, body: Any, status: int, code: str
) -> None:
    assert_error(recall(new_project(), body), status, code)


def test_given_a_write_only_key_then_recall_is_403(handler_env) -> None:
    assert_error(recall(new_project(), {"question": "x"}, scopes="write"), 403, "insufficient_scope")


def test_given_a_recall_then_its_log_line_counts_what_context_read_and_holds_no_text(
    handler_env: Any, caplog: pytest.LogCaptureFixture
) -> None:
    project = new_project()
    turns = [
        message("t0", "What did you think of the new ramen place downtown?"),
        message("t1", "Loved it, the broth was incredible"),  # no word of the question: context reads it
    ]
    assert remember(project, {"stream": "dinner", "events": turns}).status == 202
    with caplog.at_level("INFO"):
        reply = recall(project, {"question": "What did they think of the ramen place?"})
    assert reply.status == 200
    (line,) = [record for record in caplog.records if record.getMessage() == "recalled"]
    assert line.__dict__["contextEvents"] == 1  # the reply's event, next to the turn the words found
    assert line.__dict__["contextCandidates"] == 1
    assert "ramen" not in caplog.text
    assert "broth" not in caplog.text


def test_given_an_update_nothing_linked_then_the_handler_answers_it_first_and_marks_the_older(
    handler_env: Any, caplog: pytest.LogCaptureFixture
) -> None:
    project = new_project()
    old = "Code freeze for 4.2 is Friday February 6. Anything not merged by then rides the 4.3 train."
    new = "4.2 code freeze slipped a week to February 13 because of the auth regression."
    notes = [
        message("n0", old, occurredAt="2026-01-28T09:00:00Z"),
        message("n1", "The team standup is at 9:30 every weekday.", occurredAt="2026-02-01T10:00:00Z"),
        message("n2", new, occurredAt="2026-02-03T17:25:00Z"),
    ]
    assert remember(project, {"stream": "release", "events": notes}).status == 202
    with caplog.at_level("INFO"):
        reply = recall(project, {"question": "When is the 4.2 code freeze?"})
    assert reply.status == 200
    items = {item["text"]: item for item in reply.body["items"]}
    assert reply.body["items"][0]["text"] == new
    assert items[old]["olderThan"] == items[new]["memoryId"]
    assert "olderThan" not in items[new]
    (line,) = [record for record in caplog.records if record.getMessage() == "recalled"]
    assert line.__dict__["olderMarked"] == 1
    assert "freeze" not in caplog.text
