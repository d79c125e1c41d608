"""Event streams over real HTTP from the local stack: in-process handlers and the container pool.

The function (tests.fixtures.streaming_handler) emits ``candidates`` and then blocks on a
gate that only the test opens, so reading ``candidates`` before opening it proves the
event left the front while the function was still running.
"""

from __future__ import annotations

import http.client
import json
import secrets
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kaibo.client import KaiboAPIError, KaiboClient
from kaibo.sse import SseParser
from kaibo_core.runtime.streaming import sse_event
from kaibo_local.containers import ContainerPool
from kaibo_local.gateway import LambdaContext, LocalGateway
from kaibo_local.http_front import HttpFront
from kaibo_local.template import function_specs
from tests.fixtures import streaming_handler
from tests.fixtures.streaming_handler import GATES, candidates, final, packed

#: How long a read may wait: well under the gate's own timeout, so a front that buffers fails fast.
READ_TIMEOUT_SECONDS = 10.0

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
SSE = {"Accept": "text/event-stream", "Content-Type": "application/json"}
JSON = {"Accept": "application/json", "Content-Type": "application/json"}


@dataclass
class Gate:
    token: str
    open: Callable[[], None]


@dataclass
class Stack:
    front: HttpFront
    kind: str
    new_gate: Callable[[], Gate]

    def connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.front.port, timeout=READ_TIMEOUT_SECONDS)

    def client(self) -> KaiboClient:
        return KaiboClient(self.front.url, api_key=None, timeout=READ_TIMEOUT_SECONDS)


@pytest.fixture(scope="module")
def pool() -> Iterator[ContainerPool]:
    containers = ContainerPool(function_specs(TEMPLATE), containers=2)
    yield containers
    containers.stop()


@pytest.fixture(params=["in-process", "containers"])
def stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stack]:
    names: list[str] = []
    if request.param == "in-process":
        gateway = LocalGateway(TEMPLATE)

        def new_gate() -> Gate:
            # In-process, the function can wait on the very Event the test sets.
            name = secrets.token_hex(4)
            GATES[name] = threading.Event()
            names.append(name)
            return Gate(name, GATES[name].set)

    else:
        gateway = LocalGateway(TEMPLATE, loader=request.getfixturevalue("pool").loader)

        def new_gate() -> Gate:
            # Across processes: a file the function polls for.
            flag = tmp_path / f"gate-{secrets.token_hex(4)}"
            return Gate(str(flag), flag.touch)

    with HttpFront(gateway, port=0) as front:
        yield Stack(front, request.param, new_gate)
    for name in names:
        GATES.pop(name).set()


def post(
    conn: http.client.HTTPConnection, question: str, headers: dict[str, str]
) -> http.client.HTTPResponse:
    conn.request("POST", "/v1/recall", body=json.dumps({"question": question}), headers=headers)
    return conn.getresponse()


def read_event(response: http.client.HTTPResponse) -> bytes:
    """The next event's bytes, up to and including its blank line (blocks until they arrive)."""
    lines = []
    while True:
        line = response.readline()
        assert line, "the stream ended"
        lines.append(line)
        if line == b"\n":
            return b"".join(lines)


def buffered_body(question: str) -> str:
    """What the function returns, and all that API Gateway sends on AWS: no stream in the context."""
    event = {"body": json.dumps({"question": question}), "headers": {"Accept": "text/event-stream"}}
    return streaming_handler.handler(event, LambdaContext("StreamFunction"))["body"]


def events_of(raw: bytes) -> list[tuple[str, Any]]:
    parser = SseParser()
    return [(e.event, json.loads(e.data)) for e in [*parser.feed(raw), *parser.close()]]


def test_given_an_event_stream_request_then_candidates_arrive_before_the_function_finishes(
    stack: Stack,
) -> None:
    gate = stack.new_gate()
    question = f"ok:{gate.token}"
    conn = stack.connection()
    try:
        response = post(conn, question, SSE)
        assert response.status == 200
        assert response.getheader("Content-Type") == "text/event-stream; charset=utf-8"
        assert response.getheader("Cache-Control") == "no-cache"
        assert response.getheader("Transfer-Encoding") == "chunked"
        assert response.getheader("Content-Length") is None
        assert response.getheader("x-amzn-RequestId")

        first = read_event(response)  # the function is blocked on the gate meanwhile
        assert first == sse_event("candidates", candidates(question))

        gate.open()
        rest = response.read()
        streamed = first + rest
        assert [name for name, _ in events_of(streamed)] == ["candidates", "packed", "final"]
        assert events_of(streamed)[1:] == [("packed", packed()), ("final", final(question))]
        assert streamed.decode() == buffered_body(question)

        # The chunked body ended cleanly: the connection serves the next request.
        again = post(conn, "ok:", JSON)
        assert again.status == 200
        assert json.loads(again.read()) == final("ok:")
    finally:
        conn.close()


