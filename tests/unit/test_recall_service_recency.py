"""The recency rule through the whole service and the wire (docs/recall.md, "Newer first"; api.md
``olderThan``): an update nothing linked is answered first, the version it replaces is still cited
but marked older, and an audit (``includeSuperseded``) or recall without the rule marks nothing."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kaibo_core.api.models import RecallResponse
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.structuring.rules import RuleStructurer
from kaibo_core.runtime.embedded import EmbeddedKaibo
from kaibo_core.services.recall import RecallParams

PROJECT = ProjectId("prj_recency")
NOW = datetime(2026, 7, 1, 12, 0, tzinfo=UTC)
OLD = "Code freeze for 4.2 is Friday February 6. Anything not merged by then rides the 4.3 train."
NEW = "4.2 code freeze slipped a week to February 13 because of the auth regression."
QUESTION = "When is the 4.2 code freeze?"
NOTES = [
    ("2026-01-28T09:00:00Z", OLD),
    ("2026-02-01T10:00:00Z", "The team standup is at 9:30 every weekday."),
    ("2026-02-02T10:00:00Z", "Leo starts swimming lessons in September."),
    ("2026-02-03T17:25:00Z", NEW),
]


def remembered(params: RecallParams | None = None) -> EmbeddedKaibo:
    kaibo = EmbeddedKaibo(RuleStructurer(), clock=lambda: NOW, recall_params=params)
    for index, (occurred_at, text) in enumerate(NOTES):
        event = {
            "idempotencyKey": f"note-{index}",
            "kind": "message",
            "occurredAt": occurred_at,
            "payload": {"role": "user", "text": text},
        }
        kaibo.remember(PROJECT, {"stream": "release", "events": [event]})
    return kaibo


def by_text(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["text"]: item for item in answer["items"]}


def test_the_update_is_first_and_the_version_it_replaces_is_cited_as_older() -> None:
    answer = remembered().recall(PROJECT, {"question": QUESTION})
    assert answer["items"][0]["text"] == NEW
    items = by_text(answer)
    assert items[OLD]["olderThan"] == items[NEW]["memoryId"]
    assert "olderThan" not in items[NEW]
    # The wire model carries the field where it is set and leaves it out elsewhere.
    wire = RecallResponse.model_validate(answer).model_dump()
    assert [item.get("olderThan") for item in wire["items"]] == [
        item.get("olderThan") for item in answer["items"]
    ]
    assert all("olderThan" in item or item["text"] != OLD for item in wire["items"])


def test_an_audit_with_every_version_marks_nothing() -> None:
    answer = remembered().recall(PROJECT, {"question": QUESTION, "includeSuperseded": True})
    assert {NEW, OLD} <= set(by_text(answer))
    assert all("olderThan" not in item for item in answer["items"])


def test_without_the_rule_both_are_cited_unmarked() -> None:
    answer = remembered(RecallParams(recency=None)).recall(PROJECT, {"question": QUESTION})
    assert {NEW, OLD} <= set(by_text(answer))
    assert all("olderThan" not in item for item in answer["items"])
