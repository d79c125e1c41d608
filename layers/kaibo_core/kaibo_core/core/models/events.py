"""Domain records of the event log (no I/O, no wire format)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kaibo_core.core.chain import FORMAT_VERSION, GENESIS_PREV_HASH, event_header
from kaibo_core.core.errors import TooManyRequestsError
from kaibo_core.core.models.jobs import JobRecord
from kaibo_core.core.models.memories import MemoryRecord


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


def stream_busy(stream: str, attempts: int) -> TooManyRequestsError:
    """The 429 of a remember whose writes kept losing races for the stream's head."""
    return TooManyRequestsError(
        "stream_busy",
        f"Stream {stream!r} is receiving too many concurrent writes; retry with the "
        "same idempotency keys (a batch is written once at most).",
        retry_after_seconds=1,
        details={"stream": stream, "attempts": attempts},
    )


@dataclass(frozen=True)
class NewEvent:
    """One event of a remember call, as the caller sent it (validated by the API layer)."""

    idempotency_key: str
    kind: str
    payload: dict[str, Any]
    occurred_at: str | None = None  # RFC 3339 as sent; None: when it was received
    time_zone: str | None = None
    supersedes: tuple[str, ...] = ()
    cancels: tuple[str, ...] = ()


@dataclass(frozen=True)
class EventPage:
    """A page of one stream's events, oldest first."""

    events: list[EventRecord]
    next_from_seq: int | None


@dataclass(frozen=True)
class HeadPage:
    """A page of the project's stream heads, by stream name."""

    heads: list[tuple[str, StreamHead]]
    next_cursor: str | None


@dataclass(frozen=True)
class RememberedEvent:
    record: EventRecord
    replayed: bool


@dataclass
class RememberOutcome:
    events: list[RememberedEvent]
    attempts: int = 0
    head_conflicts: int = 0
    replays: int = 0
    appended: int = 0
    memories: list[MemoryRecord] = field(default_factory=list)
    index_failures: list[Exception] = field(default_factory=list)
    job_id: str | None = None
    job_created: bool = False
    enqueue_failure: Exception | None = None
    #: After ``wait``: the job as it ended or stands, and its structured memories once it is done.
    job: JobRecord | None = None
    structured: list[MemoryRecord] | None = None
