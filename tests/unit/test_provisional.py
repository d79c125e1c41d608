"""Provisional memories: kind-specific text, deterministic ids, validity from occurredAt."""

from __future__ import annotations

import json

import pytest

from kaibo_core.core.models.events import EventRecord
from kaibo_core.core.provisional import provisional_memory, provisional_memory_id, provisional_text


def event(kind: str, payload: dict[str, object] | None, **fields: object) -> EventRecord:
    defaults: dict[str, object] = {
        "project_id": "prj_1",
        "stream": "chat-1",
        "seq": 4,
        "id": "evt_01ABC",
        "kind": kind,
        "idempotency_key": "k",
        "occurred_at": "2026-06-02T09:30:00.000Z",
        "received_at": "2026-06-02T09:31:00.000Z",
        "payload_digest": "00" * 32,
        "hash": "ab" * 32,
        "prev_hash": "00" * 32,
        "canonical_payload": None if payload is None else json.dumps(payload),
        "salt": None if payload is None else "11" * 16,
    }
    return EventRecord(**{**defaults, **fields})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "payload", "text"),
    [
        ("message", {"role": "user", "text": "Move the release to July 17"}, "Move the release to July 17"),
        ("message", {"role": "user", "name": "Caroline", "text": "Hi!"}, "Caroline: Hi!"),
        (
            "message",
            {"role": "user", "name": "Mel", "text": "Look", "attachments": [{"caption": "a red barn"}]},
            "Mel: Look\n[attachment: a red barn]",
        ),
        (
            "tool_call",
            {"tool": "search", "input": {"q": "flights"}, "status": "ok", "output": "3 results"},
            'search({"q": "flights"}) -> ok: 3 results',
        ),
        ("tool_call", {"tool": "now", "output": {"t": 1}}, 'now() -> {"t": 1}'),
        ("file", {"path": "docs/plan.md", "content": "# Plan\nShip it."}, "docs/plan.md\n# Plan\nShip it."),
        (
            "commit",
            {"message": "Fix login", "sha": "8e9a2fc48a428e65aa", "author": "ann", "repository": "web"},
            "commit 8e9a2fc48a42 by ann in web: Fix login",
        ),
    ],
)
def test_given_each_kind_then_its_text_is_extracted(kind: str, payload: dict[str, object], text: str) -> None:
    assert provisional_text(kind, payload) == text


def test_given_an_event_then_its_provisional_memory_cites_it_and_starts_when_it_occurred() -> None:
    memory = provisional_memory(
        event("message", {"role": "user", "text": "hello"}), "2026-06-02T09:31:00.000Z"
    )
    assert memory is not None
    assert memory.id == "mem_01ABC" == provisional_memory_id("evt_01ABC")
    assert memory.status == "provisional"
    assert memory.type == "episode"
    assert memory.valid_from == "2026-06-02T09:30:00.000Z"
    assert memory.valid_to is None
    assert memory.confidence == 0.5
    assert memory.source_event_ids == ("evt_01ABC",)
    assert memory.source_events[0].seq == 4
    assert memory.source_events[0].hash == "ab" * 32


def test_given_a_purged_or_empty_event_then_no_provisional_memory() -> None:
    assert provisional_memory(event("message", None), "t") is None
    assert provisional_memory(event("message", {"role": "user", "text": "   "}), "t") is None


def test_given_a_non_event_id_then_no_memory_id() -> None:
    with pytest.raises(ValueError, match="not an event id"):
        provisional_memory_id("mem_01ABC")
