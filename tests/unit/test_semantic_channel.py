"""Recall by meaning through the services: memories placed when written, their cells posted in
the term index beside their words, a question's cells read in the same wave, one fused ranking.

A small fake model stands in for MiniLM (tests/integration/test_semantic_recall.py runs the real
one through the deployed functions): it maps words of one topic to one axis, so "ship" and
"release" mean the same and share no word.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from kaibo_core.adapters.dynamodb_memories import memory_from_item, memory_item
from kaibo_core.api.mapping import recall_query
from kaibo_core.api.models import RecallRequest
from kaibo_core.core.indexing import memory_plan, memory_terms, posting_of
from kaibo_core.core.models.memories import MemoryRecord, SemanticPlacement, SourceEventRef, TermRead
from kaibo_core.core.recall.scoring import RecallFilters
from kaibo_core.core.semantic.cells import Cells
from kaibo_core.core.semantic.placement import (
    MEMORY_CELLS,
    cell_term,
    decode_placement,
    encode_placement,
    is_cell_term,
)
from kaibo_core.core.semantic.scoring import SemanticParams, memories_alike, semantic_candidates
from kaibo_core.core.semantic.vectors import encode_vector, posting_code
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.structuring.rules import RuleStructurer
from kaibo_core.core.text import analyze
from kaibo_core.runtime.embedded import EmbeddedKaibo
from kaibo_core.runtime.wiring import build_semantic_channel
from kaibo_core.services.semantic import SemanticChannel

TOPICS = (
    {"ship", "release", "launch", "shipping", "released", "target"},
    {"wifi", "online", "internet", "password", "network"},
    {"lunch", "eat", "ramen", "ate", "food", "dinner"},
    {"dentist", "teeth", "doctor", "appointment"},
)
DIMENSIONS = 8
PROJECT = ProjectId("prj_semantic")


class TopicEmbedder:
    """Each topic word adds its topic's axis; any other word a little of a spare axis."""

    version = "fake8"

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls += 1
        rows = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().replace("?", " ").replace(".", " ").replace(",", " ").split():
                axis = next((i for i, topic in enumerate(TOPICS) if word in topic), None)
                if axis is not None:
                    rows[row, axis] += 1.0
                else:
                    rows[row, len(TOPICS) + sum(map(ord, word)) % (DIMENSIONS - len(TOPICS))] += 0.1
            rows[row] /= max(float(np.linalg.norm(rows[row])), 1e-9)
        return rows


class BrokenEmbedder(TopicEmbedder):
    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        raise RuntimeError("the model is not there")


def channel(embedder: Any = None, **params: Any) -> SemanticChannel:
    cells = Cells("fake8c8", np.eye(DIMENSIONS, dtype=np.float32))
    return SemanticChannel(embedder or TopicEmbedder(), cells, SemanticParams(**params))


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 6, 2, 9, 30, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def kaibo(semantic: SemanticChannel | None = None) -> tuple[EmbeddedKaibo, Clock]:
    clock = Clock()
    return EmbeddedKaibo(RuleStructurer(), clock=clock, semantic=semantic), clock


def remember(k: EmbeddedKaibo, key: str, text: str, occurred_at: str = "2026-06-02T09:30:00Z") -> Any:
    body = {
        "stream": "chat",
        "events": [
            {
                "idempotencyKey": key,
                "kind": "message",
                "payload": {"role": "user", "text": text},
                "occurredAt": occurred_at,
            }
        ],
    }
    return k.remember(PROJECT, body)


def texts(answer: dict[str, Any]) -> list[str]:
    return [item["text"] for item in answer["items"]]


def record(**fields: Any) -> MemoryRecord:
    defaults: dict[str, Any] = {
        "project_id": PROJECT,
        "id": "mem_1",
        "status": "active",
        "type": "fact",
        "content": "The release target is July 17.",
        "valid_from": "2026-06-02T09:30:00.000Z",
        "valid_to": None,
        "confidence": 0.9,
        "stream": "chat",
        "source_events": (SourceEventRef("evt_1", "chat", 1, "ab" * 32),),
        "created_at": "2026-06-02T09:30:00.000Z",
    }
    return MemoryRecord(**(defaults | fields))


