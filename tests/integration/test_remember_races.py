"""Concurrent remembers against the emulator, with DynamoDB requests serialized as DynamoDB would.

Writers run in separate OS processes and are forced (barrier) to read the same
head before committing, so the conditional transaction — not our code — must
decide who wins. These tests fail if the head condition or the idempotency
condition were dropped from the transaction.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from kaibo_core.adapters.dynamodb_events import DynamoEventStore
from kaibo_core.api.mapping import stored_event
from kaibo_core.core import chain
from kaibo_core.core.storage_keys import ProjectId
from tests.integration import race_workers
from tests.integration.race_workers import Target

WRITERS = 8
EVENTS_PER_WRITER = 200
SENDER_PROCESSES = 4
SENDERS_PER_PROCESS = 4


def _target(aws_stack, stream: str) -> Target:
    return Target(
        endpoint_url=aws_stack.endpoint_url,
        events_table=aws_stack.tables["EventsTable"],
        idempotency_table=aws_stack.tables["IdempotencyTable"],
        project="prj_01JRACE000000000000000000",
        stream=stream,
    )


def _all_events(aws_stack, target: Target) -> list[dict]:
    store = DynamoEventStore(aws_stack.dynamodb, target.events_table, target.idempotency_table)
    served: list[dict] = []
    next_seq: int | None = 1
    while next_seq is not None:
        records, next_seq = store.page_events(ProjectId(target.project), target.stream, next_seq, 1000, 10**9)
        served.extend(stored_event(r) for r in records)
    return served


def test_given_8_writers_in_separate_processes_when_racing_for_one_stream_then_seqs_are_gapless_and_verify(
    aws_stack,
) -> None:
    target = _target(aws_stack, "raced")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ProcessPoolExecutor(WRITERS, mp_context=ctx) as pool:
        barrier = manager.Barrier(WRITERS)
        futures = [
            pool.submit(race_workers.append_many, target, barrier, w, EVENTS_PER_WRITER)
            for w in range(WRITERS)
        ]
        results = [f.result(timeout=600) for f in futures]

    served = _all_events(aws_stack, target)
    assert [e["seq"] for e in served] == list(range(1, WRITERS * EVENTS_PER_WRITER + 1))
    assert sorted(seq for r in results for seq in r["seqs"]) == list(
        range(1, WRITERS * EVENTS_PER_WRITER + 1)
    )
    assert len({e["idempotencyKey"] for e in served}) == WRITERS * EVENTS_PER_WRITER
    verifier = chain.ChainVerifier(target.stream)
    for event in served:
        verifier.feed(event)
    assert verifier.finish() is None
    # Every round, all writers read the same head: all but one must have lost and retried.
    conflicts = sum(r["conflicts"] for r in results)
    assert conflicts >= (WRITERS - 1) * EVENTS_PER_WRITER
    assert sum(r["attempts"] for r in results) == WRITERS * EVENTS_PER_WRITER + conflicts


def test_given_16_senders_of_one_key_when_racing_then_exactly_one_event_and_15_replays(aws_stack) -> None:
    target = _target(aws_stack, "one-key")
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ProcessPoolExecutor(SENDER_PROCESSES, mp_context=ctx) as pool:
        barrier = manager.Barrier(SENDER_PROCESSES * SENDERS_PER_PROCESS)
        futures = [
            pool.submit(race_workers.send_same_key, target, barrier, SENDERS_PER_PROCESS)
            for _ in range(SENDER_PROCESSES)
        ]
        results = [r for f in futures for r in f.result(timeout=300)]

    served = _all_events(aws_stack, target)
    assert len(served) == 1
    assert len(results) == SENDER_PROCESSES * SENDERS_PER_PROCESS
    assert {r["eventId"] for r in results} == {served[0]["id"]}
    assert sorted(r["replayed"] for r in results) == [False] + [True] * 15
    # The 15 did not find the key by reading first: their commit was refused by its condition.
    assert sum(r["claimsSeen"] for r in results) == 15
