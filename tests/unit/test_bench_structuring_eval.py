"""How bench/structuring_eval.py counts links (#15): what its figures mean."""

from __future__ import annotations

from typing import Any

import pytest

from bench.structuring_eval import CpuSamples, run_scenario


def scenario(category: str, kind: str) -> dict[str, Any]:
    return {
        "id": "t",
        "category": category,
        "events": [
            {"key": "e1", "occurredAt": "2026-03-02T10:00:00Z", "text": "Team sync is Thursday at 10am."},
            {"key": "e2", "occurredAt": "2026-03-04T09:00:00Z", "text": "Thursday's team sync is cancelled."},
        ],
        "expect": {"links": [["e2", "e1", kind]], "questions": []},
    }


@pytest.mark.parametrize("kind", ["supersedes", "cancels"])
def test_a_cancelled_meeting_is_linked_right_whichever_kind_its_writer_labelled(kind: str) -> None:
    result = run_scenario(scenario("meeting_cancelled", kind), CpuSamples())
    assert result.actual_links == {("e2", "e1", kind)}
    assert result.true_links == 1


def test_elsewhere_the_kind_must_match() -> None:
    result = run_scenario(scenario("fact_corrected", "supersedes"), CpuSamples())
    assert result.actual_links == {("e2", "e1", "cancels")}
    assert result.true_links == 0
