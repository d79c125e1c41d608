"""The HTTP front over real HTTP on 127.0.0.1: LocalGateway, the template's real handlers, the emulator."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kaibo_local.gateway import MAX_REQUEST_BYTES, LocalGateway
from kaibo_local.http_front import REQUEST_READ_TIMEOUT_SECONDS, HttpFront
from kaibo_local.template import load_template
from tests.conftest import AwsStack

TEMPLATE = load_template()


@dataclass
class Reply:
    status: int
    headers: http.client.HTTPMessage
    raw: bytes

    @property
    def body(self) -> Any:
        return json.loads(self.raw) if self.raw else None


@pytest.fixture
def front(handler_env: AwsStack) -> Iterator[HttpFront]:
    server = HttpFront(LocalGateway(TEMPLATE), port=0).start()
    yield server
    server.stop()


@pytest.fixture
def admin_key(handler_env: AwsStack) -> str:
    return handler_env.admin_key


def send(
    front: HttpFront,
    method: str,
    path: str,
    *,
    body: bytes | None = None,
    key: str | None = None,
    headers: dict[str, str] | None = None,
    connection: http.client.HTTPConnection | None = None,
) -> Reply:
    conn = connection or http.client.HTTPConnection("127.0.0.1", front.port, timeout=30)
    sent = dict(headers or {})
    if key is not None:
        sent["Authorization"] = f"Bearer {key}"
    if body is not None and "Content-Type" not in sent:
        sent["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=body, headers=sent)
        response = conn.getresponse()
        return Reply(response.status, response.headers, response.read())
    finally:
        if connection is None:
            conn.close()


def send_json(front: HttpFront, method: str, path: str, document: Any, key: str, **kwargs: Any) -> Reply:
    return send(front, method, path, body=json.dumps(document).encode(), key=key, **kwargs)


def assert_error(reply: Reply, status: int, code: str | None = None) -> None:
    assert reply.status == status, reply.raw
    document = reply.body
    assert set(document) == {"error"}, document
    assert {"code", "message", "details"} <= set(document["error"])
    if code is not None:
        assert document["error"]["code"] == code
    assert reply.headers["Content-Type"].startswith("application/json")


def create_project(front: HttpFront, admin_key: str, name: str = "http-front") -> dict[str, Any]:
    reply = send_json(front, "POST", "/v1/admin/projects", {"name": name}, admin_key)
    assert reply.status == 201, reply.raw
    return reply.body


def message(key: str, text: str) -> dict[str, Any]:
    return {"idempotencyKey": key, "kind": "message", "payload": {"role": "user", "text": text}}


def test_given_the_admin_key_when_a_project_is_created_then_its_key_remembers_and_reads_back(
    front: HttpFront, admin_key: str
) -> None:
    created = create_project(front, admin_key)

    remembered = send_json(
        front,
        "POST",
        "/v1/remember",
        {"stream": "chat-1", "events": [message("k1", "Grüße"), message("k2", "second")]},
        created["apiKey"],
    )
    assert remembered.status == 202, remembered.raw
    assert [e["seq"] for e in remembered.body["events"]] == [1, 2]
    assert remembered.headers["x-amzn-RequestId"]

    page = send(front, "GET", "/v1/streams/chat-1/events?limit=10", key=created["apiKey"])
    assert page.status == 200, page.raw
    assert [(e["seq"], e["payload"]["text"]) for e in page.body["events"]] == [(1, "Grüße"), (2, "second")]
    assert {e["projectId"] for e in page.body["events"]} == {created["projectId"]}

    paged = send(front, "GET", "/v1/streams/chat-1/events?fromSeq=2&limit=1", key=created["apiKey"])
    assert [e["seq"] for e in paged.body["events"]] == [2]


def test_given_a_project_key_on_an_admin_route_then_403_and_the_admin_key_on_remember_then_403(
    front: HttpFront, admin_key: str
) -> None:
    created = create_project(front, admin_key)

    assert_error(
        send_json(front, "POST", "/v1/admin/projects", {"name": "x"}, created["apiKey"]), 403, "forbidden"
    )
    remembered = send_json(
        front, "POST", "/v1/remember", {"stream": "s", "events": [message("k", "t")]}, admin_key
    )
    assert_error(remembered, 403, "forbidden")


@pytest.mark.parametrize("key", [None, "kb_0123456789abcdef_" + "A" * 43])
def test_given_no_key_or_an_unknown_key_then_401_in_our_error_shape(
    front: HttpFront, key: str | None
) -> None:
    reply = send(front, "GET", "/v1/streams", key=key)

    assert_error(reply, 401, "unauthorized")
    assert reply.headers["WWW-Authenticate"] == "Bearer"


def test_given_curls_default_form_content_type_then_the_body_is_still_read_as_json(
    front: HttpFront, admin_key: str
) -> None:
    created = create_project(front, admin_key)
    document = {"stream": "form", "events": [message("k1", "a=b&c=d")]}

    reply = send_json(
        front,
        "POST",
        "/v1/remember",
        document,
        created["apiKey"],
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )

    assert reply.status == 202, reply.raw
    page = send(front, "GET", "/v1/streams/form/events", key=created["apiKey"])
    assert page.body["events"][0]["payload"]["text"] == "a=b&c=d"


@pytest.mark.parametrize(
    "raw",
    [b"\xff\xfe\xfd", b'{"stream": "s", "events": [{"text": "\xc3\x28"}]}', b"\x00\x01binary\x80"],
    ids=["garbage", "invalid-utf8-in-json", "binary"],
)
def test_given_non_utf8_bytes_as_the_body_then_a_4xx_in_our_error_shape(
    front: HttpFront, admin_key: str, raw: bytes
) -> None:
    created = create_project(front, admin_key)

    reply = send(front, "POST", "/v1/remember", body=raw, key=created["apiKey"])

    assert_error(reply, 400, "malformed_json")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/nope"),
        ("POST", "/v1/streams"),
        ("GET", "/"),
        ("GET", "//x/v1/streams"),
        ("PUT", "/v1/remember"),
    ],
)
def test_given_an_unknown_route_then_404_in_our_error_shape(front: HttpFront, method: str, path: str) -> None:
    reply = send(front, method, path, key="anything")

    assert_error(reply, 404, "not_found")
    assert reply.body["error"]["details"]["requestId"] == reply.headers["x-amzn-RequestId"]


def test_given_head_and_options_then_answers_without_crashing_and_the_connection_still_serves(
    front: HttpFront, admin_key: str
) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", front.port, timeout=30)
    try:
        head = send(front, "HEAD", "/v1/streams", connection=connection)
        assert head.status == 404
        assert head.raw == b""  # a HEAD answer has no body...
        assert int(head.headers["Content-Length"]) > 0  # ...but says how long the GET one is

        options = send(front, "OPTIONS", "/v1/remember", connection=connection)
        assert_error(options, 404, "not_found")

        # The same keep-alive connection is still in step.
        created = create_project(front, admin_key)
        after = send(front, "GET", "/v1/streams", key=created["apiKey"], connection=connection)
        assert after.status == 200, after.raw
        assert after.body["streams"] == []
    finally:
        connection.close()


def test_given_a_chunked_body_then_it_is_read_whole(front: HttpFront, admin_key: str) -> None:
    created = create_project(front, admin_key)
    document = json.dumps({"stream": "chunked", "events": [message("k1", "in pieces")]}).encode()
    chunks = [document[:10], document[10:25], document[25:]]
    connection = http.client.HTTPConnection("127.0.0.1", front.port, timeout=30)
    try:
        connection.request(
            "POST",
            "/v1/remember",
            body=iter(chunks),
            headers={"Authorization": f"Bearer {created['apiKey']}", "Content-Type": "application/json"},
            encode_chunked=True,
        )
        response = connection.getresponse()
        assert response.status == 202, response.read()
        response.read()
        # The chunk framing was consumed: the connection serves the next request.
        after = send(front, "GET", "/v1/streams/chunked/events", key=created["apiKey"], connection=connection)
        assert [e["payload"]["text"] for e in after.body["events"]] == ["in pieces"]
    finally:
        connection.close()


def raw_exchange(front: HttpFront, head: bytes) -> bytes:
    """Send raw bytes; everything the server answers before it closes the connection."""
    with socket.create_connection(("127.0.0.1", front.port), timeout=30) as sock:
        sock.sendall(head)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def test_given_a_declared_body_over_10_mb_then_413_before_it_is_sent_and_the_connection_closes(
    front: HttpFront,
) -> None:
    answer = raw_exchange(
        front,
        b"POST /v1/remember HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer abc\r\n"
        + f"Content-Length: {MAX_REQUEST_BYTES + 1}\r\n\r\n".encode()
        + b"{",
    )

    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.split()[1] == b"413"
    body = rest.split(b"\r\n\r\n", 1)[1]
    assert json.loads(body)["error"]["code"] == "request_too_large"


@pytest.mark.parametrize("length", [b"abc", b"-5"])
def test_given_an_unreadable_content_length_then_400_in_our_error_shape(
    front: HttpFront, length: bytes
) -> None:
    answer = raw_exchange(
        front, b"POST /v1/remember HTTP/1.1\r\nHost: x\r\nContent-Length: " + length + b"\r\n\r\n"
    )

    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.split()[1] == b"400"
    assert "error" in json.loads(rest.split(b"\r\n\r\n", 1)[1])


def test_given_concurrent_requests_from_two_projects_then_each_reads_only_its_own_events(
    front: HttpFront, admin_key: str
) -> None:
    projects = [create_project(front, admin_key, name) for name in ("one", "two")]
    for project in projects:
        reply = send_json(
            front,
            "POST",
            "/v1/remember",
            {"stream": "shared-name", "events": [message("k", project["projectId"])]},
            project["apiKey"],
        )
        assert reply.status == 202, reply.raw

    mixed: list[str] = []
    failures: list[str] = []

    def reader(project: dict[str, Any]) -> None:
        for _ in range(8):
            page = send(front, "GET", "/v1/streams/shared-name/events", key=project["apiKey"])
            if page.status != 200:
                failures.append(f"{page.status} {page.raw!r}")
                continue
            texts = [e["payload"]["text"] for e in page.body["events"]]
            if texts != [project["projectId"]]:
                mixed.append(f"{project['projectId']} read {texts}")

    threads = [threading.Thread(target=reader, args=(p,)) for p in projects for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert failures == []
    assert mixed == []


def test_given_a_stopped_front_then_stop_again_is_harmless_and_an_unstarted_front_stops_at_once() -> None:
    gateway = LocalGateway(TEMPLATE, loader=lambda spec: lambda event, context: {"statusCode": 200})
    started = HttpFront(gateway, port=0).start()
    started.stop()
    started.stop()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", started.port), timeout=2).close()

    HttpFront(gateway, port=0).stop()  # never started: must not wait for a loop that never ran


def answer_of(raw: bytes) -> tuple[int, Any]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b"\r\n", 1)[0].split()[1]), json.loads(body)


def no_function_gateway() -> LocalGateway:
    return LocalGateway(TEMPLATE, loader=lambda spec: lambda event, context: {"statusCode": 200})


def test_given_128_connections_before_the_front_accepts_any_then_all_are_queued_and_answered() -> None:
    """The listen backlog: socketserver's default of 5 drops the 7th handshake until one is accepted."""
    front = HttpFront(no_function_gateway(), port=0)  # listening, not serving yet
    pending: list[socket.socket] = []
    try:
        for _ in range(128):
            pending.append(socket.create_connection(("127.0.0.1", front.port), timeout=2))
        for sock in pending:
            sock.sendall(b"GET /v1/nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        front.start()
        for sock in pending:
            sock.settimeout(30)
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
            status, document = answer_of(received)
            assert status == 404
            assert document["error"]["code"] == "not_found"
    finally:
        for sock in pending:
            sock.close()
        front.stop()


def test_given_a_body_shorter_than_its_content_length_then_400_in_our_error_shape_not_a_hang(
    front: HttpFront,
) -> None:
    began = time.monotonic()
    answer = raw_exchange(  # the client keeps the connection open: only the front's timeout ends it
        front,
        b"POST /v1/remember HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'Content-Length: 100\r\n\r\n{"stream": ',
    )
    took = time.monotonic() - began

    status, document = answer_of(answer)
    assert status == 400
    assert document["error"]["code"] == "bad_request"
    assert {"code", "message", "details"} <= set(document["error"])
    assert REQUEST_READ_TIMEOUT_SECONDS - 0.5 < took < REQUEST_READ_TIMEOUT_SECONDS + 10 < 29


@pytest.mark.parametrize(
    "sent",
    [
        b"POST /v1/remember HTTP/1.1\r\nHost: x\r\nContent-",
        b"POST /v1/reme",
        b"POST /v1/remember HTTP/1.1\r\n",
    ],
    ids=["headers-cut", "request-line-cut", "no-headers-end"],
)
def test_given_a_request_head_that_stops_short_then_400_in_our_error_shape_after_the_read_timeout(
    sent: bytes,
) -> None:
    with HttpFront(no_function_gateway(), port=0, read_timeout=0.5) as front:
        began = time.monotonic()
        answer = raw_exchange(front, sent)
        took = time.monotonic() - began

    status, document = answer_of(answer)
    assert status == 400
    assert document["error"]["code"] == "bad_request"
    assert took < 10


@pytest.mark.parametrize(
    ("sent", "status"),
    [
        (b"GARBAGE\r\n", 400),
        (b"GET /v1/streams HTTP/2.0\r\n", 505),
        (b"BREW /v1/streams HTTP/1.1\r\nHost: x\r\n\r\n", 501),
    ],
    ids=["bad-request-line", "http-2", "unknown-method"],
)
def test_given_a_request_the_front_cannot_parse_then_its_answer_is_in_our_error_shape(
    sent: bytes, status: int
) -> None:
    with HttpFront(no_function_gateway(), port=0) as front:
        answered, document = answer_of(raw_exchange(front, sent))

    assert answered == status
    assert set(document) == {"error"}
    assert {"code", "message", "details"} <= set(document["error"])
