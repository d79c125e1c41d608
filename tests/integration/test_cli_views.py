"""What people see: ``recall`` (items, validity, score, citations, the abstain reason) and
``explain`` (a timeline), coloured only on a terminal; ``--json`` prints the API's answer and
nothing else. The CLI runs in a subprocess against tests/integration/test_cli_import.py's stub.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.test_cli_import import RememberStub, kaibo, serve

HASH = "4a60ab023f0940c98bd2f1bc0d94bc1ced86302495a4c2edf0996368b6a213f9"
CITATION = {"eventId": "evt_01JZ000000000000000000000A", "stream": "chat-42", "seq": 17, "hash": HASH}
RECALLED = {
    "items": [
        {
            "memoryId": "mem_01JZ000000000000000000000B",
            "type": "fact",
            "form": "quote",
            "text": "The release target is July 17 [bold]\x1b[31m",
            "validFrom": "2026-06-02T09:30:00.000Z",
            "validTo": None,
            "confidence": 0.9,
            "score": 1.69,
            "tokens": 18,
            "citations": [CITATION],
        }
    ],
    "usedTokens": 18,
    "budget": 100,
    "asOf": "2026-07-01T00:00:00.000Z",
    "abstain": {"abstained": False},
}
ABSTAINED = {
    "items": [],
    "usedTokens": 0,
    "budget": 300,
    "asOf": "2026-07-01T00:00:00.000Z",
    "abstain": {"abstained": True, "reason": "no_match", "message": "No memory matches the question."},
}


def version(
    memory_id: str, status: str, valid: tuple[str, str | None], content: str, seq: int
) -> dict[str, Any]:
    return {
        "memoryId": memory_id,
        "status": status,
        "type": "fact",
        "content": content,
        "validFrom": valid[0],
        "validTo": valid[1],
        "confidence": 0.9,
        "supersedes": [],
        "supersededBy": [],
        "replacedBy": [],
        "sourceEvents": [{**CITATION, "seq": seq}],
    }


EXPLAINED = {
    "memoryId": "mem_NEW",
    "chain": [
        version(
            "mem_OLD", "superseded", ("2026-06-01T09:00:00.000Z", "2026-06-02T09:30:00.000Z"), "July 13", 1
        ),
        {
            **version("mem_NEW", "active", ("2026-06-02T09:30:00.000Z", None), "July 17", 2),
            "supersedes": ["mem_OLD"],
        },
    ],
}


@pytest.fixture
def stub() -> Iterator[RememberStub]:
    with serve(RememberStub(canned={"/v1/recall": RECALLED, "/v1/explain": EXPLAINED})) as running:
        yield running


def test_given_items_when_recalling_then_text_validity_score_and_citations_are_shown(
    stub: RememberStub,
) -> None:
    result = kaibo(stub, "recall", "When is the release?", "--budget", "100")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "1. mem_01JZ000000000000000000000B  fact  quote  score 1.69"
    assert lines[1] == "   The release target is July 17 [bold]?[31m"  # shown as is, never interpreted
    assert lines[2] == "   valid 2026-06-02T09:30:00.000Z → now"
    assert lines[3] == f"   cites chat-42 seq 17  {CITATION['eventId']}  hash {HASH[:12]}…"
    assert lines[4] == "1 item, 18 of 100 tokens, as of 2026-07-01T00:00:00.000Z"


def test_given_nothing_citable_when_recalling_then_the_abstain_reason_is_shown(stub: RememberStub) -> None:
    stub.canned["/v1/recall"] = ABSTAINED
    result = kaibo(stub, "recall", "Who won the chess tournament?")
    assert result.returncode == 0, result.stderr
    assert "abstained (no_match): No memory matches the question." in result.stdout.splitlines()


def test_given_a_chain_when_explaining_then_a_timeline_oldest_first(stub: RememberStub) -> None:
    result = kaibo(stub, "explain", "mem_NEW")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "explain mem_NEW: 2 versions, oldest first",
        "○ 2026-06-01T09:00:00.000Z → 2026-06-02T09:30:00.000Z  superseded  fact  mem_OLD",
        "│ July 13",
        f"│ from chat-42 seq 1  {CITATION['eventId']}  hash {HASH[:12]}…",
        "● 2026-06-02T09:30:00.000Z → now  active  fact  mem_NEW",
        "  July 17",
        f"  from chat-42 seq 2  {CITATION['eventId']}  hash {HASH[:12]}…",
        "  supersedes mem_OLD",
    ]


@pytest.mark.parametrize(
    ("args", "answer"), [(["recall", "q"], RECALLED), (["explain", "mem_NEW"], EXPLAINED)]
)
def test_given_json_then_stdout_is_the_answer_only(stub: RememberStub, args: list[str], answer: Any) -> None:
    result = kaibo(stub, *args, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == answer


@pytest.mark.parametrize("args", [["recall", "q"], ["explain", "mem_NEW"]])
def test_given_a_pipe_or_no_color_then_no_escape_codes_and_forced_colour_then_some(
    stub: RememberStub, args: list[str]
) -> None:
    piped = kaibo(stub, *args)
    forced = kaibo(stub, *args, FORCE_COLOR="1")
    no_color = kaibo(stub, *args, FORCE_COLOR="1", NO_COLOR="1")
    assert "\x1b[" not in piped.stdout
    assert "\x1b[3" in forced.stdout  # a foreground colour: the check can fail
    assert "\x1b[3" not in no_color.stdout