# --- a memory's placement -----------------------------------------------------------------------


def test_given_a_placed_memory_then_its_item_keeps_the_placement_and_its_cells_count_in_no_length() -> None:
    placed = channel().place([record()])[0]
    assert placed.semantic is not None
    assert len(placed.semantic.cells) == MEMORY_CELLS
    assert decode_placement(encode_placement(placed.semantic)) == placed.semantic
    assert memory_from_item(PROJECT, memory_item(placed, 5)).semantic == placed.semantic
    assert memory_from_item(PROJECT, memory_item(record(), 5)).semantic is None

    plan = memory_plan(placed)
    cells = [entry for entry in plan.entries if is_cell_term(entry.term)]
    words = [entry for entry in plan.entries if not is_cell_term(entry.term)]
    assert [entry.term for entry in cells] == [cell_term("fake8c8", c) for c, _ in placed.semantic.cells]
    assert plan.dl == len(memory_terms(placed))  # cells are not words of the text
    # Each cell posting carries the item's vector in the shorter 4-bit code.
    assert [posting_of(placed, entry, plan.dl).vector for entry in cells] == [
        posting_code(placed.semantic.vector)
    ] * 2
    assert all(posting_of(placed, entry, plan.dl).vector is None for entry in words)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text())
def test_given_any_text_then_no_word_term_can_be_mistaken_for_a_cell(text: str) -> None:
    assert not any(is_cell_term(term) for term in analyze(text))


def test_given_a_draft_saying_what_the_event_said_then_structuring_reuses_the_event_s_vector() -> None:
    embedder = TopicEmbedder()
    k, _ = kaibo(channel(embedder))
    remember(k, "m1", "Lunch with Dana at the ramen place was great")
    calls = embedder.calls
    k.structure_pending()
    assert embedder.calls == calls  # the episode's text is the event's text: no second model call


# --- recall ---------------------------------------------------------------------------------------


def test_given_a_question_sharing_no_word_then_only_recall_by_meaning_finds_the_memory() -> None:
    for semantic in (None, channel()):
        k, _ = kaibo(semantic)
        remember(k, "m1", "Move the release target from July 13 to July 17")
        remember(k, "m2", "The office wifi password is hunter2")
        k.structure_pending()
        answer = k.recall(PROJECT, {"question": "When will we ship?", "budget": 100})
        if semantic is None:
            assert answer["abstain"]["reason"] == "no_match"
        else:
            assert not answer["abstain"]["abstained"]
            assert "July 17" in texts(answer)[0]
            assert not any("wifi" in text for text in texts(answer))


def test_given_an_update_then_recall_by_meaning_shows_the_new_value_and_the_old_only_as_history() -> None:
    k, clock = kaibo(channel())
    remember(k, "m1", "The launch target is July 13.", "2026-06-01T09:00:00Z")
    k.structure_pending()
    remember(k, "m2", "The launch target moved to July 20.", "2026-06-02T09:00:00Z")
    k.structure_pending()

    now = k.recall(PROJECT, {"question": "When do we ship?", "budget": 200})
    assert any("July 20" in text for text in texts(now))
    assert not any("July 13" in text and "July 20" not in text for text in texts(now))
    history = k.recall(PROJECT, {"question": "When do we ship?", "budget": 200, "includeSuperseded": True})
    assert any("July 13" in text and "July 20" not in text for text in texts(history))
    clock.now = datetime(2026, 6, 3, tzinfo=UTC)
    before = k.recall(
        PROJECT, {"question": "When do we ship?", "budget": 200, "asOf": "2026-06-01T12:00:00Z"}
    )
    assert any("July 13" in text for text in texts(before))
    assert not any("July 20" in text for text in texts(before))


def test_given_memories_written_before_the_model_was_on_then_words_still_find_them() -> None:
    k, _ = kaibo()
    remember(k, "m1", "The dentist appointment is on Friday at 3pm")
    k.structure_pending()
    on = EmbeddedKaibo(RuleStructurer(), semantic=channel())
    on.events, on.memories = k.events, k.memories
    on.recall_service = type(k.recall_service)(k.memories, k.memories, semantic=channel())
    answer = on.recall(PROJECT, {"question": "When is the dentist appointment?", "budget": 100})
    assert "Friday" in texts(answer)[0]


