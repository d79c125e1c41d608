"""The DynamoDB memory store and term index against the emulator: exactly-once indexing
(retries, crashes between chunks, concurrent duplicates), bounded impact-ordered reads,
and BatchGetItem's unprocessed keys."""

from __future__ import annotations

import secrets
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, cast

import pytest

from kaibo_core.adapters.dynamodb_index import DynamoTermIndex
from kaibo_core.adapters.dynamodb_memories import DynamoMemoryStore
from kaibo_core.adapters.dynamodb_values import key
from kaibo_core.core import storage_keys
from kaibo_core.core.indexing import TERMS_PER_TRANSACTION, memory_terms, plan_index
from kaibo_core.core.models.memories import MemoryRecord, SourceEventRef
from kaibo_core.core.storage_keys import ProjectId
from tests.conftest import scan_all


def new_project() -> ProjectId:
    return ProjectId("prj_01J" + secrets.token_hex(12).upper()[:23])


def memory(project: ProjectId, number: int, text: str, **fields: Any) -> MemoryRecord:
    return MemoryRecord(
        project_id=project,
        id=f"mem_{number:026d}",
        status=fields.pop("status", "provisional"),
        type="episode",
        content=text,
        valid_from="2026-06-02T09:30:00.000Z",
        valid_to=fields.pop("valid_to", None),
        confidence=0.5,
        stream="chat-1",
        source_events=(SourceEventRef(f"evt_{number:026d}", "chat-1", number, "ab" * 32),),
        created_at="2026-06-02T09:30:00.000Z",
        **fields,
    )


def stores(aws_stack: Any, client: Any = None) -> tuple[DynamoMemoryStore, DynamoTermIndex]:
    client = client or aws_stack.dynamodb
    tables = aws_stack.tables
    return (
        DynamoMemoryStore(client, tables["MemoriesTable"], tables["TermIndexTable"], sleep=lambda _: None),
        DynamoTermIndex(client, tables["TermIndexTable"]),
    )


def counters(aws_stack: Any, project: ProjectId, terms: list[str]) -> tuple[dict[str, int], tuple[int, int]]:
    client, table = aws_stack.dynamodb, aws_stack.tables["TermIndexTable"]
    doc_freqs = {}
    for term in terms:
        items = client.query(
            TableName=table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :df)",
            ExpressionAttributeValues={
                ":pk": {"S": storage_keys.postings_pk(project, "c", term)},
                ":df": {"S": storage_keys.DF_SORT_PREFIX},
            },
        )["Items"]
        doc_freqs[term] = sum(int(item["df"]["N"]) for item in items)
    corpus = client.query(
        TableName=table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": storage_keys.corpus_pk(project)}},
    )["Items"]
    return doc_freqs, (sum(int(i["docs"]["N"]) for i in corpus), sum(int(i["terms"]["N"]) for i in corpus))


LONG_TEXT = " ".join(f"word{n}x alpha" for n in range(2 * TERMS_PER_TRANSACTION + 7))


def test_given_a_memory_indexed_twice_then_it_counts_once(aws_stack) -> None:
    project = new_project()
    store, _ = stores(aws_stack)
    first = memory(project, 1, LONG_TEXT)
    plan = plan_index(first.id, memory_terms(first))
    assert len(plan.chunks()) == 3
    assert store.index_new(first) is True
    assert store.index_new(first) is False
    doc_freqs, corpus = counters(aws_stack, project, [e.term for e in plan.entries])
    assert set(doc_freqs.values()) == {1}
    assert corpus == (1, plan.dl)
    assert store.get(project, first.id) == first


class CrashAfter:
    """A client whose transact_write_items fails (after committing) once the n-th call is done."""

    def __init__(self, client: Any, calls: int) -> None:
        self._client = client
        self._left = calls

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def transact_write_items(self, **kwargs: Any) -> Any:
        if self._left == 0:
            raise ConnectionError("the container died")
        self._left -= 1
        return self._client.transact_write_items(**kwargs)