def test_given_the_sdk_then_recall_stream_yields_candidates_before_the_function_finishes(
    stack: Stack,
) -> None:
    gate = stack.new_gate()
    question = f"ok:{gate.token}"
    client = stack.client()

    events = client.recall_stream(question)
    assert next(events) == ("candidates", candidates(question))
    gate.open()

    assert list(events) == [("packed", packed()), ("final", final(question))]
    assert client.recall("ok:") == final("ok:")


def test_given_a_request_without_event_stream_accept_then_the_answer_is_unchanged(stack: Stack) -> None:
    conn = stack.connection()
    try:
        response = post(conn, "ok:", JSON)
        raw = response.read()
    finally:
        conn.close()

    assert response.status == 200
    assert response.getheader("Content-Type") == "application/json"
    assert response.getheader("Content-Length") == str(len(raw))
    assert response.getheader("Transfer-Encoding") is None
    assert json.loads(raw) == final("ok:")


def test_given_an_event_stream_request_that_the_function_answers_without_a_stream_then_as_usual(
    stack: Stack,
) -> None:
    conn = stack.connection()
    try:
        response = post(conn, "refuse:", SSE)
        raw = response.read()
    finally:
        conn.close()

    assert response.status == 400
    assert response.getheader("Content-Length") == str(len(raw))
    assert response.getheader("Transfer-Encoding") is None
    assert json.loads(raw)["error"]["code"] == "validation_error"
    with pytest.raises(KaiboAPIError) as raised:
        next(stack.client().recall_stream("refuse:"))
    assert (raised.value.status, raised.value.code) == (400, "validation_error")


def test_given_the_function_fails_after_the_stream_started_then_the_stream_just_ends(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    gate = stack.new_gate()
    question = f"fail:{gate.token}"
    conn = stack.connection()
    try:
        response = post(conn, question, SSE)
        assert response.status == 200
        assert read_event(response) == sse_event("candidates", candidates(question))
        gate.open()
        assert response.read() == b""  # the end of the chunked body, no error answer after it
        again = post(conn, "ok:", JSON)
        assert again.status == 200
        again.read()
    finally:
        conn.close()
    assert "failed after it started its response stream" in caplog.text

    other = stack.new_gate()
    other.open()
    events = stack.client().recall_stream(f"fail:{other.token}")
    assert next(events)[0] == "candidates"
    with pytest.raises(KaiboAPIError) as raised:
        next(events)
    assert raised.value.code == "stream_incomplete"


def test_given_an_http_1_0_client_then_the_stream_is_raw_bytes_until_the_connection_closes(
    stack: Stack,
) -> None:
    body = json.dumps({"question": "ok:"}).encode()
    head = (
        "POST /v1/recall HTTP/1.0\r\nHost: x\r\nAccept: text/event-stream\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", stack.front.port), timeout=READ_TIMEOUT_SECONDS) as sock:
        sock.sendall(head + body)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk

    header_block, _, payload = received.partition(b"\r\n\r\n")
    headers = header_block.decode().lower()
    assert headers.startswith("http/1.1 200")
    assert "connection: close" in headers
    assert "transfer-encoding" not in headers
    assert "content-length" not in headers
    assert payload.decode() == buffered_body("ok:")


def test_given_two_streams_in_two_containers_then_they_run_side_by_side(
    stack: Stack,
) -> None:
    if stack.kind != "containers":
        pytest.skip("in-process functions run one at a time")
    first_gate, second_gate = stack.new_gate(), stack.new_gate()
    first_conn, second_conn = stack.connection(), stack.connection()
    try:
        first = post(first_conn, f"ok:{first_gate.token}", SSE)
        assert read_event(first).startswith(b"event: candidates\n")
        second = post(second_conn, f"ok:{second_gate.token}", SSE)
        assert read_event(second).startswith(b"event: candidates\n")

        second_gate.open()
        assert [name for name, _ in events_of(second.read())] == ["packed", "final"]
        first_gate.open()
        assert [name for name, _ in events_of(first.read())] == ["packed", "final"]
    finally:
        first_conn.close()
        second_conn.close()
