"""Domain records of the event log (no I/O, no wire format)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kaibo_core.chain import FORMAT_VERSION, GENESIS_PREV_HASH, event_header


@dataclass(frozen=True)
class StreamHead:
    seq: int
    hash: str

    @classmethod
    def genesis(cls) -> StreamHead:
        return cls(seq=0, hash=GENESIS_PREV_HASH)


@dataclass(frozen=True)
class EventRecord:
    """One appended event: its hashed header fields, hash, and (until purged) payload and salt."""

    project_id: str
    stream: str
    seq: int
    id: str
    kind: str
    idempotency_key: str
    occurred_at: str
    received_at: str
    payload_digest: str
    hash: str
    prev_hash: str
    canonical_payload: str | None  # RFC 8785 text; None once purged
    salt: str | None  # hex; None once purged
    v: int = FORMAT_VERSION
    # Not hashed (mutable, prove nothing): what structuring needs besides the payload.
    job_id: str | None = None
    time_zone: str | None = None
    supersedes: tuple[str, ...] = ()
    cancels: tuple[str, ...] = ()

    def header(self) -> dict[str, Any]:
        return event_header(
            project_id=self.project_id,
            stream=self.stream,
            seq=self.seq,
            event_id=self.id,
            kind=self.kind,
            idempotency_key=self.idempotency_key,
            occurred_at=self.occurred_at,
            received_at=self.received_at,
            payload_digest=self.payload_digest,
        )

    def payload(self) -> dict[str, Any] | None:
        return None if self.canonical_payload is None else dict(json.loads(self.canonical_payload))

    def as_served(self) -> dict[str, Any]:
        """The wire form of GET /v1/streams/{stream}/events (camelCase, payload parsed)."""
        served: dict[str, Any] = {**self.header(), "hash": self.hash, "prevHash": self.prev_hash}
        if self.canonical_payload is not None and self.salt is not None:
            served["payload"] = self.payload()
            served["salt"] = self.salt
        return served


@dataclass(frozen=True)
class IdempotencyClaim:
    """Where an already-claimed idempotency key points."""

    idempotency_key: str
    stream: str
    seq: int
    event_id: str


class AppendConflictError(Exception):
    """An append lost a race: the head moved, and/or some keys were already claimed."""

    def __init__(self, head_moved: bool, claimed: dict[str, IdempotencyClaim]) -> None:
        super().__init__(f"append conflict (head moved: {head_moved}, keys claimed: {len(claimed)})")
        self.head_moved = head_moved
        self.claimed = claimed
