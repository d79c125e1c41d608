"""Found through an earlier version (#15 item 2: "the new name is found by the old one's question"):
a question in the words of a superseded or canceled memory finds the memory that retired it, its
current version, cited with ``foundVia``; docs/recall.md, "Found through an earlier version"."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kaibo_core.api.mapping import recall_query
from kaibo_core.api.models import RecallRequest
from kaibo_core.core.indexing import memory_plan, posting_of
from kaibo_core.core.models.memories import MemoryRecord
from kaibo_core.core.structuring.rules import RuleStructurer
from kaibo_core.runtime.embedded import EmbeddedKaibo
from kaibo_core.services.recall import RecallParams, RecallService

from .test_recall_service import NOW, PROJECT, Memories, at, ids


@pytest.fixture
def memories() -> Memories:
    return Memories()


def versions(memories: Memories, *texts: str, cancel: bool = False) -> list[MemoryRecord]:
    """``texts`` as versions of one memory, each retiring the one before (ten days apart); the
    last active. Added newest first, so that each knows the id of the one that retired it."""
    added: list[MemoryRecord] = []
    count = len(texts)
    for index in reversed(range(count)):
        start, end = at(-10 * (count - index)), at(-10 * (count - index - 1))
        fields: dict[str, Any] = {"status": "active", "valid_from": start, "type": "fact"}
        if index < count - 1:
            status = "canceled" if cancel else "superseded"
            fields |= {"status": status, "valid_to": end, "superseded_by": (added[0].id,)}
        added.insert(0, memories.add(texts[index], **fields))
    return added


def test_a_question_in_the_earlier_versions_words_finds_the_current_one(memories: Memories) -> None:
    old, new = versions(
        memories, "Rent for the Maple St apartment is $1,850, due on the 1st.", "Rent's $1,975 starting July."
    )
    answer = memories.recall("How much is the rent on the Maple St apartment?")
    assert ids(answer) == [new.id]
    assert answer["items"][0]["foundVia"] == old.id
    # Found by its own words, it says nothing of another version.
    assert "foundVia" not in memories.recall("What is the rent starting July?")["items"][0]


def test_a_renamed_service_is_found_by_its_old_name(memories: Memories) -> None:
    old, new = versions(
        memories,
        "Support looks up feature flags in Lighthouse.",
        "The flag lookup tool is called FlagDesk now.",
    )
    answer = memories.recall("Where does support look up feature flags?")
    assert ids(answer)[0] == new.id
    assert answer["items"][0]["foundVia"] == old.id
    assert old.id not in ids(answer)


def test_a_chain_of_versions_is_followed_to_the_current_one(memories: Memories) -> None:
    first, _, third = versions(
        memories,
        "The Halloran knee operation is on March 3 at the Northgate theatre.",
        "Moved to March 10.",
        "Deferred once more: March 17.",
    )
    service = RecallService(memories.store, memories.store, clock=lambda: NOW)
    query = recall_query(RecallRequest.model_validate({"question": "When is the Halloran knee operation?"}))
    answer, stats = service.recall(PROJECT, query)
    assert [hit.memory.id for hit in answer.items] == [third.id]
    assert answer.items[0].found_via == first.id
    assert stats.successors_followed == 1  # the second version read to reach the third


def test_a_cancellation_answers_for_what_it_canceled(memories: Memories) -> None:
    dinner, scrapped = versions(
        memories,
        "Team dinner Friday 7pm at Osteria Nino, table for 12.",
        "Scrap Friday's plans.",
        cancel=True,
    )
    answer = memories.recall("When is the team dinner at Osteria Nino?")
    assert ids(answer) == [scrapped.id]
    assert answer["items"][0]["foundVia"] == dinner.id


def test_at_a_past_asof_the_version_valid_then_answers_itself(memories: Memories) -> None:
    old, _ = versions(memories, "Rent for the Maple St apartment is $1,850.", "Rent's $1,975 starting July.")
    answer = memories.recall("rent Maple St apartment", asOf=at(-15))
    assert ids(answer) == [old.id]
    assert "foundVia" not in answer["items"][0]


def test_an_audit_of_every_version_finds_each_by_its_own_words(memories: Memories) -> None:
    old, _ = versions(memories, "Rent for the Maple St apartment is $1,850.", "Rent's $1,975 starting July.")
    answer = memories.recall("rent Maple St apartment", includeSuperseded=True)
    assert old.id in ids(answer)
    assert all("foundVia" not in item for item in answer["items"])


def test_a_successor_passes_the_filters_on_its_own_item(memories: Memories) -> None:
    _, new = versions(memories, "Rent for the Maple St apartment is $1,850.", "Rent's $1,975 starting July.")
    assert ids(memories.recall("rent Maple St apartment", types=["fact"])) == [new.id]
    assert ids(memories.recall("rent Maple St apartment", types=["task"])) == []
    assert ids(memories.recall("rent Maple St apartment", streams=["chat-2"])) == []


def test_a_forgotten_successor_is_not_shown(memories: Memories) -> None:
    _, new = versions(memories, "Rent for the Maple St apartment is $1,850.", "Rent's $1,975 starting July.")
    memories.store.replace(replace(new, status="tombstoned", content=None))
    answer = memories.recall("rent Maple St apartment")
    assert answer["items"] == []


def test_a_history_posting_names_the_memory_that_retired_it(memories: Memories) -> None:
    old, new = versions(
        memories, "Rent for the Maple St apartment is $1,850.", "Rent's $1,975 starting July."
    )
    entry = memory_plan(old).entries[0]
    assert posting_of(old, entry, 5).successor == new.id
    assert posting_of(new, memory_plan(new).entries[0], 5).successor is None


def test_a_version_still_valid_at_asof_is_no_way_to_its_successor(memories: Memories) -> None:
    versions(memories, "Rent for the Maple St apartment is $1,850.", "Rent's $1,975 starting July.")
    service = RecallService(memories.store, memories.store, clock=lambda: NOW)
    query = recall_query(RecallRequest.model_validate({"question": "Maple St apartment", "asOf": at(-15)}))
    _, stats = service.recall(PROJECT, query)
    assert stats.successors == 0


def test_the_earlier_version_must_pass_the_stream_filter_too(memories: Memories) -> None:
    new = memories.add("Rent's $1,975 starting July.", status="active", valid_from=at(-10), type="fact")
    memories.add(
        "Rent for the Maple St apartment is $1,850.",
        status="superseded",
        valid_from=at(-20),
        valid_to=at(-10),
        superseded_by=(new.id,),
        stream="chat-2",
    )
    assert ids(memories.recall("Maple St apartment")) == [new.id]
    assert ids(memories.recall("Maple St apartment", streams=["chat-1"])) == []


def test_following_versions_can_be_turned_off(memories: Memories) -> None:
    _, new = versions(memories, "Rent for the Maple St apartment is $1,850.", "Rent's $1,975 starting July.")
    assert ids(memories.recall("Maple St apartment")) == [new.id]
    assert ids(memories.recall("Maple St apartment", params=RecallParams(follow_versions=False))) == []


def test_through_the_whole_service_an_update_in_other_words_is_found_by_the_old_ones_question() -> None:
    kaibo = EmbeddedKaibo(RuleStructurer(), clock=lambda: NOW)
    texts = [
        "Rent for the Maple St apartment is $1,850, due on the 1st.",
        "Rent's $1,975 starting July, ugh.",
    ]
    for index, text in enumerate(texts):
        event = {
            "idempotencyKey": f"rent-{index}",
            "kind": "message",
            "payload": {"role": "user", "text": text},
        }
        kaibo.remember(PROJECT, {"stream": "home", "events": [{**event, "occurredAt": at(-20 + 10 * index)}]})
        kaibo.structure_pending()
    answer = kaibo.recall(PROJECT, {"question": "How much is the rent on the Maple St apartment?"})
    assert answer["items"][0]["text"] == "Rent's $1,975 starting July, ugh."
    old = answer["items"][0]["foundVia"]
    chain = kaibo.explain(PROJECT, answer["items"][0]["memoryId"])["chain"]
    assert old in [version["memoryId"] for version in chain]
    assert all("1,850" not in item["text"] for item in answer["items"])
