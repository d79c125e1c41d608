"""kaibo_core.runtime.streaming, and how the local gateway offers a response stream to a function."""

from __future__ import annotations

import json
import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from kaibo.sse import SseParser
from kaibo_core.runtime.streaming import (
    SSE_HEADERS,
    STREAM_CONTEXT_ATTRIBUTE,
    SseWriter,
    response_stream,
    sse_event,
    wants_event_stream,
)
from kaibo_local.gateway import HttpRequest, LambdaContext, LocalGateway
from kaibo_local.template import FunctionSpec


@dataclass
class RecordingStream:
    calls: list[tuple[Any, ...]] = field(default_factory=list)

    def start(self, status: int, headers: Mapping[str, str]) -> None:
        self.calls.append(("start", status, dict(headers)))

    def write(self, data: bytes) -> None:
        self.calls.append(("write", data))


# --- sse_event -------------------------------------------------------------------------------------


def test_given_an_event_then_one_compact_utf8_data_line_and_a_blank_line() -> None:
    raw = sse_event("candidates", {"text": "Grüße\nzwei", "n": [1, 2]})

    assert raw == 'event: candidates\ndata: {"text":"Grüße\\nzwei","n":[1,2]}\n\n'.encode()
    assert raw.count(b"\n") == 3


def test_given_an_event_then_an_sse_parser_reads_back_the_name_and_the_data() -> None:
    data = {"a": "line\r\nbreak", "b": None, "c": "日本語", "d": 1.5}

    (event,) = SseParser().feed(sse_event("packed", data))

    assert (event.event, json.loads(event.data)) == ("packed", data)


@pytest.mark.parametrize("name", ["", "a:b", "a\nb", "a\rb"])
def test_given_a_name_that_would_break_the_framing_then_value_error(name: str) -> None:
    with pytest.raises(ValueError, match="SSE event name"):
        sse_event(name, {})


def test_given_data_that_is_not_json_then_an_error() -> None:
    with pytest.raises(ValueError, match="JSON"):
        sse_event("x", {"n": float("nan")})


# --- wants_event_stream ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "wanted"),
    [
        (None, False),
        ("", False),
        ("application/json", False),
        ("*/*", False),
        ("text/*", False),
        ("text/event-stream", True),
        ("TEXT/Event-Stream", True),
        (" text/event-stream ; charset=utf-8", True),
        ("application/json, text/event-stream", True),
        ("application/json;q=0.9, text/event-stream;q=0.1", True),
        ("text/event-stream;q=0", False),
        ("text/event-stream; Q=0.000", False),
        ("text/event-stream;q=0.001", True),
        ('text/event-stream;q="0.5"', True),
        ("text/event-stream;q=oops", False),
        ("text/event-stream-x", False),
    ],
)
def test_given_an_accept_header_then_only_a_listed_event_stream_with_q_above_0_is_wanted(
    accept: str | None, wanted: bool
) -> None:
    assert wants_event_stream(accept) is wanted


# --- response_stream -------------------------------------------------------------------------------


def test_given_a_context_without_the_attribute_then_no_stream() -> None:
    class AwsContext:
        function_name = "f"

    assert response_stream(AwsContext()) is None
    assert response_stream(LambdaContext("f")) is None


def test_given_the_local_context_with_a_stream_then_it_is_found_under_the_attribute() -> None:
    stream = RecordingStream()
    context = LambdaContext("f", kaibo_response_stream=stream)

    assert STREAM_CONTEXT_ATTRIBUTE == "kaibo_response_stream"
    assert response_stream(context) is stream


def test_given_a_context_without_a_stream_then_it_pickles() -> None:
    context = LambdaContext("f")

    assert pickle.loads(pickle.dumps(context)) == context


# --- SseWriter -------------------------------------------------------------------------------------


def test_given_no_stream_then_the_writer_only_buffers() -> None:
    writer = SseWriter(None)
    writer.emit("candidates", {"n": 1})
    writer.emit("final", {"n": "ü"})

    assert not writer.streaming
    assert writer.body() == 'event: candidates\ndata: {"n":1}\n\nevent: final\ndata: {"n":"ü"}\n\n'


