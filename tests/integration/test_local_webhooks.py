"""Webhooks on the local stack as users run it (``python -m kaibo_local``, #18): a receiver on
127.0.0.1 gets ``memory.structured`` then ``memory.forgotten`` for the same memory, signed, in
sequence, without text; a receiver answering 500 then 200 gets the event again; after a restart on
the same data folder the webhook's secret still signs (the emulator's KMS key is kept)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from kaibo.client import KaiboClient
from kaibo_core.core import webhook_signing
from tests.integration.test_local_lifecycle import StackProcess, assert_stops_whole, launch, wait_for
from tests.integration.test_webhooks_api import Receiver

RUN = ["-m", "kaibo_local"]
MARKER = "Quillfeather"
REASON = "asked to be erased 4412"


def start(tmp: Path, data: Path) -> tuple[StackProcess, KaiboClient]:
    stack = launch(
        tmp,
        args=RUN,
        KAIBO_DATA_DIR=str(data),
        KAIBO_WEBHOOKS_ALLOW_LOCAL="1",
        KAIBO_WEBHOOK_RETRY_SCALE="0.0001",
    )
    stack.wait_announced()
    return stack, KaiboClient(stack.values["KAIBO_ENDPOINT"], stack.values["KAIBO_API_KEY"], timeout=60)


def signed_by(secret: str, receiver: Receiver) -> bool:
    now = int(time.time())
    return all(webhook_signing.verify(secret, headers, body, now=now) for headers, body in receiver.received)


def test_given_a_local_receiver_then_structured_and_forgotten_arrive_signed_and_survive_a_restart(
    tmp_path: Path,
) -> None:
    receiver = Receiver()
    server = receiver.start()
    data = tmp_path / "data"
    stack, client = start(tmp_path / "first", data)
    try:
        created = client.request(
            "POST",
            "/v1/webhooks",
            body={"url": receiver.url, "events": ["memory.structured", "memory.forgotten"]},
        )
        secret = created["secret"]
        text = f"The {MARKER} offsite moved to June 9."
        remembered = client.remember(
            "chat",
            [{"idempotencyKey": "w1", "kind": "message", "payload": {"role": "user", "text": text}}],
            wait=True,
        )
        wait_for(
            lambda: any(b["type"] == "memory.structured" for b in receiver.bodies()), what="memory.structured"
        )
        structured = next(b for b in receiver.bodies() if b["type"] == "memory.structured")
        assert structured["data"]["jobId"] == remembered["jobId"]
        memory_id = structured["data"]["memoryIds"][0]

        forgotten = client.request("POST", "/v1/forget", body={"memoryId": memory_id, "reason": REASON})
        wait_for(
            lambda: any(b["type"] == "memory.forgotten" for b in receiver.bodies()), what="memory.forgotten"
        )
        gone = next(b for b in receiver.bodies() if b["type"] == "memory.forgotten")
        assert memory_id in gone["data"]["memoryIds"]
        assert gone["data"]["receiptId"] == forgotten["receipt"]["id"]
        assert gone["seq"] > structured["seq"]
        assert signed_by(secret, receiver)
        for _headers, body in receiver.received:
            assert MARKER.casefold() not in body.decode().casefold()
            assert REASON not in body.decode()

        receiver.statuses = [500]  # the next delivery fails once, then succeeds
        receiver.received.clear()
        sent = client.request("POST", f"/v1/webhooks/{created['id']}/test")
        wait_for(lambda: len(receiver.received) >= 2, what="the retried test event")
        assert [json.loads(b)["id"] for _h, b in receiver.received] == [sent["eventId"]] * 2
    finally:
        assert_stops_whole(stack, signal.SIGTERM, group=False)
    logs = stack.out.read_text() + stack.err.read_text()

    stack, client = start(tmp_path / "second", data)
    try:
        receiver.received.clear()
        client.request("POST", f"/v1/webhooks/{created['id']}/test")
        wait_for(lambda: len(receiver.received) >= 1, what="a test event after the restart")
        assert signed_by(secret, receiver)
    finally:
        assert_stops_whole(stack, signal.SIGTERM, group=False)
        server.shutdown()
    logs += stack.out.read_text() + stack.err.read_text()
    assert secret not in logs