def test_given_a_crash_between_chunks_when_retried_then_the_index_is_complete_and_exact(aws_stack) -> None:
    project = new_project()
    crashing, _ = stores(aws_stack, CrashAfter(aws_stack.dynamodb, calls=1))
    target = memory(project, 2, LONG_TEXT)
    with pytest.raises(ConnectionError):
        crashing.index_new(target)
    store, index = stores(aws_stack)
    assert store.get(project, target.id) is None  # not visible: the memory item is written last
    assert store.index_new(target) is True
    plan = plan_index(target.id, memory_terms(target))
    doc_freqs, corpus = counters(aws_stack, project, [e.term for e in plan.entries])
    assert set(doc_freqs.values()) == {1}
    assert corpus == (1, plan.dl)
    reads, _ = index.read(project, ["alpha"], limit=10, history=False)
    assert [p.memory_id for p in reads[0].postings] == [target.id]


def test_given_concurrent_duplicates_when_indexing_then_exactly_one_counts(aws_stack) -> None:
    project = new_project()
    store, _ = stores(aws_stack)
    target = memory(project, 3, LONG_TEXT)
    barrier = threading.Barrier(8)

    def index_once() -> bool:
        barrier.wait(timeout=30)
        return store.index_new(target)

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(lambda _: index_once(), range(8)))
    assert outcomes.count(True) == 1
    assert store.get(project, target.id) == target
    plan = plan_index(target.id, memory_terms(target))
    doc_freqs, corpus = counters(aws_stack, project, [e.term for e in plan.entries])
    assert set(doc_freqs.values()) == {1}
    assert corpus == (1, plan.dl)


def test_given_a_frequent_term_then_its_read_is_bounded_strongest_first_with_the_full_df(aws_stack) -> None:
    project = new_project()
    store, index = stores(aws_stack)
    for number in range(1, 31):
        filler = " ".join(f"pad{n}y" for n in range(number))  # longer text, lower impact
        assert store.index_new(memory(project, number, f"deploy {filler}"))
    [read], corpus = index.read(project, ["deploy"], limit=10, history=False)
    assert read.doc_freq == 30
    assert read.truncated is True
    assert [p.memory_id for p in read.postings] == [f"mem_{n:026d}" for n in range(1, 11)]
    assert corpus.docs == 30


def test_given_history_then_read_only_when_asked(aws_stack) -> None:
    project = new_project()
    store, index = stores(aws_stack)
    store.index_new(
        memory(project, 1, "release target July 13", status="superseded", valid_to="2026-06-03T00:00:00Z")
    )
    store.index_new(memory(project, 2, "release target July 17", status="active"))
    [current], _ = index.read(project, ["releas"], limit=10, history=False)
    [both], _ = index.read(project, ["releas"], limit=10, history=True)
    assert [p.memory_id for p in current.postings] == [f"mem_{2:026d}"]
    assert {p.memory_id for p in both.postings} == {f"mem_{1:026d}", f"mem_{2:026d}"}
    assert current.doc_freq == both.doc_freq == 2


