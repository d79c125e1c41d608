"""Writers for the race tests, run in separate OS processes (spawned, so each has its own boto3).

Each writer uses the real DynamoEventStore against the shared emulator. A
``BarrierStore`` makes every writer of a round read the stream head and then
wait until all have read it, so all of them try to commit onto the same head:
the conflicts are forced, not hoped for.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

from kaibo_core.adapters.dynamodb_events import DynamoEventStore
from kaibo_core.api.mapping import new_events
from kaibo_core.api.models import RememberRequest
from kaibo_core.core.models.events import NewEvent, StreamHead
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.services.remember import RememberService

BARRIER_TIMEOUT_SECONDS = 60


@dataclass(frozen=True)
class Target:
    endpoint_url: str
    events_table: str
    idempotency_table: str
    project: str
    stream: str


class BarrierStore(DynamoEventStore):
    """Waits at the barrier after the first head read of each remember call (when armed)."""

    def __init__(self, target: Target, barrier: threading.Barrier) -> None:
        client = boto3.client(
            "dynamodb",
            endpoint_url=target.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            config=Config(retries={"max_attempts": 1}, max_pool_connections=8),
        )
        super().__init__(client, target.events_table, target.idempotency_table)
        self._barrier = barrier
        self._armed = threading.local()

    def arm(self) -> None:
        self._armed.value = True

    def read_head(self, project: ProjectId, stream: str) -> StreamHead:
        head = super().read_head(project, stream)
        if getattr(self._armed, "value", False):
            self._armed.value = False
            self._barrier.wait(BARRIER_TIMEOUT_SECONDS)
        return head


def _events(stream: str, key: str, text: str) -> list[NewEvent]:
    return new_events(_request(stream, key, text))


def _request(stream: str, key: str, text: str) -> RememberRequest:
    return RememberRequest.model_validate(
        {
            "stream": stream,
            "events": [{"idempotencyKey": key, "kind": "message", "payload": {"role": "user", "text": text}}],
        }
    )


def append_many(target: Target, barrier: threading.Barrier, writer: int, count: int) -> dict[str, Any]:
    """One writer: ``count`` single-event remembers, each round synchronized with the others."""
    store = BarrierStore(target, barrier)
    service = RememberService(store)
    conflicts = attempts = 0
    seqs = []
    for i in range(count):
        store.arm()
        outcome = service.remember(
            ProjectId(target.project),
            target.stream,
            _events(target.stream, f"w{writer}-{i}", f"{writer}/{i}"),
        )
        conflicts += outcome.head_conflicts
        attempts += outcome.attempts
        seqs.append(outcome.events[0].record.seq)
    return {"writer": writer, "conflicts": conflicts, "attempts": attempts, "seqs": seqs}


def send_same_key(target: Target, barrier: threading.Barrier, senders: int) -> list[dict[str, Any]]:
    """``senders`` threads in this process each remember the same key, all after reading one head."""
    store = BarrierStore(target, barrier)
    service = RememberService(store)
    results: list[dict[str, Any]] = []
    lock = threading.Lock()

    def send() -> None:
        store.arm()
        outcome = service.remember(
            ProjectId(target.project), target.stream, _events(target.stream, "the-one-key", "same text")
        )
        event = outcome.events[0]
        with lock:
            results.append(
                {
                    "eventId": event.record.id,
                    "seq": event.record.seq,
                    "replayed": event.replayed,
                    "claimsSeen": outcome.replays,
                }
            )

    threads = [threading.Thread(target=send) for _ in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results
