"""Webhooks on the local stack as users run it (``python -m kaibo_local``, #18): a receiver on
127.0.0.1 gets ``memory.structured`` then ``memory.forgotten`` for the same memory, signed, in
sequence, without text; a receiver answering 500 then 200 gets the event again; after a restart on
the same data folder the webhook's secret still signs (the emulator's KMS key is kept)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from kaibo import KaiboClient, verify_webhook
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
    """Every delivery verifies as a subscriber checks it: the SDK's verify_webhook, the clock now."""
    return bool(receiver.received) and all(
        verify_webhook(secret, headers, body) for headers, body in receiver.received
    )


def outcomes(client: KaiboClient, webhook_id: str) -> list[str]:
    return [attempt["outcome"] for attempt in client.webhook_deliveries(webhook_id, limit=2)]


def test_given_a_local_receiver_then_structured_and_forgotten_arrive_signed_and_survive_a_restart(
    tmp_path: Path,
) -> None:
    receiver = Receiver()
    server = receiver.start()
    data = tmp_path / "data"
    stack, client = start(tmp_path / "first", data)
    try:
        created = client.create_webhook(receiver.url, ["memory.structured", "memory.forgotten"])
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

        forgotten = client.forget(memory_id=memory_id, reason=REASON)
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
        sent = client.test_webhook(created["id"])
        wait_for(lambda: len(receiver.received) >= 2, what="the retried test event")
        assert [json.loads(b)["id"] for _h, b in receiver.received] == [sent["eventId"]] * 2
        # The attempt log is written once the answer came: poll it. Newest first.
        wait_for(
            lambda: outcomes(client, created["id"]) == ["delivered", "retrying"],
            what="the test event's two attempts in the log",
        )
        assert not verify_webhook(
            client.rotate_webhook_secret(created["id"])["secret"], *receiver.received[0]
        )
    finally:
        assert_stops_whole(stack, signal.SIGTERM, group=False)
    logs = stack.out.read_text() + stack.err.read_text()

    stack, client = start(tmp_path / "second", data)
    try:
        receiver.received.clear()
        client.test_webhook(created["id"])
        wait_for(lambda: len(receiver.received) >= 1, what="a test event after the restart")
        assert signed_by(secret, receiver)  # the old secret still signs: rotated minutes ago, valid 24 h
        client.delete_webhook(created["id"])
        assert created["id"] not in [hook["id"] for hook in client.webhooks()]
    finally:
        assert_stops_whole(stack, signal.SIGTERM, group=False)
        server.shutdown()
    logs += stack.out.read_text() + stack.err.read_text()
    assert secret not in logs
