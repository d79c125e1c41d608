"""Both Python clients, KaiboClient and AsyncKaiboClient, against a scripted HTTP stub on loopback:
retries (429 after Retry-After; 5xx and dropped connections only for idempotent calls),
redirects refused, timeouts, typed recall packs, pages and a recall event stream read as it
arrives."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kaibo import (
    AsyncKaiboClient,
    KaiboAPIError,
    KaiboClient,
    KaiboConnectionError,
    KaiboTimeoutError,
    RecallPack,
)
from kaibo.retry import RetryPolicy

KEY = "kb_0123456789abcdef_" + "s" * 43
NO_WAIT = RetryPolicy(backoff_base=0.0, jitter=lambda: 0.0)
#: How long the stub waits for a gate the test opens: only reached when a test is broken.
GATE_SECONDS = 10.0
PACK = {
    "items": [
        {
            "memoryId": "mem_1",
            "type": "decision",
            "form": "quote",
            "text": "The release target is July 17.",
            "validFrom": "2026-06-02T09:30:00.000Z",
            "validTo": None,
            "confidence": 0.9,
            "score": 1.7,
            "tokens": 9,
            "citations": [{"eventId": "evt_2", "stream": "chat-42", "seq": 2, "hash": "ab" * 32}],
        }
    ],
    "usedTokens": 9,
    "budget": 300,
    "asOf": "2026-07-01T00:00:00.000Z",
    "abstain": {"abstained": False},
}


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Drop:
    """Close the connection without an answer."""


@dataclass
class Stall:
    """Answer nothing until the gate opens (the test opens it once the client gave up)."""

    gate: threading.Event


@dataclass
class Stream:
    """An event stream: the first chunk, then the rest once the gate opens (the test opens it
    only after the client yielded the first event; if it never does, the stream breaks off)."""

    first: bytes
    rest: bytes
    gate: threading.Event


Action = Reply | Drop | Stall | Stream


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class Stub(ThreadingHTTPServer):
    script: list[Action]
    seen: list[Seen]

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def play(self, *actions: Action) -> None:
        """The answers, in order; the last one repeats."""
        self.script = list(actions)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that closes a kept-alive connection (after a stream it left early) is fine.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    server: Stub
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def do_DELETE(self) -> None:
        self._answer()

    def _answer(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.seen.append(
            Seen(self.command, self.path, dict(self.headers), json.loads(raw) if raw else None)
        )
        script = self.server.script
        action = script.pop(0) if len(script) > 1 else script[0]
        if isinstance(action, Drop):
            self.close_connection = True
        elif isinstance(action, Stall):
            action.gate.wait(GATE_SECONDS)
            self.close_connection = True
        elif isinstance(action, Stream):
            self._stream(action)
        else:
            self._reply(action)

    def _reply(self, reply: Reply) -> None:
        body = b"" if reply.body is None else json.dumps(reply.body).encode()
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        if body:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, stream: Stream) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._chunk(stream.first)
        if not stream.gate.wait(GATE_SECONDS):
            # A client that waits for the whole body before yielding never gets the rest.
            self.close_connection = True
            return
        self._chunk(stream.rest)
        self._chunk(b"")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def log_message(self, *args: object) -> None:
        pass


def sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


@pytest.fixture
def stub() -> Iterator[Stub]:
    server = Stub(("127.0.0.1", 0), Handler)
    server.seen = []
    server.play(Reply(body={}))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def client(stub: Stub) -> Iterator[KaiboClient]:
    with KaiboClient(stub.url, KEY, retry=NO_WAIT) as kaibo:
        yield kaibo


def run(stub: Stub, scenario: Callable[[AsyncKaiboClient], Any], **options: Any) -> Any:
    """``scenario`` with an AsyncKaiboClient on the stub, in a fresh event loop."""

    async def main() -> Any:
        async with AsyncKaiboClient(stub.url, KEY, retry=NO_WAIT, **options) as kaibo:
            return await scenario(kaibo)

    return asyncio.run(main())


async def collect(items: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in items]


BUSY = Reply(429, {"error": {"code": "stream_busy", "message": "busy"}}, {"Retry-After": "0"})
UNAVAILABLE = Reply(503, {"error": {"code": "internal_error", "message": "down"}})
REMEMBERED = Reply(202, {"events": [], "memories": []})

# -- retries ---------------------------------------------------------------------------------------------


def test_given_busy_twice_then_the_async_client_succeeds_on_the_third_attempt(stub: Stub) -> None:
    stub.play(BUSY, BUSY, REMEMBERED)
    assert run(stub, lambda kaibo: kaibo.remember("s", [])) == {"events": [], "memories": []}
    assert len(stub.seen) == 3


def test_given_a_503_on_a_read_then_both_clients_retry_it(stub: Stub, client: KaiboClient) -> None:
    stub.play(UNAVAILABLE, Reply(body={"jobId": "job_1", "status": "done"}))
    assert client.job("job_1")["status"] == "done"
    stub.play(UNAVAILABLE, Reply(body={"jobId": "job_1", "status": "done"}))
    assert run(stub, lambda kaibo: kaibo.job("job_1"))["status"] == "done"
    assert [seen.path for seen in stub.seen] == ["/v1/jobs/job_1"] * 4


def test_given_a_503_on_a_real_forget_then_neither_client_sends_it_again(
    stub: Stub, client: KaiboClient
) -> None:
    stub.play(UNAVAILABLE)
    with pytest.raises(KaiboAPIError) as sync_error:
        client.forget(stream="chat", reason="asked", preview_token="ab" * 32)
    with pytest.raises(KaiboAPIError) as async_error:
        run(stub, lambda kaibo: kaibo.forget(stream="chat", reason="asked", preview_token="ab" * 32))
    assert (sync_error.value.code, async_error.value.code) == ("internal_error", "internal_error")
    assert len(stub.seen) == 2


def test_given_a_subject_then_both_clients_send_it_as_the_forget_s_selector(
    stub: Stub, client: KaiboClient
) -> None:
    dry = Reply(body={"dryRun": True, "previewToken": "t", "memories": []})
    stub.play(dry, dry)
    assert client.forget(subject="Alice", reason="asked", dry_run=True)["previewToken"] == "t"
    assert (
        run(stub, lambda kaibo: kaibo.forget(subject="Alice", reason="asked", dry_run=True))["dryRun"] is True
    )
    assert [seen.body for seen in stub.seen] == [{"subject": "Alice", "reason": "asked", "dryRun": True}] * 2


def test_given_a_503_on_a_dry_run_forget_then_it_is_retried(stub: Stub, client: KaiboClient) -> None:
    stub.play(UNAVAILABLE, Reply(body={"dryRun": True, "previewToken": "t", "memories": []}))
    assert client.forget(stream="chat", reason="asked", dry_run=True)["previewToken"] == "t"
    assert [seen.body["dryRun"] for seen in stub.seen] == [True, True]


def test_given_a_503_on_a_keyed_forget_then_both_clients_send_it_again_with_its_key(
    stub: Stub, client: KaiboClient
) -> None:
    replayed = Reply(body={"dryRun": False, "memories": [], "receipt": {"id": "rcpt_1"}, "replayed": True})
    stub.play(UNAVAILABLE, replayed)
    assert client.forget(stream="chat", reason="asked", idempotency_key="erase-1")["replayed"] is True
    stub.play(Drop(), replayed)
    answer = run(stub, lambda kaibo: kaibo.forget(stream="chat", reason="asked", idempotency_key="erase-1"))
    assert answer["receipt"] == {"id": "rcpt_1"}
    assert [seen.body.get("idempotencyKey") for seen in stub.seen] == ["erase-1"] * 4


def test_given_a_dropped_connection_on_a_read_then_retried(stub: Stub, client: KaiboClient) -> None:
    stub.play(Drop(), Reply(body={"id": "mem_1", "status": "active"}))
    assert client.memory("mem_1")["status"] == "active"
    stub.play(Drop(), Reply(body={"id": "mem_1", "status": "active"}))
    assert run(stub, lambda kaibo: kaibo.memory("mem_1"))["status"] == "active"
    assert len(stub.seen) == 4


def test_given_connections_always_dropped_then_a_connection_error_after_the_retries(stub: Stub) -> None:
    stub.play(Drop())
    with (
        KaiboClient(stub.url, KEY, max_retries=1, retry=NO_WAIT) as kaibo,
        pytest.raises(KaiboConnectionError),
    ):
        kaibo.memory("mem_1")
    assert len(stub.seen) == 2


def test_given_no_answer_within_the_timeout_then_a_timeout_error_and_no_retry(stub: Stub) -> None:
    gates = [threading.Event(), threading.Event()]
    stub.play(Stall(gates[0]), Stall(gates[1]))
    try:
        with (
            KaiboClient(stub.url, KEY, timeout=0.3, retry=NO_WAIT) as kaibo,
            pytest.raises(KaiboTimeoutError),
        ):
            kaibo.memory("mem_1")
        with pytest.raises(KaiboTimeoutError) as raised:
            run(stub, lambda kaibo: kaibo.memory("mem_1"), timeout=0.3)
    finally:
        for gate in gates:
            gate.set()
    assert raised.value.code == "timeout"
    assert len(stub.seen) == 2


def test_given_a_422_then_the_async_error_carries_the_api_code_and_details(stub: Stub) -> None:
    details = {"errors": [{"field": "budget", "type": "int", "problem": "too small"}]}
    stub.play(Reply(422, {"error": {"code": "invalid_request", "message": "no", "details": details}}))
    with pytest.raises(KaiboAPIError) as raised:
        run(stub, lambda kaibo: kaibo.recall("q", 0))
    assert (raised.value.status, raised.value.code, raised.value.details) == (422, "invalid_request", details)
    assert len(stub.seen) == 1


# -- redirects -------------------------------------------------------------------------------------------


def test_given_a_redirect_then_neither_client_follows_it(stub: Stub, client: KaiboClient) -> None:
    stub.play(Reply(307, headers={"Location": stub.url + "/elsewhere"}))
    with pytest.raises(KaiboAPIError) as sync_error:
        client.receipt("rcpt_1")
    with pytest.raises(KaiboAPIError) as async_error:
        run(stub, lambda kaibo: kaibo.receipt("rcpt_1"))
    for error in (sync_error.value, async_error.value):
        assert error.code == "redirect_refused"
        assert stub.url + "/elsewhere" in error.message
    assert [seen.path for seen in stub.seen] == ["/v1/receipts/rcpt_1"] * 2


# -- results ---------------------------------------------------------------------------------------------


def test_given_a_recall_then_both_clients_return_a_pack_and_send_the_same_request(
    stub: Stub, client: KaiboClient
) -> None:
    stub.play(Reply(body=PACK))
    sync_pack = client.recall("When?", 100, as_of="2026-07-01T00:00:00Z", streams=["chat-42"])
    async_pack = run(
        stub, lambda kaibo: kaibo.recall("When?", 100, as_of="2026-07-01T00:00:00Z", streams=["chat-42"])
    )
    for pack in (sync_pack, async_pack):
        assert pack == PACK
        assert pack.top is not None
        assert pack.top.text == "The release target is July 17."
        assert "[1] The release target is July 17." in pack.as_context()
    first, second = stub.seen
    assert (
        first.body
        == second.body
        == {
            "question": "When?",
            "budget": 100,
            "asOf": "2026-07-01T00:00:00Z",
            "streams": ["chat-42"],
        }
    )
    assert first.headers["Authorization"] == second.headers["Authorization"] == f"Bearer {KEY}"


def test_given_a_recalled_item_then_async_explain_asks_for_its_memory(stub: Stub) -> None:
    async def scenario(kaibo: AsyncKaiboClient) -> Any:
        pack = await kaibo.recall("When?")
        assert pack.top is not None
        return await kaibo.explain(pack.top)

    stub.play(Reply(body=PACK), Reply(body={"memoryId": "mem_1", "chain": []}))
    assert run(stub, scenario) == {"memoryId": "mem_1", "chain": []}
    assert stub.seen[1].body == {"memoryId": "mem_1"}


def test_given_pages_then_the_async_events_follow_next_from_seq(stub: Stub) -> None:
    stub.play(
        Reply(body={"events": [{"seq": 1}, {"seq": 2}], "nextFromSeq": 3}),
        Reply(body={"events": [{"seq": 3}]}),
    )
    events = run(stub, lambda kaibo: collect(kaibo.events("chat/42", limit=2)))
    assert [event["seq"] for event in events] == [1, 2, 3]
    assert [seen.path for seen in stub.seen] == [
        "/v1/streams/chat%2F42/events?limit=2&fromSeq=1",
        "/v1/streams/chat%2F42/events?limit=2&fromSeq=3",
    ]


def test_given_streams_and_the_ledger_then_the_async_listings_walk_every_page(stub: Stub) -> None:
    stub.play(
        Reply(body={"streams": [{"stream": "a"}], "nextCursor": "c1"}),
        Reply(body={"streams": [{"stream": "b"}]}),
        Reply(body={"entries": [{"ledgerSeq": 1}]}),
    )

    async def scenario(kaibo: AsyncKaiboClient) -> tuple[list[Any], list[Any]]:
        return await collect(kaibo.streams()), await collect(kaibo.ledger())

    heads, entries = run(stub, scenario)
    assert [head["stream"] for head in heads] == ["a", "b"]
    assert entries == [{"ledgerSeq": 1}]
    assert [seen.path for seen in stub.seen] == [
        "/v1/streams",
        "/v1/streams?cursor=c1",
        "/v1/ledger?fromSeq=1",
    ]


def test_given_admin_calls_then_the_async_client_sends_them_once(stub: Stub) -> None:
    stub.play(Reply(201, {"projectId": "prj_1", "apiKey": "k"}), Reply(201, {"keyId": "key_2"}), Reply(204))

    async def scenario(kaibo: AsyncKaiboClient) -> Any:
        created = await kaibo.create_project("p", "Europe/Berlin")
        key = await kaibo.create_key(created["projectId"], ["read"])
        return await kaibo.revoke_key(key["keyId"])

    assert run(stub, scenario) is None
    assert [(seen.method, seen.path, seen.body) for seen in stub.seen] == [
        ("POST", "/v1/admin/projects", {"name": "p", "timeZone": "Europe/Berlin"}),
        ("POST", "/v1/admin/projects/prj_1/keys", {"scopes": ["read"]}),
        ("DELETE", "/v1/admin/keys/key_2", None),
    ]


def test_given_webhook_calls_then_a_5xx_is_retried_on_a_listing_only(stub: Stub, client: KaiboClient) -> None:
    hook = {"id": "wh_1", "url": "https://example.com/h", "events": ["memory.forgotten"]}
    stub.play(UNAVAILABLE, Reply(200, {"webhooks": [hook]}), UNAVAILABLE)
    assert client.webhooks() == [hook]
    with pytest.raises(KaiboAPIError):
        client.create_webhook("https://example.com/h", ["memory.forgotten"])
    stub.play(Reply(204), UNAVAILABLE)
    assert run(stub, lambda kaibo: kaibo.delete_webhook("wh_1")) is None
    with pytest.raises(KaiboAPIError):
        run(stub, lambda kaibo: kaibo.rotate_webhook_secret("wh_1"))
    assert [(seen.method, seen.path) for seen in stub.seen] == [
        ("GET", "/v1/webhooks"),
        ("GET", "/v1/webhooks"),
        ("POST", "/v1/webhooks"),  # sent once: a second webhook would be made
        ("DELETE", "/v1/webhooks/wh_1"),
        ("POST", "/v1/webhooks/wh_1/rotate-secret"),  # sent once: each rotation makes a new secret
    ]


# -- the recall event stream -----------------------------------------------------------------------------


def streamed(gate: threading.Event) -> Stream:
    return Stream(
        sse("candidates", {"candidates": []}), sse("packed", {"items": []}) + sse("final", PACK), gate
    )


def test_given_a_recall_stream_then_the_sync_client_yields_candidates_before_the_rest_is_sent(
    stub: Stub, client: KaiboClient
) -> None:
    gate = threading.Event()
    stub.play(streamed(gate))
    events = client.recall_stream("When?")
    assert next(events) == ("candidates", {"candidates": []})
    gate.set()
    rest = list(events)
    assert [name for name, _ in rest] == ["packed", "final"]
    final = rest[-1][1]
    assert isinstance(final, RecallPack)
    assert final.top is not None
    assert final.top.memory_id == "mem_1"
    assert stub.seen[0].headers["Accept"] == "text/event-stream"


def test_given_a_recall_stream_then_the_async_client_yields_candidates_before_the_rest_is_sent(
    stub: Stub,
) -> None:
    gate = threading.Event()
    stub.play(streamed(gate))

    async def scenario(kaibo: AsyncKaiboClient) -> list[Any]:
        events = kaibo.recall_stream("When?")
        first = await anext(events)
        gate.set()
        return [first, *[event async for event in events]]

    events = run(stub, scenario)
    assert [name for name, _ in events] == ["candidates", "packed", "final"]
    assert events[-1][1] == PACK


def test_given_a_stream_that_ends_before_final_then_both_clients_say_stream_incomplete(
    stub: Stub, client: KaiboClient
) -> None:
    opened = threading.Event()
    opened.set()
    stub.play(Stream(sse("candidates", {"candidates": []}), b"", opened))
    with pytest.raises(KaiboAPIError) as sync_error:
        list(client.recall_stream("When?"))
    with pytest.raises(KaiboAPIError) as async_error:
        run(stub, lambda kaibo: collect(kaibo.recall_stream("When?")))
    assert (sync_error.value.code, async_error.value.code) == ("stream_incomplete", "stream_incomplete")


def test_given_a_busy_answer_before_the_stream_then_it_is_retried(stub: Stub, client: KaiboClient) -> None:
    opened = threading.Event()
    opened.set()
    stub.play(BUSY, streamed(opened))
    assert [name for name, _ in client.recall_stream("When?")] == ["candidates", "packed", "final"]
    assert len(stub.seen) == 2


# -- the pool --------------------------------------------------------------------------------------------


def test_given_a_context_manager_then_the_pool_is_closed_after_it(stub: Stub) -> None:
    with KaiboClient(stub.url, KEY) as kaibo:
        kaibo.job("job_1")
    assert kaibo._http.is_closed

    async def scenario(kaibo: AsyncKaiboClient) -> AsyncKaiboClient:
        await kaibo.job("job_1")
        return kaibo

    assert run(stub, scenario)._http.is_closed
