"""Recall's context through the whole service (docs/recall.md, "Context"): the turn that answers,
next to the turn whose words the question shares, is found and ranked by its place, and joins the
smallest set when it holds something of the question itself."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from kaibo_core.api.mapping import recall_query
from kaibo_core.api.models import RecallRequest
from kaibo_core.core.clock import format_instant
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.structuring.rules import RuleStructurer
from kaibo_core.runtime.embedded import EmbeddedKaibo
from kaibo_core.services.recall import RecallParams

PROJECT = ProjectId("prj_context")
NOW = datetime(2026, 7, 1, 12, 0, tzinfo=UTC)
START = datetime(2026, 6, 20, 18, 0, tzinfo=UTC)

CONVERSATION = [
    ("Alex", "What did you think of the new ramen place downtown?"),
    ("Sam", "Loved the broth, but the place was packed"),
    ("Alex", "Our flight to Lisbon leaves on Thursday morning"),
    ("Sam", "Remember to pack the charger for the camera"),
    ("Alex", "The plumber comes on Monday to fix the kitchen sink"),
    ("Sam", "Mia starts piano lessons in September"),
]
ANSWER = "Sam: Loved the broth, but the place was packed"
QUESTION = "What did they think of the ramen place?"


def remember_conversation(kaibo: EmbeddedKaibo, stream: str = "dinner-chat") -> None:
    events = [
        {
            "idempotencyKey": f"turn-{index}",
            "kind": "message",
            "payload": {"role": "user", "name": name, "text": text},
            "occurredAt": format_instant(START + timedelta(minutes=index)),
        }
        for index, (name, text) in enumerate(CONVERSATION)
    ]
    kaibo.remember(PROJECT, {"stream": stream, "events": events})


def texts(answer: dict[str, Any]) -> list[str]:
    return [item["text"] for item in answer["items"]]


def test_the_reply_next_to_the_words_found_is_recalled_with_them() -> None:
    kaibo = EmbeddedKaibo(RuleStructurer(), clock=lambda: NOW)
    remember_conversation(kaibo)
    found = texts(kaibo.recall(PROJECT, {"question": QUESTION}))
    assert found[0] == "Alex: What did you think of the new ramen place downtown?"
    assert ANSWER in found


def test_without_context_the_reply_sharing_one_word_is_left_out() -> None:
    kaibo = EmbeddedKaibo(RuleStructurer(), clock=lambda: NOW, recall_params=RecallParams(context=None))
    remember_conversation(kaibo)
    assert ANSWER not in texts(kaibo.recall(PROJECT, {"question": QUESTION}))


def test_a_reply_sharing_no_word_is_ranked_by_its_place_but_not_added_to_the_smallest_set() -> None:
    conversation = [
        ("Alex", "What did you think of the new ramen place downtown?"),
        ("Sam", "Loved it, the broth was incredible"),
        ("Alex", "The plumber comes on Monday to fix the kitchen sink"),
    ]
    reply = "Sam: Loved it, the broth was incredible"
    cases: tuple[tuple[Literal["fill", "smallest"], bool], ...] = (("fill", True), ("smallest", False))
    for strategy, shown in cases:
        kaibo = EmbeddedKaibo(
            RuleStructurer(), clock=lambda: NOW, recall_params=RecallParams(strategy=strategy)
        )
        events = [
            {"idempotencyKey": f"t{i}", "kind": "message", "payload": {"role": "user", "name": n, "text": t}}
            for i, (n, t) in enumerate(conversation)
        ]
        kaibo.remember(PROJECT, {"stream": "chat", "events": events})
        assert (reply in texts(kaibo.recall(PROJECT, {"question": QUESTION}))) is shown, strategy


def test_the_note_next_door_sharing_nothing_with_the_question_is_not_added() -> None:
    """A stream of unrelated notes: the note written after the one a question finds is not part of
    its answer."""
    kaibo = EmbeddedKaibo(RuleStructurer(), clock=lambda: NOW)
    notes = ["The release target is July 17", "The office wifi password is hunter2"]
    events = [
        {"idempotencyKey": f"n{i}", "kind": "message", "payload": {"role": "user", "text": text}}
        for i, text in enumerate(notes)
    ]
    kaibo.remember(PROJECT, {"stream": "notes", "events": events})
    assert texts(kaibo.recall(PROJECT, {"question": "What is the release target?"})) == [notes[0]]


def test_a_neighbour_is_shown_only_if_it_passes_the_filters() -> None:
    kaibo = EmbeddedKaibo(RuleStructurer(), clock=lambda: NOW)
    remember_conversation(kaibo)
    before_the_reply = format_instant(START + timedelta(seconds=30))
    answer = kaibo.recall(PROJECT, {"question": QUESTION, "asOf": before_the_reply})
    assert texts(answer) == ["Alex: What did you think of the new ramen place downtown?"]


def test_a_neighbour_structured_since_is_found_through_its_replacement() -> None:
    kaibo = EmbeddedKaibo(RuleStructurer(), clock=lambda: NOW)
    remember_conversation(kaibo)
    kaibo.structure_pending()
    answer = kaibo.recall(PROJECT, {"question": QUESTION})
    assert any("the place was packed" in text for text in texts(answer))
    statuses = {kaibo.memories.get(PROJECT, item["memoryId"]).status for item in answer["items"]}  # type: ignore[union-attr]
    assert statuses == {"active"}  # the structured memories, never a replaced provisional one


def test_the_decision_to_abstain_is_taken_before_context() -> None:
    """Context adds a found memory's neighbours; it never turns a question that found too little
    into an answer, and a question that abstains reads no neighbour at all."""
    kaibo = EmbeddedKaibo(RuleStructurer(), clock=lambda: NOW)
    remember_conversation(kaibo)
    question = "ramen tokyo osaka kyoto sapporo nagoya"  # finds one turn, covers too little of it
    query = recall_query(RecallRequest.model_validate({"question": question}))
    abstained, stats = kaibo.recall_service.recall(PROJECT, query)
    assert abstained.abstain_reason == "below_threshold"
    assert stats.context_events == 0
    answered, stats = kaibo.recall_service.recall(
        PROJECT, recall_query(RecallRequest.model_validate({"question": QUESTION}))
    )
    assert answered.abstain_reason is None
    assert stats.context_events > 0


def test_another_stream_s_events_are_no_context() -> None:
    kaibo = EmbeddedKaibo(RuleStructurer(), clock=lambda: NOW)
    kaibo.remember(
        PROJECT,
        {
            "stream": "notes",
            "events": [
                {
                    "idempotencyKey": "note-1",
                    "kind": "message",
                    "payload": {
                        "role": "user",
                        "text": "What did you think of the new ramen place downtown?",
                    },
                    "occurredAt": format_instant(START),
                }
            ],
        },
    )
    kaibo.remember(
        PROJECT,
        {
            "stream": "other",
            "events": [
                {
                    "idempotencyKey": "other-1",
                    "kind": "message",
                    "payload": {"role": "user", "text": "Loved it, the broth was incredible"},
                    "occurredAt": format_instant(START + timedelta(minutes=1)),
                }
            ],
        },
    )
    assert texts(kaibo.recall(PROJECT, {"question": QUESTION})) == [CONVERSATION[0][1]]
