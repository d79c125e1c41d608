"""The labelled scenario set (tests/data/structuring_scenarios.json) through RuleStructurer.

A quick in-memory guard, not the real evaluation: a fake search returns the current drafts
of earlier-arrived events that share a stemmed term with the query; a link retires the
older of the two memories (the service orders them by occurredAt); recall is simulated
as "most shared terms, then latest". Thresholds: supersession precision >= 0.95, recall
>= 0.85, type accuracy >= 0.8, question accuracy >= 0.85 (docs/structuring-rules.md,
"Scenario set").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kaibo_core.core.clock import instant_ms
from kaibo_core.core.structuring.drafts import (
    MAX_CANDIDATES,
    CandidateMemory,
    EventToStructure,
    MemoryDraft,
)
from kaibo_core.core.structuring.rules import RuleStructurer
from kaibo_core.core.text import analyze, query_terms

SCENARIOS_PATH = Path(__file__).resolve().parents[1] / "data" / "structuring_scenarios.json"
CATEGORIES = {
    "move", "reassign", "cancel", "rename", "correction", "preference", "task_done", "date",
    "relative_date", "reorder", "distractor_subject", "distractor_reported", "distractor_hypothetical",
    "distractor_question", "distractor_negation", "distractor_chitchat", "explicit",
}  # fmt: skip


def load_scenarios() -> list[dict[str, Any]]:
    data = json.loads(SCENARIOS_PATH.read_text(encoding="utf-8"))
    assert data["version"] == 1
    return list(data["scenarios"])


@dataclass
class Memory:
    memory_id: str
    event_key: str
    draft: MemoryDraft
    stream: str
    arrival: int
    current: bool = True


@dataclass
class Outcome:
    links: set[tuple[str, str, str]] = field(default_factory=set)
    duplicate_links: list[str] = field(default_factory=list)
    first_types: dict[str, str] = field(default_factory=dict)
    contents: dict[str, list[str]] = field(default_factory=dict)
    memories: list[Memory] = field(default_factory=list)


def run_scenario(scenario: dict[str, Any]) -> Outcome:
    events = {event["key"]: event for event in scenario["events"]}
    arrival: Sequence[str] = scenario.get("arrival") or [event["key"] for event in scenario["events"]]
    structurer = RuleStructurer()
    outcome = Outcome()
    by_id: dict[str, Memory] = {}
    first_memory: dict[str, str] = {}

    def search(query: str) -> list[CandidateMemory]:
        wanted = set(query_terms(query))
        scored = []
        for memory in outcome.memories:
            shared = len(wanted & set(analyze(memory.draft.content)))
            if memory.current and shared:
                scored.append((-shared, -memory.arrival, memory))
        scored.sort(key=lambda item: (item[0], item[1]))
        return [
            CandidateMemory(
                m.memory_id,
                m.draft.type,
                m.draft.content,
                m.draft.valid_from,
                m.stream,
                m.draft.subject,
                -float(s),
            )
            for s, _, m in scored[:MAX_CANDIDATES]
        ]

    for position, key in enumerate(arrival):
        raw = events[key]
        event = EventToStructure(
            event_id=f"evt_{key}", stream=raw.get("stream", "s"), seq=position + 1, hash="h" * 64,
            kind="message", text=raw["text"], occurred_at=raw["occurredAt"],
            time_zone=raw.get("timeZone", "UTC"),
            supersedes=tuple(first_memory[old] for old in raw.get("supersedes", [])),
            cancels=tuple(first_memory[old] for old in raw.get("cancels", [])),
        )  # fmt: skip
        drafts = structurer.structure(event, search)
        assert drafts, f"{scenario['id']}/{key}: no draft"
        outcome.first_types[key] = drafts[0].type
        outcome.contents[key] = [draft.content for draft in drafts]
        new_memories = [
            Memory(f"mem_{key}_{index}", key, draft, event.stream, position)
            for index, draft in enumerate(drafts)
        ]
        first_memory[key] = new_memories[0].memory_id
        linked_ids = [link.memory_id for draft in drafts for link in draft.links]
        outcome.duplicate_links.extend(sorted({i for i in linked_ids if linked_ids.count(i) > 1}))
        for memory in new_memories:
            for link in memory.draft.links:
                old = by_id[link.memory_id]
                newer, older = (
                    (memory, old)
                    if instant_ms(raw["occurredAt"]) >= instant_ms(events[old.event_key]["occurredAt"])
                    else (old, memory)
                )
                older.current = False
                outcome.links.add((newer.event_key, older.event_key, link.kind))
        for memory in new_memories:
            by_id[memory.memory_id] = memory
            outcome.memories.append(memory)
    return outcome


def recall_top(memories: list[Memory], question: str) -> tuple[Memory | None, list[Memory]]:
    wanted = set(query_terms(question))
    matching = [m for m in memories if m.current and wanted & set(analyze(m.draft.content))]
    # Most shared terms first; then the shorter text (as BM25's length normalization would); then the latest.
    ranked = sorted(
        matching,
        key=lambda m: (
            -len(wanted & set(analyze(m.draft.content))),
            len(analyze(m.draft.content)),
            -instant_ms(m.draft.valid_from),
            -m.arrival,
        ),
    )
    return (ranked[0] if ranked else None), ranked


@dataclass
class Score:
    true_links: int = 0
    predicted_links: int = 0
    expected_links: int = 0
    types_right: int = 0
    types_total: int = 0
    questions_right: int = 0
    questions_total: int = 0
    misses: list[str] = field(default_factory=list)


def evaluate(scenarios: list[dict[str, Any]]) -> Score:
    score = Score()
    for scenario in scenarios:
        expect = scenario["expect"]
        outcome = run_scenario(scenario)
        expected = {tuple(link) for link in expect["links"]}
        score.predicted_links += len(outcome.links)
        score.expected_links += len(expected)
        score.true_links += len(outcome.links & expected)
        if outcome.links != expected:
            score.misses.append(f"{scenario['id']}: links {sorted(outcome.links)} != {sorted(expected)}")
        for key, wanted_type in expect.get("types", {}).items():
            score.types_total += 1
            if outcome.first_types[key] == wanted_type:
                score.types_right += 1
            else:
                score.misses.append(
                    f"{scenario['id']}/{key}: type {outcome.first_types[key]} != {wanted_type}"
                )
        for key, wanted_dates in expect.get("dates", {}).items():
            text = " | ".join(outcome.contents[key])
            for wanted in wanted_dates:
                if wanted not in text:
                    score.misses.append(f"{scenario['id']}/{key}: date {wanted!r} not in {text!r}")
        for item in expect.get("questions", []):
            score.questions_total += 1
            top, returned = recall_top(outcome.memories, item["question"])
            stale = [
                m.draft.content
                for m in returned
                for s in item["stale"]
                if s.lower() in m.draft.content.lower()
            ]
            if top is not None and item["answer"].lower() in top.draft.content.lower() and not stale:
                score.questions_right += 1
            else:
                shown = top.draft.content if top else None
                score.misses.append(f"{scenario['id']}: {item['question']!r} top={shown!r} stale={stale}")
    return score


def test_scenario_file_follows_the_schema() -> None:
    scenarios = load_scenarios()
    assert len(scenarios) >= 60
    assert len({s["id"] for s in scenarios}) == len(scenarios)
    assert sum(s["category"].startswith("distractor_") for s in scenarios) >= 20
    for scenario in scenarios:
        assert scenario["category"] in CATEGORIES, scenario["id"]
        keys = [event["key"] for event in scenario["events"]]
        assert sorted(scenario.get("arrival", keys)) == sorted(keys), scenario["id"]
        for new, old, kind in scenario["expect"]["links"]:
            assert {new, old} <= set(keys), scenario["id"]
            assert kind in {"supersedes", "cancels"}, scenario["id"]
        if scenario["category"].startswith("distractor_"):
            assert scenario["expect"]["links"] == [], scenario["id"]
    assert {s["category"] for s in scenarios} == CATEGORIES


def test_scenario_set_meets_the_quality_bar() -> None:
    score = evaluate(load_scenarios())
    precision = score.true_links / score.predicted_links if score.predicted_links else 1.0
    recall = score.true_links / score.expected_links
    type_accuracy = score.types_right / score.types_total
    question_accuracy = score.questions_right / score.questions_total
    report = (
        f"precision={precision:.3f} recall={recall:.3f} types={type_accuracy:.3f} "
        f"questions={question_accuracy:.3f}\n" + "\n".join(score.misses)
    )
    print(report)
    assert precision >= 0.95, report
    assert recall >= 0.85, report
    assert type_accuracy >= 0.8, report
    assert question_accuracy >= 0.85, report


@pytest.mark.parametrize("scenario", load_scenarios(), ids=lambda s: s["id"])
def test_each_event_links_a_memory_at_most_once(scenario: dict[str, Any]) -> None:
    outcome = run_scenario(scenario)
    assert outcome.duplicate_links == []