def test_given_a_stream_then_it_starts_at_the_first_event_and_each_event_is_written_at_once() -> None:
    stream = RecordingStream()
    writer = SseWriter(stream)
    assert stream.calls == []

    writer.emit("candidates", {"n": 1})
    assert stream.calls == [
        ("start", 200, dict(SSE_HEADERS)),
        ("write", b'event: candidates\ndata: {"n":1}\n\n'),
    ]
    writer.emit("final", {"n": 2})

    assert writer.streaming
    assert [c[0] for c in stream.calls] == ["start", "write", "write"]
    assert b"".join(c[1] for c in stream.calls if c[0] == "write").decode() == writer.body()
    assert SSE_HEADERS == {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}


# --- the local gateway offers the stream -----------------------------------------------------------

TEMPLATE: dict[str, Any] = {
    "Resources": {
        "StreamFunction": {
            "Type": "AWS::Serverless::Function",
            "Properties": {
                "CodeUri": "tests/fixtures/",
                "Handler": "streaming_handler.handler",
                "Events": {"Recall": {"Type": "Api", "Properties": {"Path": "/v1/recall", "Method": "POST"}}},
            },
        }
    }
}


class Recorder:
    def __init__(self, answer: Any) -> None:
        self.contexts: list[Any] = []
        self.answer = answer

    def loader(self, _spec: FunctionSpec) -> Any:
        def invoke(event: dict[str, Any], context: Any) -> Any:
            self.contexts.append(context)
            return self.answer(context)

        return invoke


def recall(accept: str | None) -> HttpRequest:
    headers = [("Accept", accept)] if accept is not None else []
    return HttpRequest("POST", "/v1/recall", [], headers, b'{"question": "q"}')


def plain(_context: Any) -> dict[str, Any]:
    return {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": "{}"}


@pytest.mark.parametrize("accept", [None, "application/json", "*/*", "text/event-stream;q=0"])
def test_given_a_request_that_does_not_ask_for_an_event_stream_then_the_function_gets_no_stream(
    accept: str | None,
) -> None:
    recorder = Recorder(plain)
    stream = RecordingStream()

    response = LocalGateway(TEMPLATE, loader=recorder.loader).handle(recall(accept), stream)

    (context,) = recorder.contexts
    assert response_stream(context) is None
    assert response.status == 200
    assert stream.calls == []


def test_given_an_event_stream_request_but_no_stream_offered_then_the_function_gets_none() -> None:
    recorder = Recorder(plain)

    LocalGateway(TEMPLATE, loader=recorder.loader).handle(recall("text/event-stream"))

    assert response_stream(recorder.contexts[0]) is None


def test_given_an_event_stream_request_then_the_function_streams_with_the_request_id_header() -> None:
    def stream_it(context: Any) -> dict[str, Any]:
        writer = SseWriter(response_stream(context))
        writer.emit("candidates", {"n": 1})
        return {"statusCode": 200, "headers": dict(SSE_HEADERS), "body": writer.body()}

    recorder = Recorder(stream_it)
    stream = RecordingStream()
    request = recall("application/json;q=0.5, text/event-stream")

    response = LocalGateway(TEMPLATE, loader=recorder.loader).handle(request, stream)

    (_, status, headers), (_, data) = stream.calls
    assert status == 200
    assert headers == {**SSE_HEADERS, "x-amzn-RequestId": response.header("x-amzn-RequestId")}
    assert data == response.body  # the buffered body holds exactly what was streamed


@pytest.mark.parametrize(
    ("misuse", "message"),
    [
        (lambda s: s.write(b"x"), "write before start"),
        (lambda s: (s.start(200, {}), s.start(200, {})), "already started"),
        (lambda s: s.start(200, {"X": "a\r\nb"}), "line break"),
        (lambda s: s.start(99, {}), "status 99"),
    ],
)
def test_given_a_function_that_misuses_the_stream_then_it_fails_with_the_reason(
    misuse: Any, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    def misusing(context: Any) -> Any:
        misuse(response_stream(context))

    recorder = Recorder(misusing)

    response = LocalGateway(TEMPLATE, loader=recorder.loader).handle(
        recall("text/event-stream"), RecordingStream()
    )

    assert response.status == 502
    assert message in caplog.text


def test_given_a_function_that_fails_after_starting_the_stream_then_the_log_says_the_stream_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def failing(context: Any) -> Any:
        SseWriter(response_stream(context)).emit("candidates", {})
        raise RuntimeError("boom")

    stream = RecordingStream()

    response = LocalGateway(TEMPLATE, loader=Recorder(failing).loader).handle(
        recall("text/event-stream"), stream
    )

    assert response.status == 502
    assert [c[0] for c in stream.calls] == ["start", "write"]
    assert "after it started its response stream" in caplog.text