class Throttling:
    """A client whose BatchGetItem leaves all but one key unprocessed, as a throttled table does."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def batch_get_item(self, RequestItems: dict[str, Any]) -> Any:  # noqa: N803 - boto3's name
        self.calls += 1
        [(table, request)] = RequestItems.items()
        first, rest = request["Keys"][:1], request["Keys"][1:]
        response = self._client.batch_get_item(RequestItems={table: {**request, "Keys": first}})
        if rest:
            response["UnprocessedKeys"] = {table: {**request, "Keys": rest}}
        return response


def test_given_unprocessed_keys_then_get_many_retries_until_every_item_is_read(aws_stack) -> None:
    project = new_project()
    store, _ = stores(aws_stack)
    wanted = [memory(project, n, f"note number {n}") for n in range(1, 6)]
    for m in wanted:
        store.index_new(m)
    throttled = Throttling(aws_stack.dynamodb)
    slow_store, _ = stores(aws_stack, throttled)
    found = slow_store.get_many(project, [m.id for m in wanted] + ["mem_missing"])
    assert found == {m.id: m for m in wanted}
    assert throttled.calls == 6


def test_given_more_than_100_ids_then_get_many_splits_the_batch(aws_stack) -> None:
    project = new_project()
    store, _ = stores(aws_stack)
    many = [memory(project, n, f"item {n}") for n in range(1, 131)]
    for m in many:
        aws_stack.dynamodb.put_item(
            TableName=aws_stack.tables["MemoriesTable"],
            Item={**key(storage_keys.memory_key(project, m.id)), **_item(m)},
        )
    assert set(store.get_many(project, [m.id for m in many])) == {m.id for m in many}


def _item(m: MemoryRecord) -> dict[str, Any]:
    from kaibo_core.adapters.dynamodb_memories import memory_item

    return memory_item(m, dl=2)


class CountingQueries:
    def __init__(self, client: Any) -> None:
        self._client = client
        self.partitions: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def query(self, **kwargs: Any) -> Any:
        self.partitions.append(kwargs["ExpressionAttributeValues"][":pk"]["S"])
        return self._client.query(**kwargs)


def test_given_corpus_stats_read_a_moment_ago_then_they_are_reused_for_a_minute(aws_stack) -> None:
    project = new_project()
    store, _ = stores(aws_stack)
    store.index_new(memory(project, 1, "deploy on Tuesday"))
    counting = CountingQueries(aws_stack.dynamodb)
    now = [0.0]
    index = DynamoTermIndex(cast("Any", counting), aws_stack.tables["TermIndexTable"], clock=lambda: now[0])
    corpus_pk = storage_keys.corpus_pk(project)
    _, first = index.read(project, ["deploy"], limit=10, history=False)
    now[0] = 59.0
    _, again = index.read(project, ["deploy"], limit=10, history=False)
    assert counting.partitions.count(corpus_pk) == 1
    assert again == first
    now[0] = 61.0
    index.read(project, ["deploy"], limit=10, history=False)
    assert counting.partitions.count(corpus_pk) == 2


def postings_of(aws_stack: Any, project: ProjectId, memory_id: str) -> dict[str, int]:
    """How many postings ``memory_id`` has on each side (``tc``, ``th``), and its index markers."""
    items = scan_all(aws_stack.dynamodb, aws_stack.tables["TermIndexTable"])
    found: dict[str, int] = {}
    for item in items:
        pk, sk = item["pk"]["S"], item["sk"]["S"]
        if pk.startswith(f"{project}#") and (sk.endswith("#" + memory_id) or pk.endswith("#" + memory_id)):
            side = pk.split("#")[1]
            found[side] = found.get(side, 0) + 1
    return found


def test_given_an_indexed_memory_when_indexed_again_for_the_other_side_then_nothing_is_written(
    aws_stack,
) -> None:
    """A structured memory staged again after its resolution changed sides (a redelivery) finds its
    item: no chunk is applied again on the other side, and no term counts twice."""
    project = new_project()
    store, _ = stores(aws_stack)
    current = memory(project, 5, LONG_TEXT, status="staged", becomes="active")
    plan = plan_index(current.id, memory_terms(current))
    assert store.index_new(current) is True

    history = replace(current, becomes="superseded", valid_to="2026-06-03T09:30:00.000Z")
    assert store.index_new(history) is False

    assert postings_of(aws_stack, project, current.id) == {"tc": len(plan.entries)}
    doc_freqs, corpus = counters(aws_stack, project, [e.term for e in plan.entries])
    assert set(doc_freqs.values()) == {1}
    assert corpus == (1, plan.dl)


def test_given_an_index_that_never_finished_then_its_marker_names_it_and_a_retry_finishes_where_it_began(
    aws_stack,
) -> None:
    """The first of several chunks writes a marker holding the memory and its side (the purge finds
    an unfinished index by it); a retry resolved to the other side finishes on the side it began,
    counts each term once and removes the marker."""
    project = new_project()
    crashing, _ = stores(aws_stack, CrashAfter(aws_stack.dynamodb, calls=1))
    current = memory(project, 6, LONG_TEXT, status="staged", becomes="active")
    plan = plan_index(current.id, memory_terms(current))
    with pytest.raises(ConnectionError):
        crashing.index_new(current)
    assert postings_of(aws_stack, project, current.id) == {"tc": TERMS_PER_TRANSACTION, "ix": 1}

    store, _ = stores(aws_stack)
    # Finished on the side its first attempt chose, not the history side this call asked for.
    assert not store.index_new(replace(current, becomes="superseded", valid_to="2026-06-03T09:30:00.000Z"))

    assert postings_of(aws_stack, project, current.id) == {"tc": len(plan.entries)}
    assert store.get(project, current.id) == current
    doc_freqs, corpus = counters(aws_stack, project, [e.term for e in plan.entries])
    assert set(doc_freqs.values()) == {1}
    assert corpus == (1, plan.dl)
