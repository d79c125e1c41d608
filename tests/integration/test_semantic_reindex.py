"""Re-indexing by meaning: memories written while recall by meaning was off are placed by the
model afterwards (``tools/reindex_semantic.py`` on AWS, ``make reindex-semantic`` locally),
safely beside forget and structuring."""

from __future__ import annotations

import re
import signal
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kaibo.client import KaiboClient
from kaibo_core.adapters.dynamodb_forget import DynamoForgetStore
from kaibo_core.adapters.dynamodb_placements import DynamoPlacementStore
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.runtime import wiring
from tests.integration.test_forget_api import memory_ids_of, remember_structured
from tests.integration.test_local_lifecycle import assert_stops_whole, launch, run_local_command
from tests.integration.test_local_restart import RUN, kill_tree, message, start
from tests.integration.test_recall_api import get_memory, recall
from tests.integration.test_remember_api import new_project, remember
from tests.integration.test_semantic_recall import cell_postings
from tests.integration.test_structuring_api import run_structure, take_job_messages
from tools.reindex_semantic import main as reindex_main

PARAPHRASE = "When will we ship?"


def found(project: str, question: str) -> list[str]:
    reply = recall(project, {"question": question, "budget": 100})
    assert reply.status == 200, reply.body
    return [item["text"] for item in reply.body["items"]]


def reindex(stack: Any, *extra: str) -> int:
    tables = stack.tables
    return reindex_main(
        [
            "--memories-table",
            tables["MemoriesTable"],
            "--index-table",
            tables["TermIndexTable"],
            "--endpoint-url",
            stack.endpoint_url,
            *extra,
        ]
    )


def test_given_memories_written_with_the_model_off_when_re_indexed_then_found_by_meaning(
    handler_env: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = new_project()
    remember_structured(handler_env, project, "chat", "Move the release target from July 13 to July 17")
    monkeypatch.setenv("KAIBO_SEMANTIC_MODEL", "mini6")
    wiring.reset()
    assert found(project, PARAPHRASE) == []  # the model is on, but these memories have no place yet

    capsys.readouterr()
    assert reindex(handler_env, "--project", project) == 0
    assert capsys.readouterr().out.startswith("2 memories placed by mini6c256, 0 already were")
    assert "July 17" in found(project, PARAPHRASE)[0]

    capsys.readouterr()
    assert reindex(handler_env, "--project", project) == 0  # again: nothing left to place
    assert capsys.readouterr().out.startswith("0 memories placed by mini6c256, 2 already were")


def test_given_a_memory_retired_after_it_was_read_then_the_re_index_does_not_place_the_stale_copy(
    semantic_env: Any,
) -> None:
    project = new_project()
    stack = semantic_env
    tables = stack.tables
    (made,) = remember_structured(stack, project, "chat", "The launch date is July 13.")
    memory_id = memory_ids_of(project, made)[1]
    store = DynamoPlacementStore(stack.dynamodb, tables["MemoriesTable"], tables["TermIndexTable"])
    stale = store.get(ProjectId(project), memory_id)
    assert stale is not None
    assert stale.semantic is not None
    reply = remember(
        project, {"stream": "chat", "events": [message("chat-1", "The launch date moved to July 20.")]}
    )
    assert reply.status == 202, reply.body
    run_structure(stack, take_job_messages(stack, {reply.body["jobId"]}), as_deployed=True)
    assert get_memory(project, memory_id).body["status"] == "superseded"

    channel = wiring.semantic_channel()
    assert channel is not None
    moved = channel.place([replace(stale, semantic=None, content="other words")])
    assert moved[0].semantic is not None
    assert not store.replace_placement(stale, moved[0].semantic)  # read as active: refused
    postings = cell_postings(stack, {memory_id})
    assert postings
    assert all("#th#" in item["pk"]["S"] for item in postings)  # untouched, on the history side


def test_given_a_memory_placed_after_forget_read_it_then_forget_removes_the_new_place(
    handler_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = new_project()
    stack = handler_env
    tables = stack.tables
    (made,) = remember_structured(stack, project, "chat", "My locker code is 3117 Zanzibarian.")
    memory_id = memory_ids_of(project, made)[1]
    forget_store = DynamoForgetStore(stack.dynamodb, tables["MemoriesTable"], tables["TermIndexTable"])
    read_by_forget = forget_store.get(ProjectId(project), memory_id)
    assert read_by_forget is not None
    assert read_by_forget.semantic is None

    monkeypatch.setenv("KAIBO_SEMANTIC_MODEL", "mini6")
    wiring.reset()
    assert reindex(stack, "--project", project) == 0  # placed between forget's read and its write
    assert cell_postings(stack, {memory_id})

    marks = {
        "tombstonedAt": "2026-12-02T00:00:00Z",
        "purgeAfter": "2026-12-03T00:00:00Z",
        "receiptId": "rcp_1",
    }
    before = forget_store.tombstone(ProjectId(project), memory_id, marks, read=read_by_forget)
    assert before is not None
    assert before.semantic is not None  # forget read it again: it removes what the item names
    forget_store.remove_from_index(before)
    assert cell_postings(stack, {memory_id}) == []


def test_given_a_stopped_local_stack_when_re_indexed_then_started_with_the_model_it_finds_by_meaning(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    first = start(tmp_path / "first", data)
    key = first.values["KAIBO_API_KEY"]
    KaiboClient(first.values["KAIBO_ENDPOINT"], key).remember(
        "chat", [message("k1", "Move the release target from July 13 to July 17")], wait=True
    )
    assert_stops_whole(first, signal.SIGTERM, group=False)

    done = run_local_command("reindex-semantic", data)
    assert done.returncode == 0, done.stderr
    placed = re.search(r"kaibo-local: (\d+) memories placed by mini6c256", done.stderr)
    assert placed, done.stderr
    assert int(placed.group(1)) >= 1

    second = launch(tmp_path / "second", args=RUN, KAIBO_DATA_DIR=str(data), KAIBO_SEMANTIC_MODEL="mini6")
    second.wait_announced()
    try:
        answer = KaiboClient(second.values["KAIBO_ENDPOINT"], key).recall(PARAPHRASE, budget=100)
        assert "July 17" in answer["items"][0]["text"]
    finally:
        kill_tree(second)
