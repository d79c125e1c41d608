"""``kaibo import`` and ``kaibo remember --file``: the real CLI in a subprocess against a small
stub of ``POST /v1/remember`` that keeps idempotency keys as Kaibo does (a used key answers
``replayed`` and appends nothing; a batch is all or nothing).

The stub can hold its answer to one request after appending it, so a test can interrupt the CLI
(SIGINT) exactly while a batch is committed but unacknowledged: the worst moment to stop.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import pytest

API_KEY = "kb_0123456789abcdef_" + "s" * 43
DEADLINE_SECONDS = 60.0


@dataclass
class RememberStub:
    url: str = ""
    streams: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    keys: dict[str, dict[str, Any]] = field(default_factory=dict)  # idempotency key -> receipt
    remember_calls: list[list[str]] = field(default_factory=list)  # the keys of each call
    hold_call: int | None = None  # 1-based: append this call, then answer only once released
    release: threading.Event = field(default_factory=threading.Event)
    canned: dict[str, Any] = field(default_factory=dict)  # path -> answer (recall, explain)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def texts(self, stream: str) -> list[str]:
        return [event["payload"]["text"] for event in self.streams.get(stream, [])]


class _Server(ThreadingHTTPServer):
    stub: RememberStub


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        stub = cast(_Server, self.server).stub
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.headers.get("Authorization") != f"Bearer {API_KEY}":
            self._reply(401, {"error": {"code": "unauthorized", "message": "Missing key.", "details": {}}})
            return
        if self.path in stub.canned:
            self._reply(200, stub.canned[self.path])
            return
        assert self.path == "/v1/remember", self.path
        with stub.lock:
            status, answer, call = self._remember(stub, body)
        if call == stub.hold_call:
            stub.release.wait(DEADLINE_SECONDS)
        self._reply(status, answer)

    @staticmethod
    def _remember(stub: RememberStub, body: dict[str, Any]) -> tuple[int, dict[str, Any], int]:
        events = body["events"]
        stub.remember_calls.append([event["idempotencyKey"] for event in events])
        call = len(stub.remember_calls)
        if any(event["payload"].get("bad") for event in events):  # all or nothing, like Kaibo
            error = {"code": "invalid_payload", "message": "payload.bad is not allowed", "details": {}}
            return 422, {"error": error}, call
        stream = stub.streams.setdefault(body["stream"], [])
        receipts = []
        for event in events:
            key = event["idempotencyKey"]
            if key in stub.keys:
                receipts.append({**stub.keys[key], "replayed": True})
                continue
            stream.append(event)
            receipt = {"id": f"evt_{len(stub.keys):026d}", "stream": body["stream"], "seq": len(stream)}
            stub.keys[key] = {**receipt, "hash": "ab" * 32, "idempotencyKey": key}
            receipts.append({**stub.keys[key], "replayed": False})
        return 202, {"jobId": "job_01", "events": receipts, "memories": []}, call


@contextmanager
def serve(stub: RememberStub) -> Iterator[RememberStub]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.stub = stub
    stub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        stub.release.set()
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def stub() -> Iterator[RememberStub]:
    with serve(RememberStub()) as running:
        yield running


def cli_env(stub: RememberStub, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KAIBO_", "FORCE_COLOR", "NO_COLOR"))}
    return {**env, "KAIBO_ENDPOINT": stub.url, "KAIBO_API_KEY": API_KEY, **extra}


def kaibo(stub: RememberStub, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kaibo.cli", *args],
        env=cli_env(stub, **env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def message(text: str, **extra: Any) -> str:
    return json.dumps({"kind": "message", "payload": {"role": "user", "text": text, **extra}})


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def wait_until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


# -- import ------------------------------------------------------------------------------------------


def test_given_a_jsonl_file_when_importing_twice_then_every_line_is_appended_once(
    stub: RememberStub, tmp_path: Path
) -> None:
    file = write_lines(tmp_path / "chat.jsonl", [message(f"line {n}") for n in range(1, 8)])
    first = kaibo(stub, "import", str(file), "--stream", "chat", "--batch-size", "3")
    assert first.returncode == 0, first.stderr
    assert "7 appended, 0 already there, 0 failed" in first.stdout
    assert [len(keys) for keys in stub.remember_calls] == [3, 3, 1]
    again = kaibo(stub, "import", str(file), "--stream", "chat", "--batch-size", "3")
    assert again.returncode == 0, again.stderr
    assert "0 appended, 7 already there, 0 failed" in again.stdout
    assert stub.texts("chat") == [f"line {n}" for n in range(1, 8)]
    assert stub.remember_calls[:3] == stub.remember_calls[3:]  # the same derived keys both times


def test_given_an_import_interrupted_while_a_batch_is_unacknowledged_when_run_again_then_nothing_twice(
    stub: RememberStub, tmp_path: Path
) -> None:
    file = write_lines(tmp_path / "chat.jsonl", [message(f"line {n}") for n in range(1, 8)])
    stub.hold_call = 2  # lines 3-4 are appended, but their answer never reaches the CLI
    args = [sys.executable, "-m", "kaibo.cli", "import", str(file), "--stream", "chat", "--batch-size", "2"]
    with subprocess.Popen(
        args, env=cli_env(stub), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        wait_until(lambda: len(stub.remember_calls) == 2, "the second batch to reach the stub")
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=DEADLINE_SECONDS)
    assert process.returncode == 130
    assert "2 appended, 0 already there, 0 failed" in stdout
    assert "run the same command again to resume" in stderr
    assert stub.texts("chat") == [f"line {n}" for n in range(1, 5)]

    stub.hold_call = None
    resumed = kaibo(stub, "import", str(file), "--stream", "chat", "--batch-size", "2", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {
        "file": str(file),
        "stream": "chat",
        "complete": True,
        "appended": 3,
        "alreadyThere": 4,
        "failed": [],
        "stopped": None,
    }
    assert stub.texts("chat") == [f"line {n}" for n in range(1, 8)]


def test_given_bad_lines_when_importing_then_the_rest_is_appended_and_the_bad_lines_are_named(
    stub: RememberStub, tmp_path: Path
) -> None:
    lines = [message("one"), message("two"), "{not json", message("four"), message("five", bad=True), ""]
    file = write_lines(tmp_path / "mixed.jsonl", [*lines, message("seven")])
    result = kaibo(stub, "import", str(file), "--stream", "chat", "--batch-size", "3")
    assert result.returncode == 1
    assert "4 appended, 0 already there, 2 failed" in result.stdout
    assert "line 3: invalid_json: not JSON" in result.stdout
    assert "line 5: invalid_payload: payload.bad is not allowed" in result.stdout
    assert "lines not imported: 3, 5" in result.stderr
    assert stub.texts("chat") == ["one", "two", "four", "seven"]


def test_given_lines_with_their_own_keys_when_importing_then_those_keys_are_sent(
    stub: RememberStub, tmp_path: Path
) -> None:
    own = json.dumps({"idempotencyKey": "msg-1", **json.loads(message("mine"))})
    file = write_lines(tmp_path / "keys.jsonl", [own, message("derived")])
    assert kaibo(stub, "import", str(file), "--stream", "chat").returncode == 0
    ((first, second),) = stub.remember_calls
    assert first == "msg-1"
    assert second.startswith("kaibo-file-")
    assert len(second) == len("kaibo-file-") + 64


def test_given_the_same_line_imported_into_another_stream_then_its_derived_key_differs(
    stub: RememberStub, tmp_path: Path
) -> None:
    file = write_lines(tmp_path / "one.jsonl", [message("same")])
    assert kaibo(stub, "import", str(file), "--stream", "a").returncode == 0
    assert kaibo(stub, "import", str(file), "--stream", "b").returncode == 0
    assert (stub.texts("a"), stub.texts("b")) == (["same"], ["same"])


def test_given_an_unreachable_api_when_importing_then_exit_2_and_resume_is_suggested(tmp_path: Path) -> None:
    file = write_lines(tmp_path / "chat.jsonl", [message("x")])
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAIBO_")}
    result = subprocess.run(
        [sys.executable, "-m", "kaibo.cli", "import", str(file), "--stream", "chat"],
        env={**env, "KAIBO_ENDPOINT": "http://127.0.0.1:9", "KAIBO_API_KEY": API_KEY},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert "connection_failed" in result.stderr
    assert "run the same command again to resume" in result.stderr


# -- remember --file -----------------------------------------------------------------------------------


def test_given_a_json_list_file_when_remembering_it_twice_then_the_second_time_is_already_there(
    stub: RememberStub, tmp_path: Path
) -> None:
    file = tmp_path / "events.json"
    file.write_text(json.dumps([json.loads(message("a")), json.loads(message("b"))]), encoding="utf-8")
    first = kaibo(stub, "remember", "--stream", "chat", "--file", str(file))
    assert first.returncode == 0, first.stderr
    assert [line.split()[0] for line in first.stdout.splitlines()[:2]] == ["appended", "appended"]
    again = kaibo(stub, "remember", "--stream", "chat", "--file", str(file), "--json")
    assert again.returncode == 0, again.stderr
    assert [event["replayed"] for event in json.loads(again.stdout)["events"]] == [True, True]
    assert stub.texts("chat") == ["a", "b"]
    assert len(stub.remember_calls) == 2  # one call each: a file's events are one batch


def test_given_json_lines_on_stdin_when_remembering_then_each_line_is_an_event(stub: RememberStub) -> None:
    result = kaibo(
        stub, "remember", "--stream", "chat", "--file", "-", stdin=message("x") + "\n" + message("y")
    )
    assert result.returncode == 0, result.stderr
    assert stub.texts("chat") == ["x", "y"]


def test_given_more_events_than_one_call_takes_when_remembering_a_file_then_import_is_suggested(
    stub: RememberStub, tmp_path: Path
) -> None:
    file = write_lines(tmp_path / "big.jsonl", [message(str(n)) for n in range(50)])
    result = kaibo(stub, "remember", "--stream", "chat", "--file", str(file))
    assert result.returncode == 2
    assert f"kaibo import {file} --stream chat" in result.stderr
    assert stub.remember_calls == []


@pytest.mark.parametrize(
    "args",
    [
        ["--text", "a", "--file", "-"],
        ["--file", "-", "--key", "k"],
        [],
    ],
)
def test_given_a_bad_remember_usage_then_exit_2_without_a_call(stub: RememberStub, args: list[str]) -> None:
    result = kaibo(stub, "remember", "--stream", "chat", *args, stdin=message("x"))
    assert result.returncode == 2
    assert stub.remember_calls == []
