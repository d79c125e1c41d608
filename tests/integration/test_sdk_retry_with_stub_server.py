"""The SDK retries 429 answers after Retry-After, and never another 4xx: against a scripted loopback
HTTP stub. 5xx, dropped connections and timeouts, and the async client: test_python_sdk_clients.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kaibo.client import KaiboAPIError, KaiboClient


class Scripted(ThreadingHTTPServer):
    answers: list[Answer]
    seen: int = 0


class Handler(BaseHTTPRequestHandler):
    server: Scripted

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status, headers, body = self.server.answers[min(self.server.seen, len(self.server.answers) - 1)]
        self.server.seen += 1
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


Answer = tuple[int, dict[str, str], bytes]
BUSY: Answer = (
    429,
    {"Retry-After": "0"},
    json.dumps({"error": {"code": "stream_busy", "message": "busy"}}).encode(),
)
OK: Answer = (202, {}, json.dumps({"events": [], "memories": []}).encode())
BAD: Answer = (422, {}, json.dumps({"error": {"code": "invalid_request", "message": "no"}}).encode())


@pytest.fixture
def server() -> Iterator[Scripted]:
    httpd = Scripted(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def client(httpd: Scripted, retries: int = 3) -> KaiboClient:
    host, port = httpd.server_address[:2]
    return KaiboClient(f"http://{host!s}:{port}", "kb_key", max_retries=retries)


def test_given_two_busy_answers_then_the_third_attempt_succeeds(server: Scripted) -> None:
    server.answers = [BUSY, BUSY, OK]
    assert client(server).remember("s", []) == {"events": [], "memories": []}
    assert server.seen == 3


def test_given_busy_beyond_the_retry_budget_then_the_429_surfaces(server: Scripted) -> None:
    server.answers = [BUSY]
    with pytest.raises(KaiboAPIError) as caught:
        client(server, retries=2).remember("s", [])
    assert caught.value.code == "stream_busy"
    assert caught.value.retry_after == 0
    assert server.seen == 3


def test_given_a_4xx_other_than_429_then_no_retry(server: Scripted) -> None:
    server.answers = [BAD, OK]
    with pytest.raises(KaiboAPIError):
        client(server).remember("s", [])
    assert server.seen == 1
