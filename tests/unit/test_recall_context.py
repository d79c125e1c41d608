"""Context (core/recall/context.py): which neighbours recall reads, and what they add to a score."""

from __future__ import annotations

import pytest

from kaibo_core.core.recall.context import ContextParams, context_scores, neighbour_locations
from kaibo_core.runtime import wiring
from kaibo_core.runtime.settings import get_settings


def test_neighbours_lie_within_the_span_on_both_sides_nearest_first() -> None:
    assert neighbour_locations([[("chat", 10)]], known=[], span=2) == [
        ("chat", 9),
        ("chat", 11),
        ("chat", 8),
        ("chat", 12),
    ]


def test_neighbours_already_held_by_a_candidate_are_not_read_again() -> None:
    wanted = neighbour_locations([[("chat", 10)]], known=[("chat", 10), ("chat", 11)], span=1)
    assert wanted == [("chat", 9)]


def test_there_is_nothing_before_the_first_event_of_a_stream() -> None:
    assert neighbour_locations([[("chat", 1)]], known=[("chat", 1)], span=2) == [("chat", 2), ("chat", 3)]


def test_the_best_anchor_s_neighbours_come_first_and_each_location_once() -> None:
    anchors = [[("a", 5)], [("b", 2)], [("a", 6)]]
    wanted = neighbour_locations(anchors, known=[("a", 5), ("b", 2), ("a", 6)], span=1)
    assert wanted == [("a", 4), ("b", 1), ("b", 3), ("a", 7)]


def test_a_memory_closes_a_share_of_the_gap_to_its_best_neighbour_s_score() -> None:
    scores = {"question": 10.0, "answer": 0.0, "far": 5.0}
    locations = {"question": [("chat", 4)], "answer": [("chat", 5)], "far": [("chat", 9)]}
    boosted = context_scores(scores, locations, span=2, weight=0.4)
    assert boosted["answer"] == pytest.approx(4.0)
    assert boosted["question"] == pytest.approx(10.0)  # "answer" scored 0, "far" is 5 events away
    assert boosted["far"] == pytest.approx(5.0)


def test_only_the_best_neighbour_counts() -> None:
    scores = {"middle": 1.0, "before": 3.0, "after": 2.0}
    locations = {"middle": [("chat", 5)], "before": [("chat", 4)], "after": [("chat", 6)]}
    assert context_scores(scores, locations, span=1, weight=0.5)["middle"] == pytest.approx(2.0)


def test_a_memory_is_lifted_toward_its_best_neighbour_never_past_it() -> None:
    """In a stream of unrelated facts, the fact a question names stays first: its neighbour, a
    near miss, is not carried over it by the fact's own score."""
    scores = {"fact": 10.0, "near_miss": 8.0}
    locations = {"fact": [("facts", 1)], "near_miss": [("facts", 2)]}
    lifted = context_scores(scores, locations, span=1, weight=0.6)
    assert lifted["fact"] == 10.0
    assert lifted["near_miss"] == pytest.approx(9.2)  # 8 + 0.6 x (10 - 8)


def test_another_stream_is_no_context() -> None:
    scores = {"a": 10.0, "b": 0.0}
    locations = {"a": [("chat", 5)], "b": [("notes", 5)]}
    assert context_scores(scores, locations, span=2, weight=0.4)["b"] == 0.0


def test_two_memories_of_one_event_are_each_other_s_context() -> None:
    scores = {"first": 6.0, "second": 1.0}
    locations = {"first": [("chat", 5)], "second": [("chat", 5)]}
    assert context_scores(scores, locations, span=1, weight=0.5)["second"] == pytest.approx(3.5)


def test_context_does_not_spread_along_a_stream() -> None:
    """The bonus comes from the scores before any bonus: a chain of neighbours does not carry a
    strong memory's score to the far end of a conversation."""
    scores = {"strong": 10.0, "next": 0.0, "after_next": 0.0}
    locations = {"strong": [("chat", 1)], "next": [("chat", 2)], "after_next": [("chat", 3)]}
    boosted = context_scores(scores, locations, span=1, weight=0.5)
    assert boosted["next"] == pytest.approx(5.0)
    assert boosted["after_next"] == 0.0


def test_a_share_of_the_gap_keeps_the_order_of_related_scores_on_any_offset() -> None:
    """Cosines of unrelated texts sit at 0.1-0.3: moving by a share of the gap, a neighbour lands
    where it would with the offset removed, not right behind its anchor."""
    locations = {"anchor": [("s", 1)], "neighbour": [("s", 2)], "other": [("s", 9)]}
    plain = context_scores({"anchor": 0.4, "neighbour": 0.0, "other": 0.25}, locations, span=1, weight=0.6)
    offset = context_scores({"anchor": 0.6, "neighbour": 0.2, "other": 0.45}, locations, span=1, weight=0.6)
    assert offset["neighbour"] - 0.2 == pytest.approx(plain["neighbour"])
    assert offset["other"] > offset["neighbour"]


@pytest.mark.parametrize("bad", [{"anchors": -1}, {"span": -1}, {"weight": -0.1}, {"weight": 1.0}])
def test_parameters_out_of_range_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=">= 0"):
        ContextParams(**bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(("value", "on"), [(None, True), ("on", True), ("off", False), ("0", False)])
def test_context_is_on_unless_the_deployment_turns_it_off(
    value: str | None, on: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``KAIBO_RECALL_CONTEXT`` (the template's ``RecallContext``): off, recall gets no event
    locator and so reads no neighbours."""
    environment = {
        "KAIBO_EVENTS_TABLE": "events",
        "KAIBO_IDEMPOTENCY_TABLE": "keys",
        "KAIBO_PROJECTS_TABLE": "p",
    }
    environment |= {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}
    for name, setting in environment.items():
        monkeypatch.setenv(name, setting)
    if value is None:
        monkeypatch.delenv("KAIBO_RECALL_CONTEXT", raising=False)
    else:
        monkeypatch.setenv("KAIBO_RECALL_CONTEXT", value)
    get_settings.cache_clear()
    wiring.recall_service.cache_clear()
    try:
        assert get_settings().recall_context is on
        assert (wiring.recall_service()._events is not None) is on
    finally:
        get_settings.cache_clear()
        wiring.recall_service.cache_clear()