def test_given_the_model_failing_at_remember_then_the_event_is_kept_and_found_by_its_words() -> None:
    k, _ = kaibo(channel(BrokenEmbedder()))
    outcome = remember(k, "m1", "The office wifi password is hunter2")
    assert [type(failure) for failure in outcome.index_failures] == [RuntimeError]
    assert outcome.events[0].record.seq == 1
    k.recall_service = type(k.recall_service)(k.memories, k.memories)
    assert "hunter2" in texts(k.recall(PROJECT, {"question": "office wifi password", "budget": 100}))[0]


def test_given_a_recall_by_meaning_then_it_reads_its_cells_in_the_same_read_as_its_words() -> None:
    semantic = channel(probes=3)
    k, _ = kaibo(semantic)
    remember(k, "m1", "Move the release target from July 13 to July 17")
    reads: list[tuple[int, int]] = []
    index_read = k.memories.read

    def counting(*args: Any, **kwargs: Any) -> Any:
        reads.append((len(args[1]), len(kwargs.get("cells", ()))))
        return index_read(*args, **kwargs)

    k.memories.read = counting  # type: ignore[method-assign]
    query = recall_query(RecallRequest.model_validate({"question": "When will we ship it?", "budget": 100}))
    answer, stats = k.recall_service.recall(PROJECT, query)
    assert reads == [(stats.terms, 3)]  # one read: the question's terms and its three cells
    assert stats.cells == 3
    assert stats.cell_postings_read >= 1
    assert stats.semantic_candidates == 1
    assert answer.items


def test_given_cell_postings_then_candidates_obey_the_filters_and_the_floor() -> None:
    semantic = channel()
    placed = semantic.place(
        [
            record(id="mem_a", content="release target July 17"),
            record(id="mem_b", content="release target July 18", stream="other"),
            record(id="mem_c", content="ramen for lunch"),
        ]
    )
    reads = []
    for memory in placed:
        plan = memory_plan(memory)
        for entry in plan.entries:
            if is_cell_term(entry.term):
                reads.append(TermRead(entry.term, [posting_of(memory, entry, plan.dl)], 1, False))
    question = semantic.question("when do we ship")[0]
    far_future = 4_102_444_800_000
    everyone = semantic_candidates(reads, question, RecallFilters(as_of_ms=far_future), semantic.params)
    assert [memory_id for memory_id, _ in everyone] == ["mem_a", "mem_b"]  # ramen is below the floor
    one_stream = RecallFilters(as_of_ms=far_future, streams=frozenset({"chat"}))
    assert [m for m, _ in semantic_candidates(reads, question, one_stream, semantic.params)] == ["mem_a"]
    before = RecallFilters(as_of_ms=0)
    assert semantic_candidates(reads, question, before, semantic.params) == []


def test_given_an_unknown_model_name_then_the_setting_is_refused_and_off_means_no_channel() -> None:
    assert build_semantic_channel("off") is None
    with pytest.raises(ValueError, match="KAIBO_SEMANTIC_MODEL"):
        build_semantic_channel("gpt-embeddings")


def test_given_two_placed_memories_then_their_cosine_is_read_from_their_vectors_of_one_model() -> None:
    first = np.array([0.6, 0.8, 0.0, 0.0], dtype=np.float32)
    second = np.array([0.8, 0.6, 0.0, 0.0], dtype=np.float32)
    placements = {
        "a": SemanticPlacement("m1", ((0, 100),), encode_vector(first)),
        "b": SemanticPlacement("m1", ((0, 90),), encode_vector(second)),
        "c": SemanticPlacement("other", ((0, 90),), encode_vector(second)),
        "d": None,
    }
    alike = memories_alike(placements, "m1")
    assert alike("a", "b") == pytest.approx(0.96, abs=0.01)
    assert alike("a", "a") == pytest.approx(1.0, abs=0.01)
    assert alike("a", "c") is None  # another model's vector: never compared
    assert alike("a", "d") is None  # no vector
    assert alike("a", "missing") is None
