"""Recall by meaning through the deployed functions, with the real model (all-MiniLM-L6-v2):
paraphrases found, supersession followed, and forget and purge leaving no vector behind."""

from __future__ import annotations

from typing import Any

import pytest

from kaibo_core.core.semantic.placement import CELL_TERM_PREFIX
from kaibo_core.core.semantic.vectors import NIBBLE_FORM
from tests.conftest import scan_all
from tests.integration.test_forget_api import (
    forget_now,
    memory_ids_of,
    recalled_ids,
    remember_structured,
    run_purge,
)
from tests.integration.test_recall_api import get_memory, recall
from tests.integration.test_remember_api import new_project


def cell_postings(stack: Any, memory_ids: set[str]) -> list[dict[str, Any]]:
    """Every semantic posting (a cell's, with a vector) of ``memory_ids``, on either side."""
    items: list[dict[str, Any]] = []
    request: dict[str, Any] = {"TableName": stack.tables["TermIndexTable"]}
    while True:  # every page: the session's table outgrows one (1 MB)
        page = stack.dynamodb.scan(**request)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            break
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return [
        item
        for item in items
        if f"#{CELL_TERM_PREFIX}" in item["pk"]["S"] and item["sk"]["S"].split("#", 1)[-1] in memory_ids
    ]


def texts(reply: Any) -> list[str]:
    assert reply.status == 200, reply.body
    return [item["text"] for item in reply.body["items"]]


def test_given_the_model_on_then_a_question_sharing_no_word_finds_its_memory(semantic_env: Any) -> None:
    project = new_project()
    remember_structured(
        semantic_env,
        project,
        "chat",
        "Move the release target from July 13 to July 17",
        "The office wifi password is hunter2",
    )
    for question in ("When will we ship?", "What is the launch date?"):
        found = texts(recall(project, {"question": question, "budget": 100}))
        assert found, question
        assert "July 17" in found[0], (question, found)
        assert not any("hunter2" in text for text in found)


def test_given_the_model_off_then_the_same_question_abstains(handler_env: Any) -> None:
    project = new_project()
    remember_structured(handler_env, project, "chat", "Move the release target from July 13 to July 17")
    reply = recall(project, {"question": "When will we ship?", "budget": 100})
    assert reply.status == 200, reply.body
    assert reply.body["abstain"]["reason"] == "no_match"


def test_given_an_update_then_the_old_value_s_cells_move_to_history(semantic_env: Any) -> None:
    project = new_project()
    old, new = remember_structured(
        semantic_env, project, "chat", "The launch date is July 13.", "The launch date moved to July 20."
    )
    old_ids = set(memory_ids_of(project, old)[1:])
    assert [get_memory(project, m).body["status"] for m in old_ids] == ["superseded"]
    postings = cell_postings(semantic_env, old_ids)
    assert postings
    assert all(item["v"]["S"].startswith(NIBBLE_FORM) for item in postings)  # the short code
    assert all(f"#th#{CELL_TERM_PREFIX}" in item["pk"]["S"] for item in postings)  # history side only

    now = texts(recall(project, {"question": "When is the release?", "budget": 200}))
    assert any("July 20" in text for text in now)
    assert not any("July 13" in text and "July 20" not in text for text in now)
    history = recall(project, {"question": "When is the release?", "budget": 200, "includeSuperseded": True})
    assert any("July 13" in text and "July 20" not in text for text in texts(history))
    assert new


def test_given_a_placed_memory_forgotten_and_purged_then_no_vector_of_it_is_left(semantic_env: Any) -> None:
    project = new_project()
    made, kept = remember_structured(
        semantic_env,
        project,
        "chat",
        "My locker combination is 31 17 4 Zanzibarian.",
        "The office wifi password is hunter2",
    )
    forgotten_ids = set(memory_ids_of(project, made))
    kept_ids = set(memory_ids_of(project, kept))
    assert cell_postings(semantic_env, forgotten_ids)  # the scan finds them before: it can fail
    questions = ("What is my locker combination?", "What is the code for my locker?")
    assert all(set(recalled_ids(project, question)) & forgotten_ids for question in questions)

    reply = forget_now(project, {"query": "Zanzibarian", "reason": "erase the combination"})
    assert reply.status == 200, reply.body
    assert not any(set(recalled_ids(project, q)) & forgotten_ids for q in questions)  # gone at once
    run_purge()

    assert cell_postings(semantic_env, forgotten_ids) == []
    items = scan_all(semantic_env.dynamodb, semantic_env.tables["MemoriesTable"])
    mine = [item for item in items if item["pk"]["S"].startswith(f"{project}#")]  # the table is shared
    erased = [item for item in mine if item["id"]["S"] in forgotten_ids]
    assert erased
    assert all("sem" not in item and "content" not in item for item in erased)
    assert cell_postings(semantic_env, kept_ids)  # the other memory keeps its place


@pytest.mark.parametrize(
    ("old_text", "new_text"),
    [
        # #15 with the model on: the structure function's rules read "the same subject" by meaning too.
        ("The marketing budget for Q3 is $40,000.", "Q3 spend on marketing is capped at $55,000."),
        # "I'll" is no name (session 28): one value changed, its time, and the model finds the two
        # close; read as a name, "I'll" made it two values changed, two subjects.
        (
            "Mia's flight lands at 6:40pm on Saturday, I'll pick her up.",
            "Checked the itinerary again, Mia gets in at 8:40pm Saturday. Terminal 2.",
        ),
    ],
)
@pytest.mark.parametrize(("env", "status"), [("semantic_env", "superseded"), ("handler_env", "active")])
def test_given_a_value_restated_in_other_words_then_the_deployed_structurer_retires_it_only_with_the_model(
    old_text: str, new_text: str, env: str, status: str, request: pytest.FixtureRequest
) -> None:
    project = new_project()
    old, _ = remember_structured(request.getfixturevalue(env), project, "chat", old_text, new_text)
    retired = memory_ids_of(project, old)[1:]
    assert [get_memory(project, m).body["status"] for m in retired] == [status]


def test_given_an_update_nothing_linked_then_by_meaning_it_answers_first_and_the_old_is_marked(
    semantic_env: Any,
) -> None:
    # #15, recall's safety net with the model on: the update does not say "flight" or "lands", so by
    # words it answers less of the question; close in meaning to the earlier fact, it still ranks
    # first, and the earlier one is cited as older. (Said as a correction, "Misread the itinerary,
    # …", the structurer now links the two: docs/structuring-rules.md, "Corrected".)
    project = new_project()
    # (Dana, a name the update drops, keeps the structurer from linking them even by meaning.)
    old_text = "Mia's flight lands at 6:40pm on Saturday, Dana will pick her up."
    new_text = "Checked the itinerary again, Mia gets in at 8:40pm Saturday. Terminal 2."
    remember_structured(semantic_env, project, "family", old_text, new_text)
    reply = recall(project, {"question": "When does Mia's flight land?", "budget": 300})
    items = reply.body["items"]
    assert "8:40pm" in items[0]["text"], texts(reply)
    older = [item for item in items if "6:40pm" in item["text"]]
    assert older, texts(reply)
    assert all(item.get("olderThan") == items[0]["memoryId"] for item in older), items
