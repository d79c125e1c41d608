"""The calls both clients share: request bodies, page walking and the recall event-stream reader."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kaibo import _calls
from kaibo.errors import KaiboAPIError
from kaibo.results import RecallPack

SSE = {"Content-Type": "text/event-stream; charset=utf-8"}
FINAL = {"items": [], "usedTokens": 0, "budget": 300, "asOf": "x", "abstain": {"abstained": False}}


def sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def test_given_recall_options_then_the_body_uses_the_wire_names_and_omits_defaults() -> None:
    assert _calls.recall("q", 50).body == {"question": "q", "budget": 50}
    full = _calls.recall(
        "q", 50, as_of="2026-07-01T00:00:00Z", streams=["a"], types=["fact"], include_superseded=True
    )
    assert full.body == {
        "question": "q",
        "budget": 50,
        "asOf": "2026-07-01T00:00:00Z",
        "streams": ["a"],
        "types": ["fact"],
        "includeSuperseded": True,
    }


def test_given_a_stream_split_anywhere_then_the_events_come_out_whole_and_final_is_a_pack() -> None:
    raw = sse("candidates", {"candidates": []}) + sse("packed", {"items": []}) + sse("final", FINAL)
    reader = _calls.RecallEvents(200, SSE)
    events = [event for index in range(len(raw)) for event in reader.feed(raw[index : index + 1])]
    assert [name for name, _ in events] == ["candidates", "packed", "final"]
    assert isinstance(events[-1][1], RecallPack)
    assert events[-1][1] == FINAL
    assert reader.done


def test_given_an_event_this_client_does_not_know_then_it_is_passed_on() -> None:
    """API.md: events may be added. The TypeScript client does the same (clients/typescript/test)."""
    reader = _calls.RecallEvents(200, SSE)
    raw = sse("progress", {"step": 2}) + b'data: {"note": 1}\n\n' + sse("final", FINAL)
    assert [name for name, _ in reader.feed(raw)] == ["progress", "message", "final"]


def test_given_events_after_final_then_they_are_not_read() -> None:
    reader = _calls.RecallEvents(200, SSE)
    assert [name for name, _ in reader.feed(sse("final", FINAL) + sse("extra", {}))] == ["final"]


def test_given_an_error_event_then_the_api_error_is_raised_with_its_code() -> None:
    reader = _calls.RecallEvents(200, SSE)
    with pytest.raises(KaiboAPIError) as raised:
        reader.feed(sse("error", {"error": {"code": "internal_error", "message": "m"}}))
    assert raised.value.code == "internal_error"


def test_given_a_stream_that_ends_before_final_then_stream_incomplete() -> None:
    reader = _calls.RecallEvents(200, SSE)
    reader.feed(sse("candidates", {"candidates": []}))
    with pytest.raises(KaiboAPIError) as raised:
        reader.end()
    assert raised.value.code == "stream_incomplete"


@pytest.mark.parametrize(
    ("headers", "chunk"),
    [({"Content-Type": "application/json"}, b""), (SSE, b"event: packed\ndata: [1]\n\n")],
)
def test_given_something_other_than_events_of_json_objects_then_invalid_response(
    headers: dict[str, str], chunk: bytes
) -> None:
    with pytest.raises(KaiboAPIError) as raised:
        _calls.RecallEvents(200, headers).feed(chunk)
    assert raised.value.code == "invalid_response"


def test_given_seq_pages_then_each_call_asks_from_the_next_seq_until_none() -> None:
    pages = _calls.events_pages("chat/42", from_seq=1, limit=2)
    calls: list[tuple[str, Any]] = []
    items: list[Any] = []
    for page in ({"events": [1, 2], "nextFromSeq": 3}, {"events": [3]}):
        call = pages.next_call()
        assert call is not None
        calls.append((call.path, call.query))
        items += pages.take(page)
    assert pages.next_call() is None
    assert items == [1, 2, 3]
    assert calls == [
        ("/v1/streams/chat%2F42/events", {"limit": 2, "fromSeq": 1}),
        ("/v1/streams/chat%2F42/events", {"limit": 2, "fromSeq": 3}),
    ]


def test_given_a_cursor_seen_before_then_invalid_response() -> None:
    pages = _calls.CursorPages()
    assert pages.take({"streams": [{"stream": "a"}], "nextCursor": "c1"}) == [{"stream": "a"}]
    call = pages.next_call()
    assert call is not None
    assert call.query == {"cursor": "c1"}
    with pytest.raises(KaiboAPIError, match="nextCursor does not advance"):
        pages.take({"streams": [], "nextCursor": "c1"})


def test_given_a_misspelt_or_missing_keyword_then_type_error_before_any_request() -> None:
    with pytest.raises(TypeError, match="unexpected asof"):
        _calls.recall("q", 50, asof="2026-07-01T00:00:00Z")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="missing reason"):
        _calls.forget(stream="s")  # type: ignore[call-arg]


def test_given_a_limit_then_every_streams_page_asks_for_it() -> None:
    pages = _calls.CursorPages(limit=2)
    first = pages.next_call()
    assert first is not None
    assert first.query == {"limit": 2}
    pages.take({"streams": [{"stream": "a"}], "nextCursor": "c1"})
    second = pages.next_call()
    assert second is not None
    assert second.query == {"cursor": "c1", "limit": 2}


def test_given_no_scopes_then_a_new_key_takes_the_route_s_default() -> None:
    assert _calls.create_key("prj_1", None).body == {}  # read and write, as the route decides
    assert _calls.create_key("prj_1", ["read"]).body == {"scopes": ["read"]}


def test_given_the_webhook_calls_then_each_names_its_route_and_body() -> None:
    calls = [
        _calls.create_webhook("https://example.com/h", ["memory.forgotten"]),
        _calls.create_webhook("https://example.com/h", ("memory.structured",), description="mirror"),
        _calls.webhooks(),
        _calls.webhook("wh_1"),
        _calls.delete_webhook("wh_1"),
        _calls.rotate_webhook_secret("wh_1"),
        _calls.test_webhook("wh_1"),
        _calls.webhook_deliveries("wh_1"),
        _calls.webhook_deliveries("wh/..", limit=5),
    ]
    assert [(call.method, call.path, call.body, call.query) for call in calls] == [
        ("POST", "/v1/webhooks", {"url": "https://example.com/h", "events": ["memory.forgotten"]}, None),
        (
            "POST",
            "/v1/webhooks",
            {"url": "https://example.com/h", "events": ["memory.structured"], "description": "mirror"},
            None,
        ),
        ("GET", "/v1/webhooks", None, None),
        ("GET", "/v1/webhooks/wh_1", None, None),
        ("DELETE", "/v1/webhooks/wh_1", None, None),
        ("POST", "/v1/webhooks/wh_1/rotate-secret", None, None),
        ("POST", "/v1/webhooks/wh_1/test", None, None),
        ("GET", "/v1/webhooks/wh_1/deliveries", None, None),
        ("GET", "/v1/webhooks/wh%2F../deliveries", None, {"limit": 5}),
    ]


def test_given_a_listing_then_its_list_is_the_result_and_anything_else_is_invalid() -> None:
    assert _calls.webhooks().result({"webhooks": [{"id": "wh_1"}]}) == [{"id": "wh_1"}]
    assert _calls.webhook_deliveries("wh_1").result({"deliveries": []}) == []
    answers: list[Any] = [{}, {"webhooks": {"id": "wh_1"}}, {"webhooks": ["wh_1"]}, []]
    for answer in answers:
        with pytest.raises(KaiboAPIError) as error:
            _calls.webhooks().result(answer)
        assert error.value.code == "invalid_response"


def test_given_a_bad_webhook_argument_then_a_type_error_before_any_request() -> None:
    with pytest.raises(TypeError, match="list of event names"):
        _calls.create_webhook("https://example.com/h", "memory.forgotten")
    with pytest.raises(TypeError, match="webhook id"):
        _calls.webhook("")
