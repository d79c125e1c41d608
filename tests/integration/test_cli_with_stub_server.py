"""The real ``kaibo`` CLI, in a subprocess, against a small HTTP stub of the Kaibo API.

The stub serves chains built by the service's own chain code, pages them
(``limit`` and ``nextFromSeq``, at most 3 events a page) and checks the bearer
key. Tests then tamper with what it serves and read the CLI's exit code and output.
It also serves a deletion ledger built by the service's ledger code (2 entries a page),
receipts, memories and a scripted ``POST /v1/forget``: tests/integration/test_cli_forget.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

import pytest

import kaibo as kaibo_package
from kaibo_core.api.mapping import stored_event
from kaibo_core.core import chain
from kaibo_core.core.api_keys import admin_key_hash, is_admin_key
from kaibo_core.core.clock import format_instant
from kaibo_core.core.ledger import make_entry, reason_digest
from kaibo_core.core.models.events import EventRecord, StreamHead
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.services.remember import PlannedEvent, chain_records

PROJECT = ProjectId("prj_01JTESTE2E000000000000000A")
API_KEY = "kb_0123456789abcdef_" + "s" * 43
ADMIN_KEY = "kb_admin_" + "a" * 43
WRONG_KEY = "kb_fedcba9876543210_" + "w" * 43
PAGE_CAP = 3
LEDGER_PAGE_CAP = 2
REASON_SALT = "5a" * 16
FAR_FUTURE = "2999-01-01T00:00:00.000Z"
CHAT = "chat-42"
NOTES = "notes:2026.06"  # needs URL quoting, and has a purged event


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


@dataclass
class Stub:
    url: str = ""
    events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # as served, tamperable
    heads: dict[str, tuple[int, str]] = field(default_factory=dict)  # what GET /v1/streams lists
    requests: list[Recorded] = field(default_factory=list)
    fail_with: tuple[int, bytes] | None = None
    redirect_to: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    # The deletion ledger, receipts and memories, as served (tamperable).
    ledger: list[dict[str, Any]] = field(default_factory=list)
    receipts: dict[str, dict[str, Any]] = field(default_factory=dict)
    memories: dict[str, dict[str, Any]] = field(default_factory=dict)
    # What POST /v1/forget resolves any selector to: the memories (with content) and event ids.
    forget_set: list[dict[str, Any]] = field(default_factory=list)
    forget_event_ids: list[str] = field(default_factory=list)
    preview_token: str = "7e" * 32
    change_set_after_dry_run: bool = False  # the next real call then answers 409 preview_changed
    # Real forgets that do their work, then answer 502 (the answer lost on its way back).
    forget_answers_lost: int = 0
    # A keyed real forget's request (without its key) and answer, by key: what a retry replays.
    keyed_forgets: dict[str, tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=dict)

    def append_entry(
        self,
        memory_ids: Iterable[str],
        event_ids: Iterable[str],
        *,
        tombstoned_at: str = "2026-06-03T10:00:00.000Z",
        purge_after: str = "2026-06-04T10:00:00.000Z",
        reason: str = "user asked to erase it",
        state: str = "tombstoned",
    ) -> dict[str, Any]:
        """Append a ledger entry (chained onto the last served one) and serve its receipt."""
        seq = len(self.ledger) + 1
        entry = make_entry(
            project_id=PROJECT,
            seq=seq,
            receipt_id=f"rcpt_01JTESTE2E{seq:016d}",
            memory_ids=memory_ids,
            event_ids=event_ids,
            reason_digest=reason_digest(REASON_SALT, reason),
            tombstoned_at=tombstoned_at,
            purge_after=purge_after,
            prev_hash=self.ledger[-1]["hash"] if self.ledger else chain.GENESIS_PREV_HASH,
        ).as_served()
        self.ledger.append(entry)
        self.receipts[entry["id"]] = {**entry, "state": state}
        return entry

    def forget_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path == "/v1/forget"]

    def append(self, stream: str, planned: list[PlannedEvent], received_at: str) -> list[EventRecord]:
        seq, hash_hex = self.heads.get(stream, (0, chain.GENESIS_PREV_HASH))
        records = chain_records(PROJECT, stream, StreamHead(seq, hash_hex), planned, received_at)
        self.events.setdefault(stream, []).extend(stored_event(r) for r in records)
        self.heads[stream] = (records[-1].seq, records[-1].hash)
        return records

    def event(self, stream: str, seq: int) -> dict[str, Any]:
        return next(e for e in self.events[stream] if e["seq"] == seq)

    def event_requests(self, stream: str) -> list[int]:
        path = f"/v1/streams/{urllib.parse.quote(stream, safe='')}/events"
        return [int(r.query["fromSeq"][0]) for r in self.requests if r.path == path]


def planned(index: int, payload: dict[str, Any], key: str, occurred_at: str) -> PlannedEvent:
    canonical = chain.canonical_payload(payload)
    salt = f"{index:02x}" * chain.SALT_BYTES
    return PlannedEvent(
        index=index,
        event_id=f"evt_01JTESTE2E{index:016d}",
        kind="message",
        idempotency_key=key,
        occurred_at=occurred_at,
        occurred_at_given=True,
        canonical_payload=canonical.decode("utf-8"),
        salt=salt,
        payload_digest=chain.payload_digest(salt, canonical),
    )


class StubServer(ThreadingHTTPServer):
    stub: Stub


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def stub(self) -> Stub:
        return cast(StubServer, self.server).stub

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _reply(self, status: int, body: Any = None, raw: bytes | None = None) -> None:
        data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
        self.send_response(status)
        if data:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, code: str, message: str) -> None:
        self._reply(status, {"error": {"code": code, "message": message, "details": {}}})

    def _handle(self, method: str) -> None:
        parts = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        with self.stub.lock:
            self.stub.requests.append(
                Recorded(method, parts.path, urllib.parse.parse_qs(parts.query), dict(self.headers), body)
            )
            self._route(method, parts.path.split("/"), urllib.parse.parse_qs(parts.query), body)

    def _route(self, method: str, segments: list[str], query: dict[str, list[str]], body: Any) -> None:
        stub = self.stub
        if stub.fail_with is not None:
            self._reply(stub.fail_with[0], raw=stub.fail_with[1])
            return
        if stub.redirect_to is not None:
            self.send_response(307)
            self.send_header("Location", stub.redirect_to + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        admin = segments[:3] == ["", "v1", "admin"]
        expected_key = ADMIN_KEY if admin else API_KEY
        if self.headers.get("Authorization") != f"Bearer {expected_key}":
            self._error(401, "unauthorized", "Missing, unknown or revoked API key.")
            return
        assert (self.headers.get("User-Agent") or "").startswith("kaibo-python/")
        match method, segments[1:]:
            case "GET", ["v1", "streams"]:
                self._streams(query)
            case "GET", ["v1", "streams", stream, "events"]:
                self._events(urllib.parse.unquote(stream), query)
            case "POST", ["v1", "remember"]:
                self._remember(body)
            case "POST", ["v1", "admin", "projects"]:
                self._reply(
                    201, {"projectId": PROJECT, "keyId": "00000000000000aa", "apiKey": "kb_NEW", "scopes": []}
                )
            case "POST", ["v1", "admin", "projects", project, "keys"]:
                scopes = body["scopes"]
                self._reply(
                    201, {"keyId": "00000000000000bb", "apiKey": f"kb_NEW_FOR_{project}", "scopes": scopes}
                )
            case "DELETE", ["v1", "admin", "keys", _key_id]:
                self._reply(204)
            case _:
                self._route_forget(method, segments, query, body)

    def _route_forget(self, method: str, segments: list[str], query: dict[str, list[str]], body: Any) -> None:
        match method, segments[1:]:
            case "POST", ["v1", "forget"]:
                self._forget(body)
            case "GET", ["v1", "ledger"]:
                self._ledger(query)
            case "GET", ["v1", "receipts", receipt_id]:
                self._found(self.stub.receipts.get(urllib.parse.unquote(receipt_id)), "receipt_not_found")
            case "GET", ["v1", "memories", memory_id]:
                self._found(self.stub.memories.get(urllib.parse.unquote(memory_id)), "memory_not_found")
            case _:
                self._error(404, "not_found", "No such route.")

    def _streams(self, query: dict[str, list[str]]) -> None:
        names = sorted(self.stub.heads)
        start = int(query.get("cursor", ["0"])[0])  # one stream a page, to make the client follow cursors
        page = [
            {"stream": s, "seq": self.stub.heads[s][0], "hash": self.stub.heads[s][1]}
            for s in names[start:][:1]
        ]
        answer: dict[str, Any] = {"streams": page}
        if start + 1 < len(names):
            answer["nextCursor"] = str(start + 1)
        self._reply(200, answer)

    def _events(self, stream: str, query: dict[str, list[str]]) -> None:
        from_seq, limit = int(query["fromSeq"][0]), int(query["limit"][0])
        if not 1 <= limit <= 1000:
            self._error(422, "invalid_request", "limit must be 1-1000")
            return
        remaining = [e for e in self.stub.events.get(stream, []) if e["seq"] >= from_seq]
        page = remaining[: min(limit, PAGE_CAP)]
        answer: dict[str, Any] = {"events": page, "nextFromSeq": None}
        if len(remaining) > len(page):
            answer["nextFromSeq"] = page[-1]["seq"] + 1
        self._reply(200, answer)

    def _found(self, served: dict[str, Any] | None, code: str) -> None:
        if served is None:
            self._error(404, code, "Not found in this project.")
        else:
            self._reply(200, served)

    def _ledger(self, query: dict[str, list[str]]) -> None:
        from_seq = int(query.get("fromSeq", ["1"])[0])
        remaining = self.stub.ledger[from_seq - 1 :]
        page = remaining[:LEDGER_PAGE_CAP]
        answer: dict[str, Any] = {"entries": page}
        if len(remaining) > len(page):
            answer["nextFromSeq"] = from_seq + len(page)
        self._reply(200, answer)

    def _answered_by_key(self, key: str, request: dict[str, Any]) -> bool:
        """Answer a keyed forget as the API does when the key decides (a dry run, a key in use)."""
        if request.get("dryRun"):
            self._error(400, "idempotency_key_with_dry_run", "A dry run takes no idempotencyKey.")
            return True
        if key not in self.stub.keyed_forgets:
            return False
        first_request, first_answer = self.stub.keyed_forgets[key]
        if request != first_request:
            self._error(409, "idempotency_key_reused", "This key was used by another forget.")
        else:
            self._reply(200, {**first_answer, "replayed": True})
        return True

    def _forget(self, body: dict[str, Any]) -> None:
        stub = self.stub
        assert [k for k in ("memoryId", "query", "stream", "subject") if k in body] != [], body
        assert body["reason"]
        limit = body.get("maxMemories", 100)
        if len(stub.forget_set) > limit:
            self._reply(
                422,
                {
                    "error": {
                        "code": "forget_set_too_large",
                        "message": f"This forget would erase more than {limit} memories.",
                        "details": {"maxMemories": limit},
                    }
                },
            )
            return
        key = body.get("idempotencyKey")
        request = {k: v for k, v in body.items() if k != "idempotencyKey"}
        if key is not None and self._answered_by_key(key, request):
            return
        listed = [{k: v for k, v in m.items() if k != "content"} for m in stub.forget_set]
        answer: dict[str, Any] = {
            "dryRun": bool(body.get("dryRun")),
            "previewToken": stub.preview_token,
            "memories": [dict(m) for m in stub.forget_set] if body.get("dryRun") else listed,
            "eventIds": list(stub.forget_event_ids),
        }
        if body.get("dryRun"):
            if stub.change_set_after_dry_run:
                stub.preview_token = "c4" * 32
            self._reply(200, answer)
            return
        if "previewToken" in body and body["previewToken"] != stub.preview_token:
            self._reply(
                409,
                {
                    "error": {
                        "code": "preview_changed",
                        "message": "The set changed since the dry run; run the dry run again.",
                        "details": {"previewToken": stub.preview_token},
                    }
                },
            )
            return
        if stub.forget_set:
            answer["receipt"] = stub.append_entry(
                [m["id"] for m in stub.forget_set],
                stub.forget_event_ids,
                reason=body["reason"],
                tombstoned_at=format_instant(datetime.now(UTC)),
                purge_after=FAR_FUTURE,
            )
            answer["reasonSalt"] = REASON_SALT
            for forgotten in stub.forget_set:
                served = stub.memories.get(forgotten["id"])
                if served is not None:
                    served.pop("content", None)
                    served["status"] = "tombstoned"
        if key is not None:
            answer["replayed"] = False
            stub.keyed_forgets[key] = (request, answer)
        if stub.forget_answers_lost:
            stub.forget_answers_lost -= 1
            self._reply(502, raw=b"Bad Gateway")
            return
        self._reply(200, answer)

    def _remember(self, body: dict[str, Any]) -> None:
        now = format_instant(datetime.now(UTC))
        plans = [
            planned(i, e["payload"], e["idempotencyKey"], e.get("occurredAt", now))
            for i, e in enumerate(body["events"])
        ]
        records = self.stub.append(body["stream"], plans, now)
        receipts = [
            {
                "id": r.id,
                "stream": r.stream,
                "seq": r.seq,
                "hash": r.hash,
                "prevHash": r.prev_hash,
                "idempotencyKey": r.idempotency_key,
                "replayed": False,
            }
            for r in records
        ]
        self._reply(202, {"events": receipts, "memories": []})


@contextmanager
def serve(state: Stub) -> Iterator[Stub]:
    """Serve ``state`` on a free local port until the block ends."""
    server = StubServer(("127.0.0.1", 0), Handler)
    server.stub = state
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def stub() -> Iterator[Stub]:
    state = Stub()
    chat = [
        planned(
            i,
            {"role": "user", "text": f"Grüße {i} 👋", "n": 1e21, "x": [0.1, None]},
            f"k-{i}",
            f"2026-06-02T09:3{i}:00.000Z",
        )
        for i in range(7)
    ]
    state.append(CHAT, chat[:2], "2026-06-02T09:40:00.000Z")
    state.append(CHAT, chat[2:], "2026-06-02T09:41:00.000Z")
    notes = [
        planned(i, {"role": "user", "text": f"note {i}"}, f"n-{i}", "2026-06-02T10:00:00.000Z")
        for i in range(3)
    ]
    state.append(NOTES, notes, "2026-06-02T10:00:01.000Z")
    # Purged as the service serves it: payload and salt null.
    state.event(NOTES, 2).update(payload=None, salt=None)
    with serve(state):
        yield state


def kaibo(
    stub: Stub,
    *args: str,
    api_key: str | None = API_KEY,
    admin_key: str | None = None,
    project_id: str | None = None,
    stdin: str = "",
    stdin_fd: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the CLI; ``stdin`` is its piped input (by default nothing: end of input at once), or
    ``stdin_fd`` a file descriptor to read instead (a terminal, for a question)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAIBO_")}
    env["KAIBO_ENDPOINT"] = stub.url
    if api_key is not None:
        env["KAIBO_API_KEY"] = api_key
    if admin_key is not None:
        env["KAIBO_ADMIN_KEY"] = admin_key
    if project_id is not None:
        env["KAIBO_PROJECT_ID"] = project_id
    result = subprocess.run(
        [sys.executable, "-m", "kaibo.cli", *args],
        env=env,
        input=None if stdin_fd is not None else stdin,
        stdin=stdin_fd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = result.stdout + result.stderr
    for secret in (API_KEY, ADMIN_KEY, WRONG_KEY):
        assert secret not in output, "the CLI printed a key it was given"
    return result


def head(stub: Stub, stream: str, seq: int) -> str:
    return f"{seq}:{stub.event(stream, seq)['hash']}"


# -- verify: intact and tampered chains ------------------------------------------------------------------


def test_given_intact_chains_when_verifying_all_then_exit_0_with_ok_lines_and_pinnable_heads(
    stub: Stub,
) -> None:
    result = kaibo(stub, "verify")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert f"ok {CHAT}: 7 events, 7 payloads checked, head {head(stub, CHAT, 7)}" in lines
    assert f"ok {NOTES}: 3 events, 2 payloads checked, head {head(stub, NOTES, 3)}" in lines
    assert lines[-1] == "verified: 2 streams ok"
    assert stub.event_requests(CHAT) == [1, 4, 7]  # followed nextFromSeq page by page
    assert stub.event_requests(NOTES) == [1]
    assert all(r.query["limit"] == ["500"] for r in stub.requests if r.path.endswith("/events"))
    assert [r.query.get("cursor") for r in stub.requests if r.path == "/v1/streams"] == [None, ["1"]]


def test_given_one_stream_when_verifying_it_then_only_that_stream_is_read(stub: Stub) -> None:
    result = kaibo(stub, "verify", "--stream", NOTES)
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout.splitlines()[0]
        == f"ok {NOTES}: 3 events, 2 payloads checked, head {head(stub, NOTES, 3)}"
    )
    assert stub.event_requests(CHAT) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [("receivedAt", "2026-06-02T09:41:00.001Z"), ("kind", "tool_call"), ("idempotencyKey", "k-other")],
)
def test_given_a_tampered_header_field_when_verifying_then_exit_1_naming_the_seq(
    stub: Stub, field: str, value: str
) -> None:
    stub.event(CHAT, 4)[field] = value
    result = kaibo(stub, "verify")
    assert result.returncode == 1
    assert f"FAIL {CHAT} seq 4: hash_mismatch: " in result.stdout
    assert f"ok {NOTES}: " in result.stdout  # the other stream is still checked
    assert result.stdout.splitlines()[-1] == "FAILED: 1 of 2 streams failed verification"
    assert stub.event_requests(CHAT) == [1, 4]  # stopped paging at the first problem


def test_given_a_tampered_payload_when_verifying_then_exit_1_with_payload_digest_mismatch(stub: Stub) -> None:
    stub.event(CHAT, 5)["payload"]["text"] = "Grüße 5 👋 (edited)"
    result = kaibo(stub, "verify", "--stream", CHAT)
    assert result.returncode == 1
    assert f"FAIL {CHAT} seq 5: payload_digest_mismatch: " in result.stdout


def test_given_a_removed_event_when_verifying_then_exit_1_with_a_gap_at_its_seq(stub: Stub) -> None:
    stub.events[CHAT].remove(stub.event(CHAT, 3))
    result = kaibo(stub, "verify")
    assert result.returncode == 1
    assert f"FAIL {CHAT} seq 3: seq_gap: " in result.stdout


def test_given_the_newest_event_withheld_when_verifying_all_then_the_listed_head_catches_it(
    stub: Stub,
) -> None:
    stub.events[CHAT].pop()
    result = kaibo(stub, "verify")
    assert result.returncode == 1
    assert f"FAIL {CHAT} seq 7: listed_head_missing: " in result.stdout


# -- verify --expect-head ----------------------------------------------------------------------------------


def test_given_the_right_pinned_head_when_verifying_then_exit_0(stub: Stub) -> None:
    result = kaibo(stub, "verify", "--stream", CHAT, "--expect-head", head(stub, CHAT, 4))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"ok {CHAT}: 7 events")


def test_given_a_pinned_head_with_another_hash_when_verifying_then_exit_1(stub: Stub) -> None:
    result = kaibo(stub, "verify", "--stream", CHAT, "--expect-head", f"4:{'ab' * 32}")
    assert result.returncode == 1
    assert f"FAIL {CHAT} seq 4: pinned_head_mismatch: " in result.stdout


def test_given_a_pinned_head_beyond_the_chain_when_verifying_then_exit_1(stub: Stub) -> None:
    result = kaibo(stub, "verify", "--stream", CHAT, "--expect-head", f"8:{stub.event(CHAT, 7)['hash']}")
    assert result.returncode == 1
    assert f"FAIL {CHAT} seq 8: pinned_head_missing: " in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["verify", "--expect-head", "4:" + "ab" * 32],  # a head belongs to one stream
        ["verify", "--stream", CHAT, "--expect-head", "four:abc"],
        ["verify", "--stream", CHAT, "--expect-head", "0:" + "ab" * 32],
    ],
)
def test_given_a_bad_expect_head_usage_when_verifying_then_exit_2(stub: Stub, args: list[str]) -> None:
    result = kaibo(stub, *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert stub.requests == []


# -- errors ------------------------------------------------------------------------------------------------


def test_given_a_wrong_api_key_when_verifying_then_exit_2_with_the_error_code(stub: Stub) -> None:
    result = kaibo(stub, "verify", api_key=WRONG_KEY)
    assert result.returncode == 2
    assert "unauthorized" in result.stderr
    assert "Missing, unknown or revoked API key." in result.stderr


def test_given_no_endpoint_when_verifying_then_exit_2_naming_the_setting(stub: Stub) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAIBO_")}
    env["KAIBO_API_KEY"] = API_KEY
    result = subprocess.run(
        [sys.executable, "-m", "kaibo.cli", "verify"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert "KAIBO_ENDPOINT" in result.stderr


def test_given_a_server_fault_without_error_body_when_verifying_then_exit_2_with_http_code(
    stub: Stub,
) -> None:
    stub.fail_with = (502, b"Bad Gateway")
    result = kaibo(stub, "verify")
    assert result.returncode == 2
    assert "http_502" in result.stderr


def test_given_a_redirect_when_verifying_then_it_is_not_followed_and_exit_2(stub: Stub) -> None:
    stub.redirect_to = stub.url + "/elsewhere"  # following it would resend the key
    result = kaibo(stub, "verify")
    assert result.returncode == 2
    assert "redirect_refused" in result.stderr
    assert [r.path for r in stub.requests] == ["/v1/streams"]


# -- keys (admin) ------------------------------------------------------------------------------------------


def test_given_the_admin_key_when_creating_a_project_then_the_new_key_is_printed_once_with_a_warning(
    stub: Stub,
) -> None:
    result = kaibo(stub, "keys", "create", "--name", "acme", api_key=None, admin_key=ADMIN_KEY)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "projectId": PROJECT,
        "keyId": "00000000000000aa",
        "apiKey": "kb_NEW",
        "scopes": [],
    }
    assert "shown once" in result.stderr
    (request,) = stub.requests
    assert (request.method, request.path, request.body) == ("POST", "/v1/admin/projects", {"name": "acme"})
    assert request.headers["Authorization"] == f"Bearer {ADMIN_KEY}"
    assert request.headers["Content-Type"] == "application/json"


def test_given_the_admin_key_when_creating_another_key_then_scopes_are_sent(stub: Stub) -> None:
    result = kaibo(stub, "keys", "create", "--project", PROJECT, "--scopes", "read", admin_key=ADMIN_KEY)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["apiKey"] == f"kb_NEW_FOR_{PROJECT}"
    assert stub.requests[0].body == {"scopes": ["read"]}


def test_given_the_admin_key_when_revoking_a_key_then_204_and_revoked(stub: Stub) -> None:
    result = kaibo(stub, "keys", "revoke", "0123456789abcdef", admin_key=ADMIN_KEY)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "revoked 0123456789abcdef"
    assert (stub.requests[0].method, stub.requests[0].path) == ("DELETE", "/v1/admin/keys/0123456789abcdef")


def test_given_only_a_project_key_when_creating_a_project_then_exit_2_without_calling(stub: Stub) -> None:
    result = kaibo(stub, "keys", "create", "--name", "acme")
    assert result.returncode == 2
    assert "KAIBO_ADMIN_KEY" in result.stderr
    assert stub.requests == []


def test_given_the_offline_admin_key_command_then_a_key_and_its_hash_are_printed(stub: Stub) -> None:
    result = kaibo(stub, "admin-key", api_key=None)
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert admin_key_hash(printed["adminKey"]) == printed["adminKeyHash"]
    assert is_admin_key(printed["adminKey"], printed["adminKeyHash"])
    assert "AdminKeyHash" in result.stderr
    assert stub.requests == []


# -- remember, streams, events -----------------------------------------------------------------------------


def test_given_text_when_remembering_then_a_message_event_is_appended_and_verifies(stub: Stub) -> None:
    result = kaibo(
        stub,
        "remember",
        "--stream",
        "new-1",
        "--text",
        "Move the release to July 17",
        "--key",
        "msg-1",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    receipt = json.loads(result.stdout)["events"][0]
    assert (receipt["seq"], receipt["idempotencyKey"]) == (1, "msg-1")
    assert stub.requests[0].body == {
        "stream": "new-1",
        "events": [
            {
                "kind": "message",
                "payload": {"role": "user", "text": "Move the release to July 17"},
                "idempotencyKey": "msg-1",
            }
        ],
        "wait": False,
    }
    verified = kaibo(stub, "verify", "--stream", "new-1", "--expect-head", f"1:{receipt['hash']}")
    assert verified.returncode == 0, verified.stdout
    assert verified.stdout.startswith("ok new-1: 1 events, 1 payloads checked")


def test_given_event_json_when_remembering_then_a_random_idempotency_key_is_added(stub: Stub) -> None:
    event = {"kind": "tool_call", "payload": {"tool": "grep"}}
    result = kaibo(
        stub,
        "remember",
        "--stream",
        "new-2",
        "--event-json",
        json.dumps(event),
        "--occurred-at",
        "2026-06-02T09:30:00Z",
    )
    assert result.returncode == 0, result.stderr
    (sent,) = stub.requests[0].body["events"]
    assert sent["kind"] == "tool_call"
    assert sent["occurredAt"] == "2026-06-02T09:30:00Z"
    assert len(sent["idempotencyKey"]) == 36  # a UUID


def test_given_streams_when_listing_then_one_line_per_stream_with_its_head(stub: Stub) -> None:
    result = kaibo(stub, "streams")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"{CHAT} 7 {stub.event(CHAT, 7)['hash']}",
        f"{NOTES} 3 {stub.event(NOTES, 3)['hash']}",
    ]


def test_given_a_stream_when_listing_events_then_json_lines_across_pages(stub: Stub) -> None:
    result = kaibo(stub, "events", "--stream", CHAT, "--from-seq", "2")
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["seq"] for line in result.stdout.splitlines()] == [2, 3, 4, 5, 6, 7]
    assert stub.event_requests(CHAT) == [2, 5]


def test_given_version_then_the_client_version_is_printed(stub: Stub) -> None:
    result = kaibo(stub, "--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"kaibo {kaibo_package.__version__}"


def test_given_an_unknown_stream_when_listing_events_then_it_says_so_and_fails(stub: Stub) -> None:
    result = kaibo(stub, "events", "--stream", "no-such-stream")
    assert result.returncode == 1
    assert result.stdout == ""
    assert "no stream 'no-such-stream'" in result.stderr


def test_given_an_unknown_stream_when_verifying_it_then_it_says_so_and_fails(stub: Stub) -> None:
    result = kaibo(stub, "verify", "--stream", "no-such-stream")
    assert result.returncode == 1  # a typo is no verified chain
    assert "verified" not in result.stdout
    assert "no stream 'no-such-stream'" in result.stderr


def test_given_the_output_pipe_closed_early_then_it_stops_quietly_with_the_sigpipe_code() -> None:
    # `kaibo events … | head -1`: the code a shell gives any command ended by SIGPIPE, not 2 (usage).
    code = "import sys; from kaibo.cli._shared import _exit_code\n" \
           "def pipe_gone() -> int:\n    raise BrokenPipeError\n" \
           "sys.exit(_exit_code(pipe_gone))"  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 141
    assert result.stderr == ""
