"""ARCHITECTURE.md invariant 5, "Recall reads only what it needs": what one recall reads from
DynamoDB is driven by the postings of the question's terms, bounded per term, and not by the size
of the project. Counted on the emulator through botocore's own events (every request, every item
it answered), with the real ``DynamoTermIndex`` and ``DynamoMemoryStore``; ``make
bench-recall-cost`` measures the same at 1k-100k memories."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from kaibo_core.adapters.dynamodb_index import DynamoTermIndex
from kaibo_core.adapters.dynamodb_memories import DynamoMemoryStore
from kaibo_core.core.indexing import CORPUS_SHARDS, DF_SHARDS
from kaibo_core.core.models.recall import RecallQuery
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.services.recall import RecallParams, RecallService
from tests.conftest import AwsStack, emulator_client
from tests.integration.test_memory_index import memory, new_project

QUESTION = RecallQuery(question="When is the deploy window?", budget=300)


@dataclass
class Reads:
    """Requests by operation, and the items answered by table."""

    requests: Counter[str] = field(default_factory=Counter)
    items: Counter[str] = field(default_factory=Counter)
    largest_query: int = 0

    @staticmethod
    def note_table(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["kaibo_table"] = params.get("TableName")

    def __call__(self, model: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        operation = model.name
        self.requests[operation] += 1
        if operation == "Query":
            self.items[context["kaibo_table"]] += len(parsed.get("Items", []))
            self.largest_query = max(self.largest_query, len(parsed.get("Items", [])))
        elif operation == "BatchGetItem":
            for table, items in parsed.get("Responses", {}).items():
                self.items[table] += len(items)
        elif operation == "GetItem":
            self.items["GetItem"] += 1 if "Item" in parsed else 0


@pytest.fixture
def client(aws_stack: AwsStack) -> Iterator[Any]:
    """A client of its own: the hooks below see only this test's requests."""
    own = emulator_client("dynamodb", aws_stack.endpoint_url)
    yield own
    own.close()


def recall_counting(
    aws_stack: AwsStack, client: Any, project: ProjectId, params: RecallParams | None = None
) -> tuple[list[str], Reads]:
    """One recall as a fresh container makes it (no corpus statistics cached): ids and reads."""
    reads = Reads()
    tables = aws_stack.tables
    index = DynamoTermIndex(client, tables["TermIndexTable"])
    store = DynamoMemoryStore(client, tables["MemoriesTable"], tables["TermIndexTable"])
    service = RecallService(index, store, params=params or RecallParams())
    client.meta.events.register("provide-client-params.dynamodb.*", Reads.note_table)
    client.meta.events.register("after-call.dynamodb.*", reads)
    try:
        answer, _ = service.recall(project, QUESTION)
    finally:
        client.meta.events.unregister("after-call.dynamodb.*", reads)
        client.meta.events.unregister("provide-client-params.dynamodb.*", Reads.note_table)
    return [hit.memory.id for hit in answer.items], reads


def index(aws_stack: AwsStack, project: ProjectId, first: int, texts: list[str]) -> None:
    store = DynamoMemoryStore(
        aws_stack.dynamodb, aws_stack.tables["MemoriesTable"], aws_stack.tables["TermIndexTable"]
    )
    for number, text in enumerate(texts, start=first):
        store.index_new(memory(project, number, text, status="active"))


def test_given_many_more_memories_about_other_things_then_recall_reads_exactly_as_much(
    aws_stack: AwsStack, client: Any
) -> None:
    project = new_project()
    index(aws_stack, project, 1, [f"The deploy window number {n} is Friday at 16:00" for n in range(1, 6)])
    small_ids, small = recall_counting(aws_stack, client, project)

    index(aws_stack, project, 100, [f"Greenhouse rota {n}: water the tomato seedlings" for n in range(300)])
    large_ids, large = recall_counting(aws_stack, client, project)

    assert small_ids
    assert large_ids == small_ids
    assert large.requests == small.requests
    tables = aws_stack.tables
    for table in ("TermIndexTable", "MemoriesTable"):
        # The corpus statistics' shards are the one thing that may grow with the project: a
        # constant number of items (each memory adds to one shard).
        grown = large.items[tables[table]] - small.items[tables[table]]
        assert 0 <= grown <= (CORPUS_SHARDS if table == "TermIndexTable" else 0), (table, small, large)


def test_given_a_term_in_far_more_memories_than_the_cap_then_its_reads_stop_at_the_cap(
    aws_stack: AwsStack, client: Any
) -> None:
    params = RecallParams(postings_per_term=8, max_fetch=16)
    project = new_project()
    index(aws_stack, project, 1, [f"The deploy window number {n} is Friday" for n in range(1, 31)])
    _, thirty = recall_counting(aws_stack, client, project, params)
    index(aws_stack, project, 31, [f"The deploy window number {n} is Friday" for n in range(31, 91)])
    ids, ninety = recall_counting(aws_stack, client, project, params)

    assert ids
    assert ninety.requests == thirty.requests
    # No Query answers more than the cap plus the term's df shards (and the corpus statistics').
    assert ninety.largest_query <= params.postings_per_term + DF_SHARDS
    assert ninety.items[aws_stack.tables["MemoriesTable"]] <= params.max_fetch
    memories = aws_stack.tables["MemoriesTable"]
    assert ninety.items[memories] == thirty.items[memories]
