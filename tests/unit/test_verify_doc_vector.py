"""docs/verify.md agrees with the code byte for byte: test vector, header table, examples, codes."""

from __future__ import annotations

import hashlib
import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest

import kaibo.verify
from kaibo.verify import verify_events
from kaibo_core.core import chain

DOC = Path(__file__).resolve().parents[2] / "docs" / "verify.md"


def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def vector_events() -> list[dict[str, Any]]:
    blocks = re.findall(r"^```json test-vector\n(.*?)^```", doc_text(), flags=re.DOTALL | re.MULTILINE)
    assert len(blocks) == 1, "docs/verify.md needs exactly one ```json test-vector block"
    events: list[dict[str, Any]] = json.loads(blocks[0])["events"]
    return events


def served(event: dict[str, Any]) -> dict[str, Any]:
    return {**event["header"], "hash": event["hash"], "prevHash": event["prevHash"], **_payload(event)}


def _payload(event: dict[str, Any]) -> dict[str, Any]:
    return {"payload": event["payload"], "salt": event["salt"]}


def test_given_the_doc_vector_then_it_has_two_linked_events_with_every_documented_field() -> None:
    events = vector_events()
    assert len(events) == 2
    for event in events:
        assert set(event) == {
            "salt",
            "payload",
            "canonicalPayload",
            "payloadDigest",
            "prevHash",
            "header",
            "canonicalHeader",
            "hash",
        }
        assert list(event["header"]) == list(chain.HEADER_FIELDS)
        assert re.fullmatch(r"[0-9a-f]{32}", event["salt"])
    assert events[0]["prevHash"] == chain.GENESIS_PREV_HASH == "00" * 32
    assert events[1]["prevHash"] == events[0]["hash"]
    assert [e["header"]["seq"] for e in events] == [1, 2]
    assert events[0]["header"]["stream"] == events[1]["header"]["stream"]


@pytest.mark.parametrize("index", [0, 1])
def test_given_a_doc_vector_event_when_recomputed_then_every_value_matches_the_code(index: int) -> None:
    event = vector_events()[index]
    canonical_payload = chain.canonicalize(event["payload"])
    assert canonical_payload == event["canonicalPayload"].encode("utf-8")
    assert chain.payload_digest(event["salt"], canonical_payload) == event["payloadDigest"]
    assert event["header"]["payloadDigest"] == event["payloadDigest"]
    canonical_header = chain.canonicalize(event["header"])
    assert canonical_header == event["canonicalHeader"].encode("utf-8")
    assert chain.event_hash(event["prevHash"], event["header"]) == event["hash"]
    rebuilt = chain.event_header(
        project_id=event["header"]["projectId"],
        stream=event["header"]["stream"],
        seq=event["header"]["seq"],
        event_id=event["header"]["id"],
        kind=event["header"]["kind"],
        idempotency_key=event["header"]["idempotencyKey"],
        occurred_at=event["header"]["occurredAt"],
        received_at=event["header"]["receivedAt"],
        payload_digest=event["payloadDigest"],
    )
    assert rebuilt == event["header"]


@pytest.mark.parametrize("index", [0, 1])
def test_given_a_doc_vector_event_when_hashed_as_the_doc_says_then_the_same_hashes(index: int) -> None:
    # The formulas of sections 2 and 4, with hashlib alone: raw salt / prevHash bytes, then UTF-8 JCS text.
    event = vector_events()[index]
    salted = bytes.fromhex(event["salt"]) + event["canonicalPayload"].encode("utf-8")
    assert len(bytes.fromhex(event["salt"])) == 16
    assert hashlib.sha256(salted).hexdigest() == event["payloadDigest"]
    linked = bytes.fromhex(event["prevHash"]) + event["canonicalHeader"].encode("utf-8")
    assert len(bytes.fromhex(event["prevHash"])) == 32
    assert hashlib.sha256(linked).hexdigest() == event["hash"]


