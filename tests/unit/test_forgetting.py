"""What a forget takes, decided without I/O (kaibo_core.core.forgetting)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kaibo_core.core.forgetting import (
    FORGET_KEY_TTL,
    ForgetMember,
    ForgetRequest,
    ForgetSet,
    KeyedForget,
    comparable_subject,
    forget_request_digest,
    has_subject,
    older_versions,
    preview_token,
    same_event_memories,
    subject_lookup_terms,
)
from kaibo_core.core.models.memories import MemoryRecord, SourceEventRef

ids = st.lists(st.from_regex(r"mem_[0-9A-Z]{4}(-[1-9])?", fullmatch=True), max_size=8)


@given(ids, ids)
def test_given_the_same_set_in_any_order_or_with_repeats_then_the_same_token(
    memories: list[str], events: list[str]
) -> None:
    assert preview_token(memories, events) == preview_token(list(reversed(memories)) * 2, sorted(events))


def test_given_one_more_or_one_fewer_member_then_another_token() -> None:
    base = preview_token(["mem_a", "mem_b"], ["evt_a"])
    assert preview_token(["mem_a"], ["evt_a"]) != base
    assert preview_token(["mem_a", "mem_b", "mem_c"], ["evt_a"]) != base
    assert preview_token(["mem_a", "mem_b"], ["evt_a", "evt_b"]) != base
    assert preview_token(["evt_a"], ["mem_a", "mem_b"]) != base  # memory and event ids are not mixed


def memory(**fields: object) -> MemoryRecord:
    base: dict[str, object] = {
        "project_id": "prj_1",
        "id": "mem_B-1",
        "status": "active",
        "type": "fact",
        "content": "x",
        "valid_from": "2026-06-01T00:00:00.000Z",
        "valid_to": None,
        "confidence": 0.8,
        "stream": "s",
        "source_events": (),
        "created_at": "2026-06-01T00:00:00.000Z",
    }
    return MemoryRecord(**{**base, **fields})  # type: ignore[arg-type]


def test_given_a_structured_memory_then_its_older_versions_are_what_it_supersedes_and_replaces() -> None:
    structured = memory(supersedes=("mem_A-1",), superseded_by=("mem_C-1",), replaces="mem_B")
    assert older_versions(structured) == ["mem_A-1", "mem_B"]  # never the newer mem_C-1
    assert same_event_memories(structured) == []


def test_given_a_provisional_memory_then_its_same_event_memories_are_what_replaced_it() -> None:
    provisional = memory(id="mem_B", status="replaced", replaced_by=("mem_B-1", "mem_B-2"))
    assert same_event_memories(provisional) == ["mem_B-1", "mem_B-2"]
    assert older_versions(provisional) == []


def test_given_a_set_then_it_locates_every_event_its_memories_and_placeholders_cite() -> None:
    cited = memory(
        source_events=(SourceEventRef("evt_B", "chat", 2, "h2"), SourceEventRef("evt_A", "chat", 1, "h1"))
    )
    placeholder = memory(
        id="mem_C",
        status="tombstoned",
        content=None,
        source_events=(SourceEventRef("evt_C", "side", 7, "h7"),),
    )
    found = ForgetSet((ForgetMember(cited, "match"),), ("evt_A", "evt_B", "evt_C"), (placeholder,))
    assert found.event_locations == [("evt_A", "chat", 1), ("evt_B", "chat", 2), ("evt_C", "side", 7)]


SALT = "00" * 16


def test_given_two_queries_with_the_same_stems_then_the_same_request_digest() -> None:
    one = ForgetRequest(reason="r", query="locker codes", idempotency_key="k")
    other = ForgetRequest(reason="r", query="  Code LOCKER ", idempotency_key="other key")
    assert forget_request_digest(SALT, one) == forget_request_digest(SALT, other)


def test_given_another_selector_reason_limit_or_token_then_another_request_digest() -> None:
    base = ForgetRequest(reason="r", query="locker code")
    variants = [
        ForgetRequest(reason="r ", query="locker code"),
        ForgetRequest(reason="r", query="locker"),
        ForgetRequest(reason="r", stream="locker-code"),
        ForgetRequest(reason="r", memory_id="mem_locker"),
        ForgetRequest(reason="r", subject="locker code"),
        ForgetRequest(reason="r", subject="locker codes"),
        ForgetRequest(reason="r", query="locker code", max_memories=5),
        ForgetRequest(reason="r", query="locker code", preview_token="0" * 64),
    ]
    digests = {forget_request_digest(SALT, request) for request in [base, *variants]}
    assert len(digests) == len(variants) + 1


def test_given_subjects_that_differ_in_case_or_spacing_only_then_the_same_request_digest() -> None:
    one = ForgetRequest(reason="r", subject="Alice Chen", idempotency_key="k")
    other = ForgetRequest(reason="r", subject=" ALICE\t chen ", idempotency_key="k")
    neighbour = ForgetRequest(reason="r", subject="Alice", idempotency_key="k")
    assert forget_request_digest(SALT, one) == forget_request_digest(SALT, other)
    assert forget_request_digest(SALT, one) != forget_request_digest(SALT, neighbour)


def test_given_a_subject_then_it_is_compared_case_folded_with_its_whitespace_collapsed() -> None:
    assert comparable_subject("  Release\u00a0 TARGET\n") == "release target"  # NBSP is whitespace too
    assert comparable_subject("STRASSE name") == comparable_subject("straße name")  # folded, not lowered
    assert comparable_subject("Ｒｅｌｅａｓｅ") == "release"  # NFKC: full-width letters
    assert comparable_subject("Alice's phone") != comparable_subject("alice phone")  # nothing else


def test_given_a_memory_then_it_has_the_subject_only_when_its_own_compares_equal() -> None:
    wanted = comparable_subject("Alice")
    assert has_subject(memory(subject="alice"), wanted)
    assert not has_subject(memory(subject="alice chen"), wanted)
    assert not has_subject(memory(subject="alicia"), wanted)
    assert not has_subject(memory(subject=None, content="Alice"), wanted)


def test_given_a_preference_subject_then_its_added_last_word_is_not_required_in_the_index() -> None:
    assert subject_lookup_terms("tea preference") == subject_lookup_terms("tea")  # "I like tea"
    assert subject_lookup_terms("preference") == subject_lookup_terms("preferences")  # nothing else left
    assert subject_lookup_terms("the of ...") == frozenset()  # no searchable word


def test_given_another_salt_then_the_digest_cannot_be_matched_across_records() -> None:
    request = ForgetRequest(reason="r", query="locker code")
    assert forget_request_digest(SALT, request) != forget_request_digest("11" * 16, request)


def test_given_a_kept_forget_then_it_expires_a_day_after_it_was_written() -> None:
    kept = KeyedForget("k", "d", SALT, "rcpt_x", "rcpt_x", (), (), written_at=1_000)
    day = int(FORGET_KEY_TTL.total_seconds())
    assert day == 86_400
    assert not kept.expired(1_000 + day - 1)
    assert kept.expired(1_000 + day)
