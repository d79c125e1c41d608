"""Structuring through the real handlers and the DynamoDB stores, against the emulator:
jobs and their queue messages, the structure function's partial batch failures, the sweeper,
concurrent duplicate delivery, racing superseders, a recall racing the provisional switch,
and explain/jobs routes."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kaibo_core.adapters.dynamodb_events import DynamoEventStore
from kaibo_core.adapters.dynamodb_index import DynamoTermIndex
from kaibo_core.adapters.dynamodb_jobs import DynamoJobStore
from kaibo_core.adapters.dynamodb_structuring import DynamoStructuringStore
from kaibo_core.adapters.dynamodb_values import key
from kaibo_core.core import storage_keys
from kaibo_core.core.job_messages import parse_job_message
from kaibo_core.core.models.memories import MemoryRecord
from kaibo_core.core.models.recall import RecallQuery
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.structuring.rules import RuleStructurer
from kaibo_core.runtime import wiring
from kaibo_core.services.recall import RecallService
from kaibo_core.services.remember import RememberService
from kaibo_core.services.structuring import StructuringService
from kaibo_local.workers import sqs_event
from tests.fixtures.scripted_structurer import ScriptedStructurer
from tests.integration.api import FakeLambdaContext, Reply, call, get_job, handler_module, project_context
from tests.integration.iam_calls import checked_invocation
from tests.integration.test_recall_api import get_memory
from tests.integration.test_remember_api import message, new_project, remember

DEADLINE_SECONDS = 20


@pytest.fixture
def scripted(handler_env: Any) -> Any:
    """The stack, for tests whose structure function runs a scripted structurer (``run_structure``):
    these tests are about the pipeline, not the rules."""
    return handler_env


def stores(stack: Any) -> tuple[StructuringService, DynamoStructuringStore, DynamoJobStore]:
    client, tables = stack.dynamodb, stack.tables
    memories = DynamoStructuringStore(client, tables["MemoriesTable"], tables["TermIndexTable"])
    service = StructuringService(
        DynamoEventStore(client, tables["EventsTable"], tables["IdempotencyTable"]),
        memories,
        DynamoTermIndex(client, tables["TermIndexTable"]),
        ScriptedStructurer(),
    )
    return service, memories, DynamoJobStore(client, tables["JobsTable"])


def take_job_messages(stack: Any, job_ids: set[str]) -> list[dict[str, Any]]:
    """The queue's messages of ``job_ids`` (others are left for their own tests), polled to a deadline."""
    url = stack.queues["StructuringQueue"]
    found: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + DEADLINE_SECONDS
    while set(found) != job_ids and time.monotonic() < deadline:
        response = stack.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
        for m in response.get("Messages", []):
            _, job_id = parse_job_message(m["Body"])
            if job_id in job_ids:
                found[job_id] = m
                stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    assert set(found) == job_ids, f"job messages not found: {job_ids - set(found)}"
    return list(found.values())


def run_structure(
    stack: Any, messages: list[dict[str, Any]], *, as_deployed: bool = False, iam_checked: bool = True
) -> Any:
    """The structure function on ``messages``: with a scripted structurer (injected), or the
    deployment's own structurer (``as_deployed``). Its AWS calls are checked against its role
    unless ``iam_checked`` is False (a test that runs another function's code inside it)."""
    arn = f"arn:aws:sqs:us-east-1:123456789012:{stack.queues['StructuringQueue'].rsplit('/', 1)[-1]}"
    service = None if as_deployed else wiring.build_structuring_service(ScriptedStructurer())
    handler = handler_module("structure").lambda_handler
    event = sqs_event(messages, arn)
    if not iam_checked:
        return handler(event, FakeLambdaContext(), service=service)
    return checked_invocation("structure", handler, event, FakeLambdaContext(), service=service)


def explain(project: str, memory_id: str) -> Reply:
    return call(
        "memories",
        "POST",
        "/v1/explain",
        body={"memoryId": memory_id},
        context=project_context(project, "read"),
    )


def recall_ids(project: str, question: str) -> list[str]:
    reply = call(
        "recall", "POST", "/v1/recall", body={"question": question}, context=project_context(project)
    )
    assert reply.status == 200, reply.body
    return [item["memoryId"] for item in reply.body["items"]]