def test_given_the_doc_vector_payload_then_it_exercises_the_hard_parts_of_jcs() -> None:
    first = vector_events()[0]
    text = first["canonicalPayload"]
    assert not text.isascii()  # non-ASCII written as itself
    assert "1e+21" in text  # ES6 exponent form
    assert "4.5," in text  # 4.50 → 4.5
    assert "\\u000f" in text  # lowercase control escape
    meta = list(json.loads(text)["meta"])
    assert meta.index("\U0001f600") < meta.index("\ufb33")  # UTF-16 order, not code point order
    assert sorted(meta) != meta


def test_given_the_doc_vector_when_served_then_chain_verifier_accepts_both_events() -> None:
    events = vector_events()
    stream = events[0]["header"]["stream"]
    verifier = chain.ChainVerifier(stream)
    for event in events:
        assert verifier.feed(served(event)) is None
    assert verifier.finish() is None
    assert verifier.head == chain.ChainHead(seq=2, hash=events[1]["hash"])
    assert verifier.payloads_checked == 2
    report = verify_events(stream, [served(e) for e in events], (1, events[0]["hash"]))
    assert report.ok
    assert report.head.hash == events[1]["hash"]


def test_given_the_doc_vector_with_one_payload_character_changed_then_verification_fails_at_it() -> None:
    events = [served(e) for e in vector_events()]
    events[0]["payload"] = {**events[0]["payload"], "text": "Grüsse 👋"}
    problem = verify_events(events[0]["stream"], events).problem
    assert problem is not None
    assert (problem.seq, problem.code) == (1, "payload_digest_mismatch")


def test_given_the_doc_header_table_then_it_lists_the_hashed_fields_in_code_order() -> None:
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \|", doc_text(), flags=re.MULTILINE)
    assert [int(n) for n, _ in rows] == list(range(1, len(chain.HEADER_FIELDS) + 1))
    assert tuple(field for _, field in rows) == chain.HEADER_FIELDS


def test_given_the_doc_number_examples_then_each_is_what_canonicalize_writes() -> None:
    section = doc_text().split("## 1.", 1)[1].split("## 2.", 1)[0]
    examples = re.findall(r"`([-+.0-9eE]+)` → `([-+.0-9e]+)`", section)
    assert len(examples) >= 6
    for written, canonical in examples:
        assert chain.canonicalize(json.loads(written)) == canonical.encode("ascii"), written


def test_given_the_doc_problem_table_then_it_lists_exactly_the_codes_the_verifiers_report() -> None:
    documented = dict(
        re.findall(r"^\| `([a-z_]+)` \| (ChainVerifier|kaibo client) \|", doc_text(), re.MULTILINE)
    )
    chain_codes = set(re.findall(r'"([a-z]+(?:_[a-z]+)+)"', inspect.getsource(chain.ChainVerifier)))
    client_codes = {
        code
        for code in re.findall(r'"([a-z]+(?:_[a-z]+)+)"', inspect.getsource(kaibo.verify))
        if code.endswith(("_event", "_mismatch", "_missing"))
    }
    assert {c for c, who in documented.items() if who == "ChainVerifier"} == chain_codes
    assert {c for c, who in documented.items() if who == "kaibo client"} == client_codes


def test_given_the_doc_python_sketch_when_run_on_the_vector_then_it_returns_the_head() -> None:
    (sketch,) = re.findall(r"^```python\n(.*?)^```", doc_text(), flags=re.DOTALL | re.MULTILINE)
    namespace: dict[str, Any] = {}
    exec(compile(sketch, str(DOC), "exec"), namespace)
    events = [served(e) for e in vector_events()]
    assert namespace["verify"](events) == events[1]["hash"]
    events[1]["receivedAt"] = "2026-06-02T09:31:00.501Z"
    with pytest.raises(AssertionError):
        namespace["verify"](events)
