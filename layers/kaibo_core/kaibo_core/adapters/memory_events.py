"""An in-memory event log with DynamoDB's append semantics, for unit tests and benchmarks.

Same contract as DynamoEventStore: ``append`` is all-or-nothing and raises
AppendConflictError when the head moved or keys were already claimed.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from kaibo_core.core.models.events import AppendConflictError, EventRecord, IdempotencyClaim, StreamHead
from kaibo_core.core.models.jobs import JobRecord
from kaibo_core.core.storage_keys import ProjectId


class InMemoryEventStore:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: dict[tuple[str, str], list[EventRecord]] = {}
        self.claims: dict[tuple[str, str], IdempotencyClaim] = {}
        self.append_calls = 0
        self.jobs: dict[tuple[str, str], JobRecord] = {}

    def read_head(self, project: ProjectId, stream: str) -> StreamHead:
        with self._lock:
            events = self.events.get((project, stream), [])
            return StreamHead(events[-1].seq, events[-1].hash) if events else StreamHead.genesis()

    def append(
        self,
        project: ProjectId,
        stream: str,
        expected: StreamHead,
        records: Sequence[EventRecord],
        received_at: str,  # noqa: ARG002 - part of the port
        *,
        job: JobRecord | None = None,
    ) -> None:
        with self._lock:
            self.append_calls += 1
            events = self.events.setdefault((project, stream), [])
            claimed = {
                r.idempotency_key: self.claims[(project, r.idempotency_key)]
                for r in records
                if (project, r.idempotency_key) in self.claims
            }
            head_seq = events[-1].seq if events else 0
            if claimed or head_seq != expected.seq:
                raise AppendConflictError(head_moved=head_seq != expected.seq, claimed=claimed)
            for record in records:
                self.claims[(project, record.idempotency_key)] = IdempotencyClaim(
                    record.idempotency_key, stream, record.seq, record.id
                )
            events.extend(records)
            if job is not None:
                self.jobs[(project, job.id)] = job

    def get_events(self, project: ProjectId, locations: Sequence[tuple[str, int]]) -> list[EventRecord]:
        with self._lock:
            found = []
            for stream, seq in locations:
                events = self.events.get((project, stream), [])
                if 0 < seq <= len(events):
                    found.append(events[seq - 1])
            return found

    def event_ids(
        self, project: ProjectId, locations: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], str]:
        return {(event.stream, event.seq): event.id for event in self.get_events(project, locations)}

    def page_events(
        self,
        project: ProjectId,
        stream: str,
        from_seq: int,
        limit: int,
        max_bytes: int,  # noqa: ARG002 - part of the port
    ) -> tuple[list[EventRecord], int | None]:
        with self._lock:
            events = self.events.get((project, stream), [])
            page = events[max(from_seq, 1) - 1 : max(from_seq, 1) - 1 + limit]
            more = bool(page) and page[-1].seq < len(events)
            return page, (page[-1].seq + 1 if more else None)