def test_given_a_remember_then_its_job_is_queued_by_id_only_and_structuring_makes_it_searchable(
    scripted: Any,
) -> None:
    project = new_project()
    reply = remember(
        project, {"stream": "chat-1", "events": [message("k1", "The release target is July 13")]}
    )
    assert reply.status == 202, reply.body
    job_id = reply.body["jobId"]
    assert get_job(project, job_id).body["status"] == "queued"
    (queued,) = take_job_messages(scripted, {job_id})
    assert json.loads(queued["Body"]) == {"v": 1, "projectId": project, "jobId": job_id}  # ids, never text

    assert run_structure(scripted, [queued]) == {"batchItemFailures": []}

    job = get_job(project, job_id).body
    provisional_id = reply.body["memories"][0]["id"]
    assert job["status"] == "done"
    assert job["eventIds"] == [reply.body["events"][0]["id"]]
    assert job["memoryIds"] == [f"{provisional_id}-1"]
    assert recall_ids(project, "release target") == job["memoryIds"]
    chain = explain(project, job["memoryIds"][0]).body["chain"]
    assert [(v["memoryId"], v["status"]) for v in chain] == [
        (provisional_id, "replaced"),
        (job["memoryIds"][0], "active"),
    ]
    assert chain[-1]["sourceEvents"] == [
        {k: reply.body["events"][0][k] for k in ("stream", "seq", "hash")}
        | {"eventId": reply.body["events"][0]["id"]}
    ]


def test_given_a_poison_message_in_a_batch_then_only_it_is_reported_failed(scripted: Any) -> None:
    project = new_project()
    reply = remember(project, {"stream": "chat-1", "events": [message("k1", "Ship on Friday")]})
    (good,) = take_job_messages(scripted, {reply.body["jobId"]})
    poison = {**good, "MessageId": "poison-1", "Body": "not a job"}
    result = run_structure(scripted, [good, poison])
    assert result == {"batchItemFailures": [{"itemIdentifier": "poison-1"}]}
    assert get_job(project, reply.body["jobId"]).body["status"] == "done"


def test_given_a_poison_message_on_the_queue_then_it_reaches_the_dead_letter_queue(scripted: Any) -> None:
    """The template's redrive policy: after maxReceiveCount receives, SQS moves it to the DLQ."""
    sqs, url, dlq = (
        scripted.sqs,
        scripted.queues["StructuringQueue"],
        scripted.queues["StructuringDeadLetterQueue"],
    )
    sqs.send_message(QueueUrl=url, MessageBody="poison-for-the-dlq")
    deadline = time.monotonic() + DEADLINE_SECONDS
    in_dlq: list[dict[str, Any]] = []
    while not in_dlq and time.monotonic() < deadline:
        for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0).get(
            "Messages", []
        ):
            if m["Body"] == "poison-for-the-dlq":
                result = run_structure(scripted, [m])
                assert result == {"batchItemFailures": [{"itemIdentifier": m["MessageId"]}]}
        received = sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10).get("Messages", [])
        in_dlq = [m for m in received if m["Body"] == "poison-for-the-dlq"]
    assert in_dlq, "the poison message never reached the DLQ"


