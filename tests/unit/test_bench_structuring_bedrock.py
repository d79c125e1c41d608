"""The Bedrock evaluation harness (#15 item 4): the scenario sets run through the Bedrock
structurer with the same figures as the rules' run, and its spend is summed. A fake
bedrock-runtime client stands in for the model (no network)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from bench import structuring_bedrock
from bench.structuring_eval import Output
from kaibo_core.core.structuring.model_output import TOOL_NAME

SCENARIOS: dict[str, Any] = {
    "version": 1,
    "scenarios": [
        {
            "id": "launch-moved",
            "category": "deadline_moved",
            "events": [
                {"key": "e1", "occurredAt": "2026-06-01T09:00:00Z", "text": "The launch is on July 1."},
                {
                    "key": "e2",
                    "occurredAt": "2026-06-02T09:00:00Z",
                    "text": "Marketing confirmed the launch goes out a week later, July 8.",
                },
            ],
            "expect": {
                "links": [["e2", "e1", "supersedes"]],
                "questions": [{"question": "When is the launch?", "answer": "July 8", "stale": ["July 1"]}],
            },
        },
        {
            "id": "two-offices",
            "category": "distractor_additive",
            "events": [
                {"key": "e1", "occurredAt": "2026-06-01T09:00:00Z", "text": "We opened a Lisbon office."}
            ],
            "expect": {"links": [], "questions": []},
        },
    ],
}


class FakeBedrock:
    """Answers like a model: the event's text as one fact, superseding a candidate that holds
    "July 1" when the event says "July 8"."""

    def __init__(self) -> None:
        self.calls = 0

    def converse(self, **request: Any) -> dict[str, Any]:
        self.calls += 1
        message = request["messages"][0]["content"][0]["text"]
        candidates = [json.loads(line) for line in message.splitlines() if line.startswith('{"memoryId"')]
        text = message.split(">>>\n", 2)[1].split("\n<<<", 1)[0]  # the event text, between its markers
        links = [
            {"kind": "supersedes", "memoryId": c["memoryId"]}
            for c in candidates
            if "July 8" in message and re.search(r"July 1\b", c.get("content", ""))
        ]
        draft = {"type": "fact", "content": text, "confidence": 0.9, "links": links}
        return {
            "output": {
                "message": {
                    "role": "assistant",
                    "content": [
                        {"toolUse": {"toolUseId": "tu", "name": TOOL_NAME, "input": {"drafts": [draft]}}}
                    ],
                }
            },
            "stopReason": "tool_use",
            "usage": {"inputTokens": 100, "outputTokens": 20, "totalTokens": 120},
            "metrics": {"latencyMs": 1},
        }


def test_the_model_s_links_are_measured_with_the_rules_figures_and_its_spend_summed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "scenarios.json"
    path.write_text(json.dumps(SCENARIOS), encoding="utf-8")
    monkeypatch.setitem(structuring_bedrock.SETS, "trial", path)
    client = FakeBedrock()

    results, spend = structuring_bedrock.run(
        Output(),
        ["trial"],
        client,  # type: ignore[arg-type]
        "fake-model",
        data_path=tmp_path / "no-locomo.json",
    )

    figures = results["trial"]["figures"]
    assert figures["linkRecall"] == 1.0
    assert figures["linkPrecision"] == 1.0
    assert figures["falseSupersessions"] == 0.0
    assert figures["currentAnswer"] == 1.0
    assert (spend.events, spend.calls, spend.fallbacks) == (3, 3, 0)
    assert (spend.input_tokens, spend.output_tokens) == (300, 60)
    assert client.calls == 3  # without LoCoMo, each scenario runs once (in an empty project)


def test_without_a_model_id_nothing_is_sent(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KAIBO_BEDROCK_MODEL_ID", raising=False)
    assert structuring_bedrock.main(["--sets", "heldout"]) == structuring_bedrock.CANNOT_START
    assert "KAIBO_BEDROCK_MODEL_ID" in capsys.readouterr().err


def test_an_unknown_set_is_refused_before_anything_runs() -> None:
    with pytest.raises(SystemExit):
        structuring_bedrock.main(["--sets", "nope", "--model-id", "m"])


def test_every_set_the_harness_offers_is_in_the_repository() -> None:
    missing = [name for name, path in structuring_bedrock.SETS.items() if not path.is_file()]
    assert missing == []