@pytest.fixture
def own_tables(scripted: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Tables and queues of this test alone: the sweeper reads every project's pending jobs, and
    the session's other tests leave thousands of them unstructured."""
    import secrets
    from dataclasses import replace

    from kaibo_local.template import create_tables, load_template
    from kaibo_local.workers import create_queues

    suffix = secrets.token_hex(4)
    template = load_template()
    stack = replace(
        scripted,
        tables=create_tables(scripted.dynamodb, template, suffix),
        queues=create_queues(scripted.sqs, template, suffix),
    )
    for name, value in stack.function_env().items():
        monkeypatch.setenv(name, value)
    wiring.reset()
    return stack


def test_given_a_lost_job_message_then_the_sweeper_requeues_it(
    own_tables: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripted = own_tables

    class LostMessages:
        def send(self, project: Any, job_id: str) -> None:
            raise ConnectionError("SQS unreachable")

    losing = RememberService(wiring.event_store(), wiring.memory_store(), jobs=LostMessages())
    project = new_project()
    reply = call(
        "remember",
        "POST",
        "/v1/remember",
        body={"stream": "chat-1", "events": [message("k1", "Ship on Friday")]},
        context=project_context(project, "write"),
        services={"service": losing},
    )
    assert reply.status == 202  # acknowledged all the same
    job_id = reply.body["jobId"]
    monkeypatch.setenv("KAIBO_SWEEP_AFTER_SECONDS", "1")
    wiring.reset()
    sweeper = handler_module("sweeper")
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if checked_invocation("sweeper", sweeper.lambda_handler, {}, FakeLambdaContext())["requeued"]:
            break
    messages = take_job_messages(scripted, {job_id})
    run_structure(scripted, messages)
    assert get_job(project, job_id).body["status"] == "done"


def test_given_pending_jobs_then_the_sweeper_moves_each_on_only_from_where_it_read_it(
    own_tables: Any,
) -> None:
    from datetime import timedelta

    from kaibo_core.core.clock import format_instant, parse_instant, utc_now
    from kaibo_core.core.ids import job_id
    from kaibo_core.core.models.jobs import EventLocation, JobRecord

    store = DynamoJobStore(own_tables.dynamodb, own_tables.tables["JobsTable"])
    created = utc_now() - timedelta(minutes=10)
    project = ProjectId(new_project())
    made = {}
    for name in ("moved", "finished", "raced"):
        job = JobRecord(
            project_id=project,
            id=job_id(),
            status="queued",
            events=(EventLocation(event_id="evt_x", stream="s", seq=1),),
            created_at=format_instant(created),
            updated_at=format_instant(created),
        )
        own_tables.dynamodb.transact_write_items(TransactItems=[store.put_action(job)])
        made[name] = job.id
    due = {job.job_id: job for job in store.pending_before(utc_now(), limit=100)}
    assert set(due) == set(made.values())
    assert {job.since for job in due.values()} == {format_instant(created)}
    store.finish(project, made["finished"], [], format_instant(utc_now()))
    later = utc_now() + timedelta(minutes=30)
    assert store.postpone(due[made["raced"]], utc_now())  # another sweeper got there first

    outcomes = {name: store.postpone(due[made[name]], later) for name in made}

    assert outcomes == {"moved": True, "finished": False, "raced": False}
    assert [job.job_id for job in store.pending_before(utc_now() + timedelta(seconds=1), 100)] == [
        made["raced"]
    ]
    (moved,) = [
        job for job in store.pending_before(later + timedelta(seconds=1), 100) if job.job_id == made["moved"]
    ]
    assert parse_instant(moved.since) == parse_instant(format_instant(later))


def test_given_duplicates_of_a_job_delivered_concurrently_then_the_same_memories_are_made_once(
    handler_env: Any,
) -> None:
    project = new_project()
    reply = remember(
        project,
        {"stream": "chat-1", "events": [message(f"k{i}", f"Fact number {i} holds") for i in range(3)]},
    )
    job_id = reply.body["jobId"]
    barrier = threading.Barrier(4)

    def deliver() -> list[str]:
        service, _, jobs = stores(handler_env)
        barrier.wait()
        return service.structure_job(ProjectId(project), job_id, jobs).memory_ids

    with ThreadPoolExecutor(4) as pool:
        results = [f.result() for f in [pool.submit(deliver) for _ in range(4)]]
    made = {tuple(r) for r in results if r}
    assert len(made) == 1, made
    (ids,) = made
    assert len(ids) == 3
    corpus = handler_env.dynamodb.query(
        TableName=handler_env.tables["TermIndexTable"],
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": storage_keys.corpus_pk(ProjectId(project))}},
        ConsistentRead=True,
    )["Items"]
    assert sum(int(i["docs"]["N"]) for i in corpus) == 3  # three structured, three provisional gone


def original_and_racers(
    stack: Any, project: ProjectId, old: str, newer: list[str]
) -> tuple[str, list[Reply]]:
    """``old`` remembered and structured (June 1), then each of ``newer`` remembered (June 2, 3, ...)
    naming it in ``supersedes``, not structured yet: the original's id and the racers' replies."""
    service, _, jobs = stores(stack)
    first = remember(
        project, {"stream": "chat-1", "events": [message("k1", old, occurredAt="2026-06-01T09:00:00Z")]}
    )
    service.structure_job(project, first.body["jobId"], jobs)
    original = f"{first.body['memories'][0]['id']}-1"
    racers = [
        remember(
            project,
            {
                "stream": "chat-1",
                "events": [
                    message(f"k{n}", text, occurredAt=f"2026-06-0{n}T09:00:00Z", supersedes=[original])
                ],
            },
        )
        for n, text in enumerate(newer, 2)
    ]
    return original, racers


def test_given_two_racing_superseders_then_one_wins_and_the_newest_stays_current(handler_env: Any) -> None:
    project = ProjectId(new_project())
    _, memories, _ = stores(handler_env)
    original, racers = original_and_racers(
        handler_env,
        project,
        "The release target is July 13",
        ["The release target is July 17", "The release target is July 20"],
    )
    barrier = threading.Barrier(2)

    def race(reply: Reply) -> None:
        racer, _, racer_jobs = stores(handler_env)
        barrier.wait()
        racer.structure_job(project, reply.body["jobId"], racer_jobs)

    with ThreadPoolExecutor(2) as pool:
        for f in [pool.submit(race, r) for r in racers]:
            f.result()
    old = memories.get(project, original)
    second, third = (memories.get(project, f"{r.body['memories'][0]['id']}-1") for r in racers)
    assert old is not None
    assert second is not None
    assert third is not None
    assert old.status == "superseded"
    assert len(old.superseded_by) == 1  # retired exactly once
    assert third.status == "active"  # the newest statement is current, whoever committed first
    assert second.status == "superseded"
    assert second.valid_to == third.valid_from


def test_given_a_recall_racing_the_provisional_switch_then_it_sees_exactly_one_of_the_pair(
    handler_env: Any,
) -> None:
    project = ProjectId(new_project())
    service, memories, jobs = stores(handler_env)
    reply = remember(
        project,
        {"stream": "chat-1", "events": [message("k1", "The quarterly budget review moved to Thursday")]},
    )
    provisional_id = reply.body["memories"][0]["id"]
    recall = RecallService(
        DynamoTermIndex(handler_env.dynamodb, handler_env.tables["TermIndexTable"]), memories
    )
    query = RecallQuery(question="quarterly budget review", budget=300)
    done = threading.Event()
    seen: list[list[str]] = []

    def keep_recalling() -> None:
        while not done.is_set():
            answer, _ = recall.recall(project, query)
            seen.append([hit.memory.id for hit in answer.items])

    watcher = threading.Thread(target=keep_recalling)
    watcher.start()
    try:
        service.structure_job(project, reply.body["jobId"], jobs)
    finally:
        done.set()
        watcher.join()
    answer, _ = recall.recall(project, query)
    seen.append([hit.memory.id for hit in answer.items])
    pair = {provisional_id, f"{provisional_id}-1"}
    assert seen
    assert all(len(pair & set(ids)) == 1 for ids in seen), seen
    assert seen[-1] == [f"{provisional_id}-1"]


def test_given_a_forgotten_source_event_then_a_later_structuring_write_is_refused(handler_env: Any) -> None:
    project = ProjectId(new_project())
    service, memories, jobs = stores(handler_env)
    reply = remember(project, {"stream": "chat-1", "events": [message("k1", "My locker code is 4711")]})
    provisional_id = reply.body["memories"][0]["id"]
    handler_env.dynamodb.update_item(  # what forget does to the memory of the event
        TableName=handler_env.tables["MemoriesTable"],
        Key=key(storage_keys.memory_key(project, provisional_id)),
        UpdateExpression="SET #s = :t REMOVE content",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":t": {"S": "tombstoned"}},
    )
    stats = service.structure_job(project, reply.body["jobId"], jobs)
    assert stats.refused == 1
    assert memories.get(project, f"{provisional_id}-1") is None


def test_given_unknown_ids_then_jobs_and_explain_answer_404(handler_env: Any) -> None:
    project = new_project()
    assert get_job(project, "job_nope").status == 404
    assert get_job(project, "job_nope").body["error"]["code"] == "job_not_found"
    assert explain(project, "mem_nope").status == 404
    assert explain(project, "mem_nope").body["error"]["code"] == "memory_not_found"
    other = remember(new_project(), {"stream": "s", "events": [message("k1", "secret of B")]})
    assert get_job(project, other.body["jobId"]).status == 404  # another project's job: as unknown
    assert explain(project, other.body["memories"][0]["id"]).status == 404  # and its memories


def test_given_a_project_time_zone_then_the_structure_function_resolves_dates_in_it(handler_env: Any) -> None:
    from tests.integration.api import ADMIN_CONTEXT

    refused = call(
        "admin",
        "POST",
        "/v1/admin/projects",
        body={"name": "tz", "timeZone": "Mars/Olympus"},
        context=ADMIN_CONTEXT,
    )
    assert refused.status == 422
    assert refused.body["error"]["code"] == "invalid_time_zone"
    created = call(
        "admin",
        "POST",
        "/v1/admin/projects",
        body={"name": "tz", "timeZone": "Asia/Tokyo"},
        context=ADMIN_CONTEXT,
    )
    assert created.status == 201, created.body
    assert created.body["timeZone"] == "Asia/Tokyo"
    project = created.body["projectId"]
    reply = remember(
        project,
        {"stream": "s", "events": [message("k1", "The demo is tomorrow", occurredAt="2026-06-02T23:30:00Z")]},
    )
    run_structure(handler_env, take_job_messages(handler_env, {reply.body["jobId"]}), as_deployed=True)
    job = get_job(project, reply.body["jobId"]).body
    assert job["status"] == "done"
    contents = [get_memory(project, m).body["content"] for m in job["memoryIds"]]
    assert any("June 4, 2026" in c for c in contents), contents  # Tokyo: already June 3 at 23:30Z


@pytest.mark.parametrize("kind", ["message", "file"])
def test_given_an_event_at_the_size_limit_then_it_is_structured_and_nothing_is_lost(
    handler_env: Any, kind: str
) -> None:
    # An event near the 262,144-byte payload limit: its text is on the provisional memory, and the
    # plan stored beside it must not push that item past DynamoDB's 400 KB.
    sentence = "The quarterly archive holds report number {n} for the finance team. "
    text = "".join(sentence.format(n=n) for n in range(3_600))[:250_000]
    event = (
        message("big", text)
        if kind == "message"
        else {"idempotencyKey": "big", "kind": "file", "payload": {"path": "archive.txt", "content": text}}
    )
    project = new_project()
    reply = remember(project, {"stream": "s", "events": [event]})
    assert reply.status == 202, reply.body

    outcome = run_structure(
        handler_env, take_job_messages(handler_env, {reply.body["jobId"]}), as_deployed=True
    )

    assert outcome == {"batchItemFailures": []}
    job = get_job(project, reply.body["jobId"]).body
    assert job["status"] == "done"
    contents = [get_memory(project, m).body["content"] for m in job["memoryIds"]]
    assert sum(len(c) for c in contents) >= len(text.strip()) - 1_000  # every statement kept
    assert contents[-1].endswith(text.strip()[-200:])


def test_given_a_replayed_key_after_structuring_then_its_memory_is_shown_as_it_is_now(
    handler_env: Any,
) -> None:
    project = new_project()
    body = {"stream": "s", "events": [message("k1", "The release target is July 13")]}
    first = remember(project, body)
    assert first.body["memories"][0]["status"] == "provisional"
    run_structure(handler_env, take_job_messages(handler_env, {first.body["jobId"]}), as_deployed=True)

    replay = remember(project, body)

    assert replay.body["events"][0]["replayed"] is True
    (shown,) = replay.body["memories"]
    assert shown["id"] == first.body["memories"][0]["id"]
    assert shown["status"] == get_memory(project, shown["id"]).body["status"] == "replaced"


class ForgottenWhileStaged(DynamoStructuringStore):
    """The DynamoDB store, with the event forgotten (through the forget route) right after its
    memories are staged: the commit's own condition is then all that stands in the way."""

    def __init__(self, stack: Any, project: str, stream: str) -> None:
        super().__init__(stack.dynamodb, stack.tables["MemoriesTable"], stack.tables["TermIndexTable"])
        self._forget: dict[str, str] | None = {"project": project, "stream": stream}

    def stage(self, memory: MemoryRecord) -> bool:
        staged = super().stage(memory)
        if self._forget is not None:
            forget, self._forget = self._forget, None
            reply = call(
                "forget",
                "POST",
                "/v1/forget",
                body={"stream": forget["stream"], "reason": "erase"},
                context=project_context(forget["project"]),
            )
            assert reply.status == 200, reply.body
        return staged


def test_given_a_forget_between_staging_and_commit_then_the_commit_is_refused_on_dynamodb(
    handler_env: Any,
) -> None:
    project = ProjectId(new_project())
    reply = remember(
        project, {"stream": "chat-1", "events": [message("k1", "My bike lock is Snarkish 5150")]}
    )
    provisional_id = reply.body["memories"][0]["id"]
    store = ForgottenWhileStaged(handler_env, project, "chat-1")
    _, _, jobs = stores(handler_env)
    service = StructuringService(
        DynamoEventStore(
            handler_env.dynamodb, handler_env.tables["EventsTable"], handler_env.tables["IdempotencyTable"]
        ),
        store,
        DynamoTermIndex(handler_env.dynamodb, handler_env.tables["TermIndexTable"]),
        RuleStructurer(),
    )

    stats = service.structure_job(project, reply.body["jobId"], jobs)

    assert stats.refused == 1
    assert stats.memories == 0
    assert get_memory(project, provisional_id).body["status"] == "tombstoned"  # not resurrected as replaced
    assert get_memory(project, f"{provisional_id}-1").body["status"] == "tombstoned"  # staged, abandoned
    assert recall_ids(project, "Snarkish bike lock") == []


class CommitTogether(DynamoStructuringStore):
    """The DynamoDB store, whose first commit waits until the other racer's first commit comes:
    both resolved their links against the same state, so exactly one commit can win."""

    def __init__(self, stack: Any, barrier: threading.Barrier) -> None:
        super().__init__(stack.dynamodb, stack.tables["MemoriesTable"], stack.tables["TermIndexTable"])
        self._barrier: threading.Barrier | None = barrier

    def commit(self, *args: Any, **kwargs: Any) -> Any:
        if self._barrier is not None:
            barrier, self._barrier = self._barrier, None
            barrier.wait(timeout=DEADLINE_SECONDS)
        return super().commit(*args, **kwargs)


def test_given_two_superseders_committing_at_once_then_one_wins_and_the_other_resolves_again(
    handler_env: Any,
) -> None:
    project = ProjectId(new_project())
    _, memories, _ = stores(handler_env)
    original, racers = original_and_racers(
        handler_env,
        project,
        "The offsite is in Lisbon",
        ["The offsite is in Porto", "The offsite is in Madrid"],
    )
    barrier = threading.Barrier(2)

    def race(reply: Reply) -> Any:
        client, tables = handler_env.dynamodb, handler_env.tables
        racer = StructuringService(
            DynamoEventStore(client, tables["EventsTable"], tables["IdempotencyTable"]),
            CommitTogether(handler_env, barrier),
            DynamoTermIndex(client, tables["TermIndexTable"]),
            ScriptedStructurer(),
        )
        return racer.structure_job(project, reply.body["jobId"], DynamoJobStore(client, tables["JobsTable"]))

    with ThreadPoolExecutor(2) as pool:
        stats = [f.result() for f in [pool.submit(race, r) for r in racers]]

    assert sum(s.conflicts for s in stats) == 1  # both tried at once: the condition refused exactly one
    old = memories.get(project, original)
    porto, madrid = (memories.get(project, f"{r.body['memories'][0]['id']}-1") for r in racers)
    assert old is not None
    assert porto is not None
    assert madrid is not None
    assert old.status == "superseded"
    assert len(old.superseded_by) == 1  # retired exactly once
    assert madrid.status == "active"
    assert porto.status == "superseded"


def test_given_a_cancel_then_validity_ends_at_it_links_run_both_ways_and_the_past_still_sees_it(
    handler_env: Any,
) -> None:
    project = ProjectId(new_project())
    service, _, jobs = stores(handler_env)
    first = remember(
        project,
        {
            "stream": "s",
            "events": [message("k1", "Board review on June 9 at 3pm", occurredAt="2026-06-01T09:00:00Z")],
        },
    )
    service.structure_job(project, first.body["jobId"], jobs)
    original = f"{first.body['memories'][0]['id']}-1"
    cancel = remember(
        project,
        {
            "stream": "s",
            "events": [
                message("k2", "Board review is off", occurredAt="2026-06-02T09:00:00Z", cancels=[original])
            ],
        },
    )
    service.structure_job(project, cancel.body["jobId"], jobs)
    canceller = f"{cancel.body['memories'][0]['id']}-1"

    old, new = get_memory(project, original).body, get_memory(project, canceller).body
    assert old["status"] == "canceled"
    assert old["validTo"] == new["validFrom"] == "2026-06-02T09:00:00.000Z"
    assert old["supersededBy"] == [canceller]
    assert new["supersedes"] == [original]
    before = call(
        "recall",
        "POST",
        "/v1/recall",
        body={"question": "When is the board review?", "asOf": "2026-06-01T12:00:00Z"},
        context=project_context(project),
    )
    assert original in [item["memoryId"] for item in before.body["items"]]  # valid then
    assert original not in recall_ids(project, "When is the board review?")  # not now
