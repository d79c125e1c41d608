"""Fault injection on the real emulator client (issue #20, item 4): a botocore ``before-call`` hook on
the very clients the handlers use (tests/fixtures/faults.py) throttles, cancels, loses or crashes
chosen calls of remember, structuring, forget and the purge, SQS sends after a commit, the
webhook dispatch's writes after a delivery attempt, and creates (projects, keys, webhooks, test
events) whose commit succeeded but whose answer was lost and retried by the SDK.

For every fault: no acknowledged event is lost (a 2xx remember's events are readable and chained),
no memory is made twice (recall returns no duplicate), and once the fault clears, the recovery the
design promises (the client's retry with the same keys, the sweeper, the redelivered message, the
purge's next run, the webhook relay's schedule) brings the project to exactly the state a fault-free
run reaches: every item of every table, ids and timestamps aside (``state``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
import subprocess
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from kaibo_core.adapters import aws
from kaibo_core.adapters.dynamodb_forget import DynamoForgetStore
from kaibo_core.adapters.dynamodb_ledger import DynamoLedgerStore
from kaibo_core.adapters.dynamodb_structuring import DynamoStructuringStore
from kaibo_core.adapters.dynamodb_webhooks import DynamoWebhookStore
from kaibo_core.adapters.sqs_webhooks import SqsWebhookQueue
from kaibo_core.core import ids
from kaibo_core.core.chain import ChainVerifier
from kaibo_core.core.clock import format_instant, instant_ms, utc_now
from kaibo_core.core.forgetting import unlocated_placeholder
from kaibo_core.core.indexing import decode_posting
from kaibo_core.core.ledger import LedgerEntry
from kaibo_core.core.locating import LOCATE_READS_PER_RUN, EventsFound, StreamNames
from kaibo_core.core.models.jobs import MAX_RECEIVE_COUNT
from kaibo_core.core.models.memories import MemoryRecord
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.text import analyze
from kaibo_core.core.webhooks import RETRY_SCHEDULE_SECONDS, Delivery, encode_message
from kaibo_core.runtime import wiring
from kaibo_core.runtime.settings import get_settings
from kaibo_core.services.purging import Purger, StreamSearch
from kaibo_core.services.webhook_dispatch import WebhookDispatcher
from kaibo_local.gateway import LocalGateway
from kaibo_local.http_front import HttpFront
from kaibo_local.template import create_tables, load_template
from kaibo_local.workers import create_queues, sqs_event
from tests.conftest import AwsStack, emulator_client, scan_all
from tests.fixtures.faults import Crash, Fault, FaultInjector, Kind, both, mentions, quiesce_io_pool, touches
from tests.integration.api import ADMIN_CONTEXT, FakeLambdaContext, Reply, call, get_job, handler_module
from tests.integration.iam_calls import checked_invocation
from tests.integration.test_forget_api import SCHEDULED_EVENT, forget, forget_now, ledger, receipt
from tests.integration.test_keys_and_authorizer import add_key, authorize, create_project
from tests.integration.test_local_lifecycle import run_kaibo_cli
from tests.integration.test_recall_api import get_memory, recall
from tests.integration.test_remember_api import events, message, new_project, remember
from tests.integration.test_structure_metrics import published_metrics
from tests.integration.test_structuring_api import run_structure, take_job_messages
from tests.integration.test_webhooks_api import Receiver, drain, hooks, pump, subscribe
from tools.repair_index import STOPPED_EXIT
from tools.repair_index import main as repair_main
from tools.requeue_unlocated import main as requeue_unlocated_main

#: One job of two events; the second retires the first's memory (a link, so a commit with a retire).
BATCH = [
    ("k1", "The release target is July 13.", "2025-01-06T09:00:00Z"),
    ("k2", "Move the release target from July 13 to July 17.", "2025-01-07T09:00:00Z"),
]
#: A second job (another remember) for batches of two messages.
LATER = [("k3", "Dana prefers green tea in the morning.", "2025-01-08T09:00:00Z")]
STREAM = "chat"


# -- the stack: tables and queues of each test alone ---------------------------------------------------


@pytest.fixture
def stack(handler_env: AwsStack, monkeypatch: pytest.MonkeyPatch) -> AwsStack:
    """Tables and queues of this test alone (the sweeper, the purge and the relay read every
    project's work), webhooks allowed to a receiver on 127.0.0.1."""
    suffix = secrets.token_hex(4)
    template = load_template()
    own = replace(
        handler_env,
        tables=create_tables(handler_env.dynamodb, template, suffix),
        queues=create_queues(handler_env.sqs, template, suffix),
    )
    for name, value in own.function_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("KAIBO_WEBHOOKS_ALLOW_LOCAL", "1")
    monkeypatch.setenv("KAIBO_WEBHOOK_RETRY_SCALE", "0.0001")
    wiring.reset()
    return own


@dataclass
class Faults:
    dynamodb: FaultInjector
    sqs: FaultInjector


@pytest.fixture
def faults(stack: AwsStack) -> Iterator[Faults]:
    """Fault hooks on the container's own clients (the ones every handler and wired service use);
    removed after the test, whatever happens."""
    hooked = Faults(FaultInjector(wiring.dynamodb(), stack.dynamodb), FaultInjector(wiring.sqs(), stack.sqs))
    yield hooked
    hooked.dynamodb.remove()
    hooked.sqs.remove()


# -- the flows --------------------------------------------------------------------------------------------


def body_of(batch: list[tuple[str, str, str]]) -> dict[str, Any]:
    return {"stream": STREAM, "events": [message(k, text, occurredAt=at) for k, text, at in batch]}


def remember_ok(project: str, batch: list[tuple[str, str, str]] = BATCH) -> Reply:
    reply = remember(project, body_of(batch))
    assert reply.status == 202, reply.body
    return reply


def structure_until_done(stack: AwsStack, messages: list[dict[str, Any]], limit: int = 4) -> None:
    """Run the structure function on ``messages`` as SQS would: again while it reports failures,
    at most ``limit`` times."""
    for _ in range(limit):
        result = run_structure(stack, messages, as_deployed=True)
        failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
        messages = [m for m in messages if m["MessageId"] in failed]
        if not messages:
            return
    raise AssertionError(f"still failing after {limit} deliveries")


def remembered_and_structured(stack: AwsStack, project: str) -> list[Reply]:
    """The fault-free flow: the batch, structured."""
    reply = remember_ok(project)
    structure_until_done(stack, take_job_messages(stack, {reply.body["jobId"]}))
    return [reply]


def sweep_later(minutes: int = 5) -> int:
    """The sweeper's run ``minutes`` from now (every job unfinished is due); messages sent."""
    result = wiring.sweeper().sweep(
        now=utc_now() + timedelta(minutes=minutes),
        sweep_after=timedelta(seconds=get_settings().sweep_after_seconds),
        limit=500,
        has_time=lambda: True,
    )
    return result.sent


def purge_later(minutes: int = 2, locate_reads_per_run: int = LOCATE_READS_PER_RUN) -> dict[str, Any]:
    """The purge function's run ``minutes`` from now (a forget unapplied for a minute is finished),
    checked against its role in template.yaml."""
    settings = get_settings()
    purger = Purger(
        DynamoLedgerStore(wiring.dynamodb(), settings.ledger_table),
        DynamoForgetStore(
            wiring.dynamodb(), settings.memories_table, settings.index_table, settings.events_table
        ),
        lambda: utc_now() + timedelta(minutes=minutes),
        locate_reads_per_run=locate_reads_per_run,
    )
    handler = handler_module("purge").lambda_handler
    result: dict[str, Any] = checked_invocation(
        "purge", handler, SCHEDULED_EVENT, FakeLambdaContext(), purger=purger
    )
    return result


def queued_job_ids(stack: AwsStack) -> list[str]:
    """The job ids of the messages on the structuring queue (left there, visible)."""
    url = stack.queues["StructuringQueue"]
    received = stack.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    return sorted(json.loads(m["Body"])["jobId"] for m in received.get("Messages", []))


def take_job_messages_all(stack: AwsStack, job_id: str) -> list[dict[str, Any]]:
    """Every message of ``job_id`` on the structuring queue (duplicates too), taken off it."""
    url = stack.queues["StructuringQueue"]
    taken: dict[str, dict[str, Any]] = {}
    while batch := stack.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        for m in batch:
            stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
            if json.loads(m["Body"])["jobId"] == job_id:
                taken[m["MessageId"]] = m
    return list(taken.values())


# -- the checks ----------------------------------------------------------------------------------------


def assert_acknowledged_events_kept(project: str, replies: list[Reply]) -> None:
    """Every event a 2xx remember acknowledged is readable, once, and the stream's chain verifies."""
    served = events(project, STREAM).body["events"]
    acknowledged = {e["id"] for reply in replies for e in reply.body["events"]}
    assert acknowledged <= {e["id"] for e in served}
    assert len({e["idempotencyKey"] for e in served}) == len(served)  # no key twice
    verifier = ChainVerifier(STREAM)
    for event in served:
        assert verifier.feed(event) is None
    assert verifier.finish() is None


def recalled(project: str, question: str) -> list[tuple[str, str]]:
    reply = recall(project, {"question": question, "includeSuperseded": True})
    assert reply.status == 200, reply.body
    return [(item["memoryId"], item["text"]) for item in reply.body["items"]]


def assert_recall_as_without_faults(reference: str, project: str, question: str = "release target") -> None:
    """Recall finds no memory twice, and the same texts as in the fault-free run."""
    found, expected = recalled(project, question), recalled(reference, question)
    assert found, "recall found nothing"
    ids = [memory_id for memory_id, _ in found]
    assert len(ids) == len(set(ids))
    assert sorted(text for _, text in found) == sorted(text for _, text in expected)


_ID = re.compile(r"\b(evt|mem|job|rcpt|wh)_[0-9A-Za-z]+")
#: Attributes that differ between two runs of the same flow by construction (clocks, random ids
#: and salts, the hashes over them, ciphertexts, counters of attempts): compared as present or not.
VOLATILE = frozenset(
    {
        "createdAt",
        "updatedAt",
        "receivedAt",
        "hash",
        "prevHash",
        "headHash",
        "payloadDigest",
        "salt",
        "tombstonedAt",
        "purgeAfter",
        "purgedAt",
        "reasonDigest",
        "attempts",
        "attempt",
        "expiresAt",
        "relaySk",
        "applySk",
        "dueSk",
        "pendingPk",
        "pendingSk",
        "secrets",
        "claimedBy",
        "requestDigest",
        "reasonSalt",
        "reasonSaltCiphertext",
        "writtenAt",
        "lastTestAt",
    }
)


def _labels(project: str, raw: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    """A name for every id of the project that is the same in any run of the same flow: events by
    idempotency key, memories by their event's key, jobs by their events, receipts by ledger seq."""
    labels: dict[str, str] = {project: "PROJECT"}
    for item in raw["EventsTable"]:
        if "id" in item:
            key = item["idempotencyKey"]["S"]
            suffix = item["id"]["S"].partition("_")[2]
            labels[item["id"]["S"]] = f"evt<{key}>"
            labels[f"mem_{suffix}"] = f"mem<{key}>"
    for item in raw["JobsTable"]:
        keys = "+".join(labels.get(e["M"]["eventId"]["S"], "?") for e in item["events"]["L"])
        labels[item["id"]["S"]] = f"job<{keys}>"
    for item in raw["LedgerTable"]:
        if "ledgerSeq" in item:
            labels[item["id"]["S"]] = f"rcpt<{item['ledgerSeq']['N']}>"
    for item in raw["WebhooksTable"]:
        if item["sk"]["S"].startswith("wh#"):
            labels[item["id"]["S"]] = "wh<1>"
    return labels


#: DynamoDB's type tags: a value's name is the attribute's that holds it.
_TAGS = frozenset({"S", "N", "L", "M", "SS", "NS", "BOOL", "NULL"})
#: Lists stored sorted by id (a ledger entry's, an outbox event's): ids differ between runs.
_ID_SETS = frozenset({"memoryIds", "eventIds", "eventLocations", "memories"})


def _normal(value: Any, name: str, rename: Callable[[str], str]) -> Any:
    if name in VOLATILE:
        return "*"
    if isinstance(value, dict):
        if set(value) == {"S"} and name == "data":  # an outbox event's data: JSON text of ids
            return _normal(json.loads(value["S"]), "", rename)
        return {k: _normal(v, name if k in _TAGS else k, rename) for k, v in sorted(value.items())}
    if isinstance(value, list):
        normal = [_normal(v, "", rename) for v in value]
        return sorted(normal, key=repr) if name in _ID_SETS else normal
    if isinstance(value, str):
        return rename(value)
    return value


def _counters_summed(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The term index with its sharded counters (document frequencies, corpus counts) summed per
    term: a memory's shard follows from its id, which differs from run to run."""
    kept: list[dict[str, Any]] = []
    sums: dict[str, dict[str, int]] = {}
    for item in items:
        pk, sk = item["pk"]["S"], item["sk"]["S"]
        if sk.startswith("~df#") or pk.endswith("#corpus"):
            counts = sums.setdefault(pk, {})
            for name in ("df", "docs", "terms"):
                if name in item:
                    counts[name] = counts.get(name, 0) + int(item[name]["N"])
        else:
            kept.append(item)
    for pk, counts in sums.items():
        kept.append({"pk": {"S": pk}, "sk": {"S": "summed"}, **{k: {"N": str(v)} for k, v in counts.items()}})
    return kept


def _project_items(stack: AwsStack, table: str, project: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    request: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": "begins_with(pk, :project)",
        "ExpressionAttributeValues": {":project": {"S": f"{project}#"}},
    }
    while True:
        page = stack.dynamodb.scan(**request)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            return items
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def state(stack: AwsStack, project: str) -> dict[str, list[str]]:
    """Every item of the project in every table, with ids named alike in any run of the same flow
    and the volatile attributes reduced to their presence (the webhook attempt log left out: one
    row per HTTP attempt, timed)."""
    raw = {
        name: [
            item
            for item in _project_items(stack, table, project)
            if not item.get("sk", {}).get("S", "").startswith("a#")
        ]
        for name, table in stack.tables.items()
    }
    raw["TermIndexTable"] = _counters_summed(raw["TermIndexTable"])
    labels = _labels(project, raw)

    def rename(text: str) -> str:
        text = text.replace(project, "PROJECT")
        return _ID.sub(lambda m: labels.get(m.group(0), m.group(0)), text)

    return {
        name: sorted(json.dumps(_normal(item, "", rename), sort_keys=True) for item in items)
        for name, items in raw.items()
        if items
    }


def state_difference(expected: dict[str, list[str]], found: dict[str, list[str]]) -> list[str]:
    """What ``found`` lacks (``-``) and has more (``+``) than ``expected``, item by item."""
    lines: list[str] = []
    for table in sorted(set(expected) | set(found)):
        want, have = Counter(expected.get(table, [])), Counter(found.get(table, []))
        lines += [f"{table} - {item}" for item in sorted((want - have).elements())]
        lines += [f"{table} + {item}" for item in sorted((have - want).elements())]
    return lines


def assert_same_state(stack: AwsStack, reference: str, project: str) -> None:
    difference = state_difference(state(stack, reference), state(stack, project))
    assert not difference, "\n".join(["the state differs from the fault-free run's:", *difference])


def assert_converged_to_the_fault_free_run(
    stack: AwsStack, reference: str, project: str, replies: list[Reply]
) -> None:
    """Where a flow that met a fault ends once repaired: every event it acknowledged kept, recall
    answering as in the fault-free run ``reference``, and the same stored state."""
    assert_acknowledged_events_kept(project, replies)
    assert_recall_as_without_faults(reference, project)
    assert_same_state(stack, reference, project)


def test_the_state_comparison_holds_for_two_fault_free_runs_and_sees_a_difference(stack: AwsStack) -> None:
    """The yardstick of every test below: two runs of one flow compare equal, ids and clocks aside,
    and a run that stopped short (its job never structured) does not."""
    first, second, short = new_project(), new_project(), new_project()
    remembered_and_structured(stack, first)
    remembered_and_structured(stack, second)
    remember_ok(short)

    assert state(stack, first)["MemoriesTable"]
    assert state_difference(state(stack, first), state(stack, second)) == []
    assert state_difference(state(stack, first), state(stack, short))


# -- 1. remember: the event transaction ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "error"),
    [("throughput", "ProvisionedThroughputExceededException"), ("throttling", "ThrottlingException")],
)
def test_a_refused_event_transaction_leaves_no_trace_but_its_log_line_and_the_retry_succeeds_once(
    stack: AwsStack, faults: Faults, caplog: pytest.LogCaptureFixture, kind: Any, error: str
) -> None:
    reference = new_project()
    remembered_and_structured(stack, reference)
    project = new_project()
    fault = faults.dynamodb.add(
        Fault("TransactWriteItems", kind, when=both(mentions(project), touches(stack.tables["EventsTable"])))
    )

    with caplog.at_level(logging.INFO):
        failed = remember(project, body_of(BATCH))

    assert fault.fired == ["TransactWriteItems"]
    assert failed.status == 500, failed.body
    assert failed.body["error"]["code"] == "internal_error"
    assert state(stack, project) == {}  # nothing of it: no event, key, job or memory
    assert queued_job_ids(stack) == []
    (line,) = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert (line.getMessage(), line.__dict__["error"]) == ("unhandled error", error)
    assert "release target" not in caplog.text  # the class only, never the words
    retried = remember_ok(project)  # the fault has cleared: the same keys
    assert [e["replayed"] for e in retried.body["events"]] == [False, False]
    structure_until_done(stack, take_job_messages(stack, {retried.body["jobId"]}))
    assert_converged_to_the_fault_free_run(stack, reference, project, [retried])


@pytest.mark.parametrize("conflict_at", [0, 4], ids=["on-a-key", "on-the-head"])
def test_a_conflicting_event_transaction_is_retried_within_the_request(
    stack: AwsStack, faults: Faults, conflict_at: int
) -> None:
    """DynamoDB cancels a transaction with TransactionConflict when another one holds one of its
    items (a concurrent remember on the stream's head, or on the same key): a lost race, retried
    like a moved head, not a 500."""
    reference = new_project()
    remembered_and_structured(stack, reference)
    project = new_project()
    fault = faults.dynamodb.add(
        Fault(
            "TransactWriteItems",
            "conflict",
            conflict_at=conflict_at,  # actions: key, key, event, event, head, job
            when=both(mentions(project), touches(stack.tables["EventsTable"])),
        )
    )

    reply = remember(project, body_of(BATCH))

    assert fault.fired == ["TransactWriteItems"]
    assert reply.status == 202, reply.body
    assert [e["replayed"] for e in reply.body["events"]] == [False, False]
    structure_until_done(stack, take_job_messages(stack, {reply.body["jobId"]}))
    assert_converged_to_the_fault_free_run(stack, reference, project, [reply])


def test_an_event_transaction_that_keeps_conflicting_answers_429_and_writes_nothing(
    stack: AwsStack, faults: Faults
) -> None:
    reference = new_project()
    remembered_and_structured(stack, reference)
    project = new_project()
    faults.dynamodb.add(
        Fault(
            "TransactWriteItems",
            "conflict",
            times=1000,
            when=both(mentions(project), touches(stack.tables["EventsTable"])),
        )
    )

    busy = remember(project, body_of(BATCH))

    assert busy.status == 429, busy.body
    assert busy.body["error"]["code"] == "stream_busy"
    assert busy.headers.get("Retry-After")
    assert state(stack, project) == {}
    faults.dynamodb.clear()
    retried = remember_ok(project)
    assert [e["replayed"] for e in retried.body["events"]] == [False, False]
    structure_until_done(stack, take_job_messages(stack, {retried.body["jobId"]}))
    assert_acknowledged_events_kept(project, [retried])
    assert_same_state(stack, reference, project)


def test_an_event_transaction_whose_answer_was_lost_is_replayed_once_and_swept(
    stack: AwsStack, faults: Faults
) -> None:
    """The transaction committed but its answer never came (the SDK gave up): remember answers 500
    with the events already in. The retry with the same keys replays them (nothing twice), and the
    job, whose message nobody sent, is re-queued by the sweeper."""
    reference = new_project()
    remembered_and_structured(stack, reference)
    project = new_project()
    faults.dynamodb.add(
        Fault(
            "TransactWriteItems", "lost", when=both(mentions(project), touches(stack.tables["EventsTable"]))
        )
    )

    failed = remember(project, body_of(BATCH))
    retried = remember_ok(project)

    assert failed.status == 500, failed.body
    assert [e["replayed"] for e in retried.body["events"]] == [True, True]
    assert queued_job_ids(stack) == []  # the first call died before sending it, the replay sends none
    job_id = retried.body["jobId"]
    assert get_job(project, job_id).body["status"] == "queued"
    assert sweep_later() == 1
    structure_until_done(stack, take_job_messages(stack, {job_id}))
    assert_converged_to_the_fault_free_run(stack, reference, project, [retried])


def test_an_event_transaction_committed_and_resent_by_the_sdk_answers_as_the_first_write(
    stack: AwsStack, faults: Faults
) -> None:
    """The transaction committed, its answer was lost, and the SDK's own retry sent it again: the
    re-sent transaction finds the keys taken, by this very request's events. remember answers as
    the first write it is (nothing replayed) and queues the job's message at once, instead of
    leaving the job to the sweeper. A later request under the same keys is a replay as ever."""
    reference = new_project()
    remembered_and_structured(stack, reference)
    project = new_project()
    fault = faults.dynamodb.add(
        Fault(
            "TransactWriteItems",
            "lost_retried",
            when=both(mentions(project), touches(stack.tables["EventsTable"])),
        )
    )

    reply = remember_ok(project)

    assert fault.fired == ["TransactWriteItems"]
    assert [e["replayed"] for e in reply.body["events"]] == [False, False]
    assert [m["status"] for m in reply.body["memories"]] == ["provisional", "provisional"]
    job_id = reply.body["jobId"]
    assert queued_job_ids(stack) == [job_id]
    replay = remember_ok(project)
    assert [e["replayed"] for e in replay.body["events"]] == [True, True]
    assert [e["id"] for e in replay.body["events"]] == [e["id"] for e in reply.body["events"]]
    assert replay.body["jobId"] == job_id
    structure_until_done(stack, take_job_messages(stack, {job_id}))
    assert queued_job_ids(stack) == []  # the replay sent none
    assert_converged_to_the_fault_free_run(stack, reference, project, [reply])


# -- 1. remember: the provisional index (after the commit) ----------------------------------------------


@pytest.mark.parametrize(
    ("kind", "nth", "times"),
    [
        ("throughput", 1, 1),  # the first chunk of the first memory
        ("throttling", 1, 1000),  # every indexing transaction
        ("conflict", 1, 3),  # retried by the store itself
        ("lost", 2, 1),  # a chunk applied, its answer lost
    ],
)
def test_a_failing_provisional_index_still_acknowledges_and_structuring_completes_it(
    stack: AwsStack, faults: Faults, kind: Any, nth: int, times: int
) -> None:
    reference = new_project()
    remembered_and_structured(stack, reference)
    project = new_project()
    fault = faults.dynamodb.add(
        Fault(
            "TransactWriteItems",
            kind,
            nth=nth,
            times=times,
            when=both(mentions(project), touches(stack.tables["TermIndexTable"])),
        )
    )

    reply = remember(project, body_of(BATCH))
    faults.dynamodb.clear()

    assert fault.fired
    assert reply.status == 202, reply.body  # acknowledged: the events are committed
    assert [e["replayed"] for e in reply.body["events"]] == [False, False]
    structure_until_done(stack, take_job_messages(stack, {reply.body["jobId"]}))
    assert_converged_to_the_fault_free_run(stack, reference, project, [reply])


def test_a_replay_after_a_failed_provisional_index_completes_it(stack: AwsStack, faults: Faults) -> None:
    """The client retries a 202 it never saw: the replay indexes what the first call could not."""
    reference = new_project()
    reference_reply = remember_ok(reference)
    project = new_project()
    faults.dynamodb.add(
        Fault(
            "TransactWriteItems",
            "throughput",
            times=1000,
            when=both(mentions(project), touches(stack.tables["TermIndexTable"])),
        )
    )
    first = remember_ok(project)
    assert first.body["memories"] == []  # none indexed
    faults.dynamodb.clear()

    replay = remember_ok(project)

    assert [e["replayed"] for e in replay.body["events"]] == [True, True]
    assert [m["content"] for m in replay.body["memories"]] == [
        m["content"] for m in reference_reply.body["memories"]
    ]
    take_job_messages(stack, {first.body["jobId"], reference_reply.body["jobId"]})  # left unstructured
    assert_recall_as_without_faults(reference, project)
    assert_same_state(stack, reference, project)


# -- 2. remember: the job message after the commit ---------------------------------------------------------


@pytest.mark.parametrize("kind", ["unavailable", "lost"])
def test_a_job_message_not_sent_after_the_commit_is_requeued_by_the_sweeper(
    stack: AwsStack, faults: Faults, kind: Any
) -> None:
    """``unavailable``: SQS refused the message; ``lost``: SQS took it but the answer was lost, so
    the job has a message AND the sweeper sends another: structuring it twice changes nothing."""
    reference = new_project()
    remembered_and_structured(stack, reference)
    project = new_project()
    fault = faults.sqs.add(Fault("SendMessage", kind, when=mentions(project)))

    reply = remember(project, body_of(BATCH))

    assert fault.fired == ["SendMessage"]
    assert reply.status == 202, reply.body  # acknowledged all the same
    job_id = reply.body["jobId"]
    assert queued_job_ids(stack) == ([job_id] if kind == "lost" else [])
    assert get_job(project, job_id).body["status"] == "queued"
    assert sweep_later() == 1
    assert queued_job_ids(stack) == [job_id] * (2 if kind == "lost" else 1)
    for delivered in take_job_messages_all(stack, job_id):
        structure_until_done(stack, [delivered])
    assert get_job(project, job_id).body["status"] == "done"
    assert sweep_later(minutes=60) == 0  # done: off the sweeper's list
    assert_converged_to_the_fault_free_run(stack, reference, project, [reply])


def test_a_sweep_whose_messages_were_refused_requeues_the_job_at_its_next_turn(
    stack: AwsStack, faults: Faults
) -> None:
    """The job message was lost after the commit, and the sweeper's own send fails too: the job
    was already moved on in the sweeper's list (claimed), so it is re-queued at its next turn."""
    reference = new_project()
    remembered_and_structured(stack, reference)
    project = new_project()
    faults.sqs.add(Fault("SendMessage", "unavailable", when=mentions(project)))
    faults.sqs.add(Fault("SendMessageBatch", "unavailable", when=mentions(project)))
    reply = remember_ok(project)

    with pytest.raises(ClientError):
        sweep_later(minutes=5)

    assert queued_job_ids(stack) == []
    assert sweep_later(minutes=5) == 0  # claimed by the run that failed: not again at once
    assert sweep_later(minutes=11) == 1  # its next turn: its age again after the last
    structure_until_done(stack, take_job_messages(stack, {reply.body["jobId"]}))
    assert_converged_to_the_fault_free_run(stack, reference, project, [reply])


# -- 1. and 3. structuring: the commit, and a function dying mid-batch ------------------------------------


def structuring_step(
    stack: AwsStack, project: str, step: str
) -> tuple[str, Callable[[dict[str, Any]], bool]]:
    """The operation and the requests of one step of structuring an event (or its job)."""
    return {
        "plan claim": ("UpdateItem", mentions(project, "SET #plan = :plan")),
        "stage": (
            "TransactWriteItems",
            both(mentions(project, '"staged"'), touches(stack.tables["MemoriesTable"])),
        ),
        "commit": ("TransactWriteItems", mentions(project, '":replaced"')),
        "postings follow": ("TransactWriteItems", mentions(project, "SET unindexed = :yes")),
        # Only the finish sets memoryIds: the job's start and fail updates name ":done" too (in
        # their conditions), and the first of those is the start, before any event is structured.
        "job finished": ("UpdateItem", mentions(project, "memoryIds = :ids")),
    }[step]


@pytest.mark.parametrize(
    ("step", "kind", "nth", "times"),
    [
        ("plan claim", "throttling", 2, 1),
        ("stage", "throughput", 1, 1),
        ("commit", "throughput", 1, 1),  # the first event's: nothing of the job committed yet
        ("commit", "throttling", 2, 1),  # the second's: the first event is committed, the job fails
        ("commit", "conflict", 1, 2),  # retried by the store itself
        ("commit", "lost", 1, 1),  # the first event's commit applied, its answer lost
        ("commit", "lost", 2, 1),  # the second's (the one that retires a memory)
        ("postings follow", "throughput", 1, 1),  # committed, the replaced copy still indexed
        ("job finished", "throttling", 1, 1),  # every event committed, the job not marked done
    ],
)
def test_a_failing_structuring_step_converges_when_the_message_is_redelivered(  # noqa: PLR0917 - the case
    stack: AwsStack, faults: Faults, step: str, kind: Any, nth: int, times: int
) -> None:
    """An exception after some events of the job were committed: the message is reported failed,
    SQS delivers it again, and the redelivery ends in the fault-free state."""
    reference = new_project()
    remembered_and_structured(stack, reference)
    project = new_project()
    reply = remember_ok(project)
    messages = take_job_messages(stack, {reply.body["jobId"]})
    operation, when = structuring_step(stack, project, step)
    fault = faults.dynamodb.add(Fault(operation, kind, nth=nth, times=times, when=when))

    first = run_structure(stack, messages, as_deployed=True)

    assert fault.fired == [operation] * times
    failed = [f["itemIdentifier"] for f in first["batchItemFailures"]]
    assert failed == ([] if kind == "conflict" else [messages[0]["MessageId"]])
    structure_until_done(stack, messages)  # SQS delivers it again
    assert get_job(project, reply.body["jobId"]).body["status"] == "done"
    assert_converged_to_the_fault_free_run(stack, reference, project, [reply])


def two_jobs(stack: AwsStack, project: str) -> tuple[list[Reply], list[dict[str, Any]]]:
    """Two remembers (two jobs), their messages as one batch of the structure function."""
    replies = [remember_ok(project, BATCH), remember_ok(project, LATER)]
    messages = take_job_messages(stack, {r.body["jobId"] for r in replies})
    order = [r.body["jobId"] for r in replies]
    return replies, sorted(messages, key=lambda m: order.index(json.loads(m["Body"])["jobId"]))


@pytest.mark.parametrize("kind", ["crash", "crash_after"])
def test_a_structure_function_dying_at_any_write_converges_when_the_batch_is_redelivered(
    stack: AwsStack, faults: Faults, kind: Any
) -> None:
    """The function dies (a timeout, out of memory) before, or just after, each of its writes in
    turn, in a batch of two jobs: SQS delivers the whole batch again, and the second delivery
    finishes it to exactly the fault-free state."""
    reference = new_project()
    _, batch = two_jobs(stack, reference)
    faults.dynamodb.clear()
    structure_until_done(stack, batch)
    writes = faults.dynamodb.writes()
    assert len(writes) > 10
    expected = state(stack, reference)

    for at in range(1, len(writes) + 1):
        project = new_project()
        replies, batch = two_jobs(stack, project)
        fault = faults.dynamodb.add(Fault("*", kind, nth=at, when=mentions(project)))
        with pytest.raises(Crash):
            run_structure(stack, batch, as_deployed=True)
        assert fault.fired == [writes[at - 1]], at
        faults.dynamodb.revive()  # the next delivery runs in a new process

        structure_until_done(stack, batch)

        for reply in replies:
            assert get_job(project, reply.body["jobId"]).body["status"] == "done", at
        assert_acknowledged_events_kept(project, replies)
        assert_recall_as_without_faults(reference, project)
        difference = state_difference(expected, state(stack, project))
        assert not difference, "\n".join([f"died at write {at} ({writes[at - 1]})", *difference])
        faults.dynamodb.clear()


# -- 4. structuring: a long outage, the dead-letter queue, a redrive --------------------------------------


def structuring_down(faults: Faults, project: str) -> Fault:
    """Every structuring commit of ``project`` refused (DynamoDB throttling it) until cleared."""
    return faults.dynamodb.add(
        Fault("TransactWriteItems", "throughput", times=10_000, when=mentions(project, '":replaced"'))
    )


def on_its_receive(message: dict[str, Any], count: int) -> dict[str, Any]:
    """``message`` as SQS hands it over on its ``count``-th receive."""
    return {**message, "Attributes": {"ApproximateReceiveCount": str(count)}}


def deliver_as_sqs(stack: AwsStack) -> list[str] | None:
    """One round of Lambda's SQS trigger on the structuring queue: receive (receive counts and
    all), run the structure function, delete what it did not report failed; those are visible
    again at once. The ids reported failed, or None if the receive brought nothing."""
    url = stack.queues["StructuringQueue"]
    messages = stack.sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0, AttributeNames=["All"]
    ).get("Messages", [])
    if not messages:
        return None
    result = run_structure(stack, messages, as_deployed=True)
    failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
    for m in messages:
        if m["MessageId"] not in failed:
            stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return sorted(failed)


def dead_letters(stack: AwsStack) -> list[dict[str, Any]]:
    """The structuring DLQ's messages, taken off it."""
    url = stack.queues["StructuringDeadLetterQueue"]
    taken = stack.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    for m in taken:
        stack.sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return taken


def redrive(stack: AwsStack, letters: list[dict[str, Any]]) -> None:
    """What ``aws sqs start-message-move-task --source-arn <DLQ arn>`` does (the emulator has no
    move task): each dead letter back on the structuring queue, as a new message."""
    for letter in letters:
        stack.sqs.send_message(QueueUrl=stack.queues["StructuringQueue"], MessageBody=letter["Body"])


def test_an_outage_outlasting_the_sweepers_requeues_never_fails_the_job_while_its_message_waits(
    stack: AwsStack, faults: Faults
) -> None:
    """Structuring is down for ~31 minutes. The job's message fails (it comes back after the
    visibility timeout, 30 minutes); the sweeper re-queues the job at 3, 7, 15 and 31 minutes and
    each of those messages fails once too. Five deliveries of five messages, none near the DLQ:
    the job is not failed, and the original's second receive, after the outage, structures it."""
    reference = new_project()
    remembered_and_structured(stack, reference)
    project = new_project()
    reply = remember_ok(project)
    job_id = reply.body["jobId"]
    outage = structuring_down(faults, project)
    (original,) = take_job_messages(stack, {job_id})
    assert run_structure(stack, [on_its_receive(original, 1)], as_deployed=True)["batchItemFailures"]
    for minutes in (3, 7, 15, 31):
        assert sweep_later(minutes=minutes) == 1, minutes
        (requeued,) = take_job_messages(stack, {job_id})
        failed = run_structure(stack, [on_its_receive(requeued, 1)], as_deployed=True)["batchItemFailures"]
        assert failed == [{"itemIdentifier": requeued["MessageId"]}], minutes
        assert get_job(project, job_id).body["status"] == "structuring", minutes
    assert outage.fired
    faults.dynamodb.clear()

    after = run_structure(stack, [on_its_receive(original, 2)], as_deployed=True)

    assert after == {"batchItemFailures": []}
    assert get_job(project, job_id).body["status"] == "done"
    assert sweep_later(minutes=600) == 0
    assert_converged_to_the_fault_free_run(stack, reference, project, [reply])


def test_a_job_failing_every_receive_reaches_the_dlq_failed_and_a_redrive_structures_it(
    stack: AwsStack, faults: Faults
) -> None:
    """Through the queue's own redrive policy: the message fails on each of its 5 receives; on the
    last, the job is marked failed and SQS moves the message to the DLQ (the alarm's metric). Once
    the outage is over, redriving the dead letter structures the job, as a fault-free run would."""
    reference = new_project()
    remembered_and_structured(stack, reference)
    project = new_project()
    reply = remember_ok(project)
    job_id = reply.body["jobId"]
    structuring_down(faults, project)
    statuses = []
    while (failed := deliver_as_sqs(stack)) is not None:
        assert len(failed) == 1
        statuses.append(get_job(project, job_id).body["status"])
    assert statuses == ["structuring"] * (MAX_RECEIVE_COUNT - 1) + ["failed"]
    error = get_job(project, job_id).body["error"]
    assert error == "structuring failed: ProvisionedThroughputExceededException"
    letters = dead_letters(stack)
    assert [json.loads(m["Body"])["jobId"] for m in letters] == [job_id]
    faults.dynamodb.clear()
    assert sweep_later(minutes=600) == 0  # failed: its dead letter is what retries it

    redrive(stack, letters)

    assert deliver_as_sqs(stack) == []
    job = get_job(project, job_id).body
    assert job["status"] == "done"
    assert "error" not in job
    assert deliver_as_sqs(stack) is None  # acknowledged: off the queue
    assert_converged_to_the_fault_free_run(stack, reference, project, [reply])


# -- 1. forget: the ledger append, the tombstones ------------------------------------------------------

FORGET = {"query": "release target", "reason": "the user asked to erase it"}


def forget_step(stack: AwsStack, project: str, step: str) -> tuple[str, Callable[[dict[str, Any]], bool]]:
    """The operation and the requests of one step of a forget."""
    return {
        "ledger append": (
            "TransactWriteItems",
            both(mentions(project), touches(stack.tables["LedgerTable"])),
        ),
        "tombstone": ("UpdateItem", mentions(project, '":tombstoned"')),
        "index removal": (
            "TransactWriteItems",
            both(mentions(project), touches(stack.tables["TermIndexTable"])),
        ),
        "mark applied": ("UpdateItem", mentions(project, "REMOVE applyPk")),
    }[step]


@pytest.mark.parametrize(
    ("step", "kind", "nth", "status", "recovery"),
    [
        ("ledger append", "throughput", 1, 500, "client retries"),
        ("ledger append", "throttling", 1, 500, "client retries"),
        ("ledger append", "conflict", 1, 200, "none"),
        ("ledger append", "lost", 1, 500, "purge applies"),
        ("tombstone", "throughput", 2, 500, "purge applies"),
        ("index removal", "throttling", 1, 500, "purge applies"),
        ("index removal", "throughput", 3, 500, "purge applies"),
        ("index removal", "conflict", 1, 200, "none"),
        ("mark applied", "throughput", 1, 500, "purge applies"),
    ],
)
def test_a_failing_forget_step_converges_by_the_retry_or_the_purge(  # noqa: PLR0917 - the case
    stack: AwsStack, faults: Faults, step: str, kind: Any, nth: int, status: int, recovery: str
) -> None:
    """Before the ledger entry, a failure writes nothing and the client's retry forgets once; after
    it, the erasure is owed: the purge's next run (a minute on) finishes the tombstones and the
    index removal of the forget that died."""
    reference = new_project()
    remembered_and_structured(stack, reference)
    assert forget(reference, FORGET).status == 200
    project = new_project()
    replies = remembered_and_structured(stack, project)
    before = state(stack, project)
    operation, when = forget_step(stack, project, step)
    fault = faults.dynamodb.add(Fault(operation, kind, nth=nth, when=when))

    reply = forget(project, FORGET)
    quiesce_io_pool()  # the request's other tombstones and removals, in flight when it failed, end

    assert fault.fired == [operation]
    assert reply.status == status, reply.body
    entries = ledger(project).body["entries"]
    if recovery == "client retries":
        assert entries == []
        assert state(stack, project) == before  # nothing of it
        assert forget(project, FORGET).status == 200
    elif recovery == "purge applies":
        assert len(entries) == 1  # the erasure is owed from here on
        assert purge_later()["applied"] == 1
    assert len(ledger(project).body["entries"]) == 1
    assert recalled(project, "release target") == []
    assert_acknowledged_events_kept(project, replies)
    assert_same_state(stack, reference, project)


def postings_of(stack: AwsStack, project: str) -> list[str]:
    """The project's postings (``pk|sk``), counters aside."""
    return sorted(
        f"{item['pk']['S']}|{item['sk']['S']}"
        for item in _project_items(stack, stack.tables["TermIndexTable"], project)
        if not item["sk"]["S"].startswith("~") and not item["pk"]["S"].endswith("#corpus")
    )


@pytest.mark.parametrize("times", [1, 1000], ids=["one-tombstone", "every-tombstone"])
def test_a_tombstone_retried_after_its_first_attempt_applied_still_leaves_the_index_at_once(
    stack: AwsStack, faults: Faults, times: int
) -> None:
    """The SDK retries a tombstone whose first attempt applied (its answer lost): the retry fails
    its condition on this very forget's tombstone, which is still this forget's to finish: the
    memory's postings and counts leave the index before forget answers, as without the retry."""
    reference = new_project()
    remembered_and_structured(stack, reference)
    assert forget(reference, FORGET).status == 200
    project = new_project()
    replies = remembered_and_structured(stack, project)
    assert postings_of(stack, project)
    fault = faults.dynamodb.add(
        Fault("UpdateItem", "lost_retried", times=times, when=mentions(project, '":tombstoned"'))
    )

    reply = forget(project, FORGET)

    assert fault.fired
    assert reply.status == 200, reply.body
    assert postings_of(stack, project) == []
    assert purge_later()["applied"] == 0  # marked applied, and nothing was left to apply
    assert recalled(project, "release target") == []
    assert_acknowledged_events_kept(project, replies)
    assert_same_state(stack, reference, project)


# -- 1. forget under an idempotency key: the client's retry converges, whatever failed ----------------

KEYED = {**FORGET, "idempotencyKey": "erase-1"}


def forget_or_crash(project: str, body: dict[str, Any], faults: Faults) -> Reply | None:
    """forget, as the client sees it: its answer, or None when the function died (then the next
    request runs in a new process)."""
    try:
        return forget(project, body)
    except Crash:
        faults.dynamodb.revive()
        return None
    finally:
        quiesce_io_pool()  # the request's other tombstones and removals, in flight when it failed, end


def assert_converged_by_the_retry(
    stack: AwsStack, reference: str, project: str, *, first: Reply | None, retry: Reply, replies: list[Reply]
) -> None:
    """One entry, the retry answers its receipt and the salt of its reason digest, the first answer
    (if it came) again, and nothing is left for the purge: the project as after a fault-free forget."""
    assert retry.status == 200, retry.body
    (entry,) = ledger(project).body["entries"]
    assert retry.body["receipt"] == entry
    salted = bytes.fromhex(retry.body["reasonSalt"]) + KEYED["reason"].encode()
    assert hashlib.sha256(salted).hexdigest() == entry["reasonDigest"]
    if first is not None and first.status == 200:
        assert first.body["replayed"] is False
        assert {k: v for k, v in retry.body.items() if k != "replayed"} == {
            k: v for k, v in first.body.items() if k != "replayed"
        }
    assert len(retry.body["memories"]) == len(forget(reference, KEYED).body["memories"])
    assert purge_later()["applied"] == 0  # the retry finished what the failed call left
    assert recalled(project, "release target") == []
    assert_acknowledged_events_kept(project, replies)
    assert_same_state(stack, reference, project)


@pytest.mark.parametrize(
    ("step", "kind"),
    [
        ("ledger append", "throughput"),
        ("ledger append", "conflict"),
        ("ledger append", "lost"),
        ("ledger append", "lost_retried"),
        ("ledger append", "crash"),
        ("ledger append", "crash_after"),
        ("tombstone", "throughput"),
        ("tombstone", "lost"),
        ("tombstone", "crash_after"),
        ("index removal", "throttling"),
        ("index removal", "lost"),
        ("index removal", "crash"),
        ("mark applied", "throughput"),
        ("mark applied", "lost"),
        ("mark applied", "crash_after"),
    ],
)
def test_a_keyed_forget_failing_at_a_step_converges_by_the_client_s_retry(
    stack: AwsStack, faults: Faults, step: str, kind: Any
) -> None:
    """Whatever failed, the retry under the same key answers with the one entry's receipt and
    finishes the tombstones itself: no second entry, nothing owed to the purge."""
    reference = new_project()
    remembered_and_structured(stack, reference)
    assert forget(reference, KEYED).status == 200
    project = new_project()
    replies = remembered_and_structured(stack, project)
    operation, when = forget_step(stack, project, step)
    fault = faults.dynamodb.add(Fault(operation, kind, when=when))

    first = forget_or_crash(project, KEYED, faults)
    assert fault.fired == [operation]
    retry = forget(project, KEYED)

    nothing_written = step == "ledger append" and kind in {"throughput", "crash"}
    assert retry.body["replayed"] is not nothing_written  # else it answers the entry written first
    assert_converged_by_the_retry(stack, reference, project, first=first, retry=retry, replies=replies)


@pytest.mark.parametrize("kind", ["crash", "crash_after"])
def test_a_keyed_forget_dying_at_any_write_converges_by_the_client_s_retry(
    stack: AwsStack, faults: Faults, kind: Any
) -> None:
    """The forget dies before, or just after, each of its writes in turn: the retry under the same
    key converges to one entry and its receipt, and the project to the fault-free forget's state."""
    reference = new_project()
    remembered_and_structured(stack, reference)
    faults.dynamodb.clear()
    assert forget(reference, KEYED).status == 200
    writes = faults.dynamodb.writes()
    assert len(writes) >= 4  # the entry, tombstones, index removals, the mark

    for at in range(1, len(writes) + 1):
        project = new_project()
        replies = remembered_and_structured(stack, project)
        faults.dynamodb.clear()
        fault = faults.dynamodb.add(Fault("*", kind, nth=at, when=mentions(project)))

        first = forget_or_crash(project, KEYED, faults)
        assert fault.fired, at
        assert first is None, at
        retry = forget(project, KEYED)

        assert retry.body.get("replayed") is (at > 1 or kind == "crash_after"), at
        assert_converged_by_the_retry(stack, reference, project, first=None, retry=retry, replies=replies)


def test_a_keyed_stream_forget_dying_before_its_placeholder_has_it_written_by_the_retry(
    stack: AwsStack, faults: Faults
) -> None:
    """The retry finishes the dead forget as the purge would, placeholder included (it reads the
    event): the held job message can no longer make the forgotten text a memory."""
    project = new_project()
    _, held = remembered_unindexed(stack, faults, project)
    body = {"stream": STREAM, "reason": "the user asked to erase it", "idempotencyKey": "erase-stream"}
    entry = stream_forget_died_before_its_placeholder(stack, faults, project, lambda p, _: forget(p, body))

    retry = forget(project, body)

    assert retry.status == 200, retry.body
    assert retry.body["replayed"] is True
    assert retry.body["receipt"]["id"] == entry["id"]
    assert len(ledger(project).body["entries"]) == 1
    assert purge_later()["applied"] == 0
    assert_never_structured(stack, project, held)


@pytest.fixture
def kms_faults(stack: AwsStack) -> Iterator[FaultInjector]:
    """Fault hooks on the container's KMS client (the one that encrypts a keyed forget's salt)."""
    hooked = FaultInjector(aws.kms_client(), emulator_client("kms", stack.endpoint_url))
    yield hooked
    hooked.remove()


def kms_refused(reply: Reply, code: str = "kms_busy") -> bool:
    """The answer to a request whose KMS call was refused: ``kms_busy`` (429, Retry-After 1) or
    ``kms_key_unavailable`` (503)."""
    status = 429 if code == "kms_busy" else 503
    retry_after = "1" if code == "kms_busy" else None
    return (reply.status, reply.body["error"]["code"], reply.headers.get("Retry-After")) == (
        status,
        code,
        retry_after,
    )


def test_a_keyed_forget_whose_salt_kms_throttled_answers_kms_busy_writes_nothing_and_converges_by_the_retry(
    stack: AwsStack, kms_faults: FaultInjector
) -> None:
    """The salt is encrypted before anything is written: a throttled Encrypt answers 429 kms_busy
    (was 500) and leaves no trace, and the retry forgets once. A throttled Decrypt (a retry reading
    the record) answers the same 429 and changes nothing: the next retry answers the first answer."""
    reference = new_project()
    remembered_and_structured(stack, reference)
    assert forget(reference, KEYED).status == 200
    project = new_project()
    replies = remembered_and_structured(stack, project)
    before = state(stack, project)
    encrypt = kms_faults.add(Fault("Encrypt", "throttling"))

    refused = forget(project, KEYED)

    assert encrypt.fired == ["Encrypt"]
    assert kms_refused(refused), (refused.status, refused.body, refused.headers)
    assert state(stack, project) == before  # nothing of it
    first = forget(project, KEYED)
    assert first.status == 200, first.body
    assert first.body["replayed"] is False
    decrypt = kms_faults.add(Fault("Decrypt", "throttling"))
    after = state(stack, project)

    failed = forget(project, KEYED)

    assert decrypt.fired == ["Decrypt"]
    assert kms_refused(failed), (failed.status, failed.body, failed.headers)
    assert state(stack, project) == after
    retry = forget(project, KEYED)
    assert retry.body["replayed"] is True
    assert_converged_by_the_retry(stack, reference, project, first=first, retry=retry, replies=replies)


@pytest.mark.parametrize(
    ("kind", "code"),
    [
        ("throttling", "kms_busy"),
        ("kms_internal", "kms_busy"),
        ("key_disabled", "kms_key_unavailable"),
        ("key_pending_deletion", "kms_key_unavailable"),
    ],
)
def test_a_webhook_create_or_rotation_whose_kms_call_failed_answers_its_code_and_writes_nothing(
    stack: AwsStack, kms_faults: FaultInjector, caplog: pytest.LogCaptureFixture, kind: Kind, code: str
) -> None:
    """KMS encrypts the new secret before the webhook is written: a throttled or failing Encrypt
    answers 429 kms_busy, a disabled key or one scheduled for deletion 503 kms_key_unavailable
    (with an error line naming the key for the operator); was 500 either way. Nothing is written,
    so sending the request again is safe, and it goes through once KMS answers."""
    project = new_project()
    body = {"url": "https://example.com/hook", "events": ["memory.forgotten"]}
    kms_faults.add(Fault("Encrypt", kind))

    with caplog.at_level(logging.ERROR):
        refused = hooks(project, "POST", body=body)

    assert kms_refused(refused, code), (refused.status, refused.body, refused.headers)
    assert hooks(project, "GET").body["webhooks"] == []
    unusable = [r for r in caplog.records if r.getMessage().startswith("KMS key unusable")]
    assert [getattr(r, "kmsKeyId", None) for r in unusable] == (
        [stack.kms_key_id] if code == "kms_key_unavailable" else []
    )
    webhook = subscribe(project, "https://example.com/hook")
    kms_faults.add(Fault("Encrypt", kind))

    rotation = hooks(project, "POST", f"{webhook['id']}/rotate-secret")

    assert kms_refused(rotation, code), (rotation.status, rotation.body, rotation.headers)
    stored = wiring.webhook_store().get(ProjectId(project), webhook["id"])
    assert stored is not None
    assert len(stored.secret_ciphertexts) == 1  # no second secret, no overlap started
    assert stored.previous_until is None
    assert [hook["id"] for hook in hooks(project, "GET").body["webhooks"]] == [webhook["id"]]
    assert hooks(project, "POST", f"{webhook['id']}/rotate-secret").status == 200


# -- 1. and 4. the purge: its writes failing, the function dying mid-run ----------------------------------


def forgotten_now(stack: AwsStack, project: str) -> tuple[list[Reply], str]:
    """The batch remembered, structured and forgotten with no grace window (due at once); the
    remembers' replies and the receipt id."""
    replies = remembered_and_structured(stack, project)
    reply = forget_now(project, FORGET)
    assert reply.status == 200, reply.body
    return replies, reply.body["receipt"]["id"]


def run_purge() -> dict[str, Any]:
    """The purge function as scheduled (its own wiring: the hooked client)."""
    result: dict[str, Any] = handler_module("purge").lambda_handler(SCHEDULED_EVENT, FakeLambdaContext())
    return result


def assert_purged_like_reference(
    stack: AwsStack, reference: dict[str, list[str]], project: str, receipt_id: str, replies: list[Reply]
) -> None:
    assert receipt(project, receipt_id).body["state"] == "purged"
    assert [e.get("payload") for e in events(project, STREAM).body["events"]] == [None, None]
    assert_acknowledged_events_kept(project, replies)  # the chain still verifies without payloads
    assert recalled(project, "release target") == []
    difference = state_difference(reference, state(stack, project))
    assert not difference, "\n".join(["the state differs from the fault-free purge's:", *difference])


def forget_died(stack: AwsStack, faults: Faults, project: str) -> tuple[list[Reply], str]:
    """The batch remembered, structured, and forgotten with no grace window by a forget that died
    right after its ledger entry (every tombstone refused): the purge owes all of it."""
    replies = remembered_and_structured(stack, project)
    refusal = faults.dynamodb.add(
        Fault("UpdateItem", "throughput", times=1000, when=mentions(project, '":tombstoned"'))
    )
    reply = forget_now(project, FORGET)
    quiesce_io_pool()
    faults.dynamodb.clear()
    assert refusal.fired
    assert reply.status == 500, reply.body
    (entry,) = ledger(project).body["entries"]
    return replies, entry["id"]


@pytest.mark.parametrize(
    ("kind", "operation", "nth", "times"),
    [
        ("throttling", "UpdateItem", 2, 1),  # a tombstone the purge finishes
        ("throughput", "TransactWriteItems", 2, 1),  # removing postings
        ("conflict", "TransactWriteItems", 1, 3),  # retried by the store itself
        ("throughput", "DeleteItem", 3, 1),  # a document frequency left at zero
        ("lost", "UpdateItem", 8, 1),  # an erasure applied, its answer lost
        ("throttling", "UpdateItem", 1000, 1),  # the last: the entry marked purged
    ],
)
def test_a_failing_purge_write_is_finished_by_the_next_run(  # noqa: PLR0917 - the case
    stack: AwsStack, faults: Faults, kind: Any, operation: str, nth: int, times: int
) -> None:
    """The purge finishes a forget that died after its entry (a minute on) and erases it (past
    its grace window): a write that fails stops the run, the next run finishes it."""
    reference = new_project()
    forget_died(stack, faults, reference)
    first_reference = purge_later()
    expected = state(stack, reference)
    writes = faults.dynamodb.writes()
    project = new_project()
    replies, receipt_id = forget_died(stack, faults, project)
    position = min(nth, sum(1 for w in writes if w == operation))
    fault = faults.dynamodb.add(Fault(operation, kind, nth=position, times=times, when=mentions(project)))

    try:
        first = purge_later()
    except Exception:  # the function failed: the schedule runs it again
        first = None
    quiesce_io_pool()

    assert fault.fired
    if kind == "conflict":
        assert first == first_reference
    else:
        assert first is None
        assert purge_later()["entries"] == 1
    assert purge_later() == {"applied": 0, "entries": 0, "memories": 0, "events": 0, "complete": True}
    assert_purged_like_reference(stack, expected, project, receipt_id, replies)


def step_boundaries(writes: list[str]) -> list[int]:
    """The positions (from 1) of the first and last write of each run of one operation: a crash
    between two steps of the purge, not at each of a step's many alike writes."""
    positions = {1, len(writes)}
    for at in range(1, len(writes)):
        if writes[at] != writes[at - 1]:
            positions.update({at, at + 1})
    return sorted(positions)


@pytest.mark.parametrize("kind", ["crash", "crash_after"])
def test_a_purge_dying_mid_run_is_finished_by_the_next_run(
    stack: AwsStack, faults: Faults, kind: Any
) -> None:
    """The purge dies before, or just after, a write between each two of its steps in turn: the
    next scheduled run finishes the entry to exactly the fault-free purge's state."""
    reference = new_project()
    forgotten_now(stack, reference)
    faults.dynamodb.clear()
    run_purge()
    writes = faults.dynamodb.writes()
    expected = state(stack, reference)
    positions = step_boundaries(writes)
    assert len(positions) > 8

    for at in positions:
        project = new_project()
        replies, receipt_id = forgotten_now(stack, project)
        fault = faults.dynamodb.add(Fault("*", kind, nth=at, when=mentions(project)))
        with pytest.raises(Crash):
            run_purge()
        assert fault.fired, at
        faults.dynamodb.revive()
        if at < len(writes):
            assert receipt(project, receipt_id).body["state"] == "tombstoned", at

        finished = run_purge()

        assert finished["complete"], at
        assert_purged_like_reference(stack, expected, project, receipt_id, replies)
        faults.dynamodb.clear()


# -- 1. forget and the purge: an event forgotten before it had a memory -----------------------------------

UNINDEXED = "My bike lock code is Vorpalish 3321."


def remembered_unindexed(stack: AwsStack, faults: Faults, project: str) -> tuple[str, list[dict[str, Any]]]:
    """An event acknowledged but never indexed (no memory at all), its job message held in a
    backlog: the event id and the held message."""
    faults.dynamodb.add(
        Fault(
            "TransactWriteItems",
            "throughput",
            times=1000,
            when=both(mentions(project), touches(stack.tables["TermIndexTable"])),
        )
    )
    reply = remember(project, {"stream": STREAM, "events": [message("k1", UNINDEXED)]})
    faults.dynamodb.clear()
    assert reply.status == 202, reply.body
    assert reply.body["memories"] == []
    return reply.body["events"][0]["id"], take_job_messages(stack, {reply.body["jobId"]})


def stream_forget_died_before_its_placeholder(
    stack: AwsStack, faults: Faults, project: str, send: Callable[[str, dict[str, Any]], Reply]
) -> dict[str, Any]:
    """The stream forgotten by ``send`` (``forget``, or ``forget_now``: no grace window), dying at
    the placeholder it writes for the event without a memory; the ledger entry it left."""
    refusal = faults.dynamodb.add(Fault("PutItem", "throughput", when=mentions(project, "tombstoned")))
    died = send(project, {"stream": STREAM, "reason": "the user asked to erase it"})
    quiesce_io_pool()
    faults.dynamodb.clear()
    assert refusal.fired
    assert died.status == 500, died.body
    (entry,) = ledger(project).body["entries"]
    return dict(entry)


def assert_never_structured(stack: AwsStack, project: str, held: list[dict[str, Any]]) -> None:
    """The held job message, delivered now, makes nothing: the text is never served again."""
    structure_until_done(stack, held)
    job_id = json.loads(held[0]["Body"])["jobId"]
    assert get_job(project, job_id).body["memoryIds"] == []
    assert recalled(project, "Vorpalish bike lock") == []


def test_a_stream_forget_dying_before_its_placeholder_has_it_written_by_the_purge_s_next_run(
    stack: AwsStack, faults: Faults
) -> None:
    """The entry is owed: the purge's next run (a minute on) finishes the dead forget, placeholder
    included, so the held job message can no longer make the forgotten text a memory."""
    project = new_project()
    event_id, held = remembered_unindexed(stack, faults, project)
    entry = stream_forget_died_before_its_placeholder(stack, faults, project, forget)
    (placeholder,) = entry["memoryIds"]
    assert entry["eventIds"] == [event_id]
    assert get_memory(project, placeholder).status == 404  # not written

    assert purge_later()["applied"] == 1

    assert get_memory(project, placeholder).body["status"] == "tombstoned"
    assert receipt(project, entry["id"]).body["state"] == "tombstoned"  # the grace window runs
    assert_never_structured(stack, project, held)


def test_the_purge_erases_the_payload_of_every_event_its_entry_names_even_one_no_memory_cites(
    stack: AwsStack, faults: Faults
) -> None:
    """The dead forget never wrote the placeholder, so no memory cites the event: the purge still
    erases its payload before its receipt reads purged, and structuring it later makes nothing."""
    project = new_project()
    _, held = remembered_unindexed(stack, faults, project)
    entry = stream_forget_died_before_its_placeholder(stack, faults, project, forget_now)

    result = purge_later()

    assert (result["applied"], result["entries"], result["events"]) == (1, 1, 1)
    assert receipt(project, entry["id"]).body["state"] == "purged"
    assert [e.get("payload") for e in events(project, STREAM).body["events"]] == [None]
    (placeholder,) = entry["memoryIds"]
    assert get_memory(project, placeholder).body["status"] == "purged"
    assert_never_structured(stack, project, held)


def entry_of_the_old_shape(project: str, event_id: str, age: timedelta = timedelta(0)) -> LedgerEntry:
    """A ledger entry as written before entries kept their events' locations (no
    ``event_locations``), naming ``event_id`` and its provisional memory, whose forget died before
    writing it: nothing tells where the event is. Due ``age`` ago."""
    return DynamoLedgerStore(wiring.dynamodb(), get_settings().ledger_table).append(
        ProjectId(project),
        memory_ids=[f"mem_{event_id.partition('_')[2]}"],
        event_ids=[event_id],
        reason_digest="0" * 64,
        tombstoned_at=format_instant(utc_now() - age),
        purge_after=format_instant(utc_now() - age),
    )


#: Streams of the project besides STREAM, one before it in name order and one after: the purge's
#: search reads streams in name order, so an old entry's event in STREAM is found in the middle.
OTHER_STREAMS = ("alpha", "zulu")


def remembered_in_other_streams(project: str, per_stream: int = 3) -> dict[str, list[str]]:
    """``per_stream`` events in each of OTHER_STREAMS: their ids, by stream, in seq order."""
    remembered = {}
    for stream in OTHER_STREAMS:
        batch = [message(f"{stream}{n}", f"Note {n} of the {stream} stream.") for n in range(per_stream)]
        reply = remember(project, {"stream": stream, "events": batch})
        assert reply.status == 202, reply.body
        remembered[stream] = [event["id"] for event in reply.body["events"]]
    return remembered


def stored_event(stack: AwsStack, project: str, event_id: str) -> dict[str, Any]:
    """The event's item as DynamoDB holds it (not as served)."""
    (item,) = [i for i in items_of(stack, "EventsTable", project) if i.get("id", {}).get("S") == event_id]
    return item


def ledger_item(stack: AwsStack, project: str, receipt_id: str) -> dict[str, Any]:
    (item,) = [i for i in items_of(stack, "LedgerTable", project) if i.get("id", {}).get("S") == receipt_id]
    return item


def searches_logged(caplog: pytest.LogCaptureFixture) -> list[tuple[str, int, int, bool]]:
    """The purge's line per entry it searched streams for: (receipt id, found, reads, finished)."""
    return [
        (vars(record)["receiptId"], vars(record)["found"], vars(record)["reads"], vars(record)["finished"])
        for record in caplog.records
        if hasattr(record, "reads") and hasattr(record, "sought")
    ]


def assert_found_and_erased(stack: AwsStack, project: str, entry: LedgerEntry, event_id: str) -> None:
    """The old entry's event was found in STREAM and erased like any other: no payload or salt
    stored, its location recorded beside the (unchanged) entry, its receipt plain purged."""
    event = stored_event(stack, project, event_id)
    assert not {"payload", "salt"} & event.keys()
    assert {"hash", "payloadDigest"} <= event.keys()  # the chain still verifies
    item = ledger_item(stack, project, entry.id)
    assert item["eventLocations"]["L"] == [
        {"M": {"id": {"S": event_id}, "stream": {"S": STREAM}, "seq": {"N": event["seq"]["N"]}}}
    ]
    assert {"purgedAt", "locateFinishedAt"} <= item.keys()
    assert not {"duePk", "unlocatedEventIds", "locateCursor"} & item.keys()
    assert receipt(project, entry.id).body == {**entry.as_served(), "state": "purged"}
    assert ledger(project).body["entries"] == [entry.as_served()]  # nothing hashed rewritten
    (placeholder,) = entry.memory_ids
    memory = get_memory(project, placeholder).body
    assert memory["status"] == "purged"
    assert [source["eventId"] for source in memory["sourceEvents"]] == [event_id]
    assert purge_later() == {"applied": 0, "entries": 0, "memories": 0, "events": 0, "complete": True}


def test_an_old_entry_s_event_is_found_in_the_project_s_streams_and_its_payload_erased(
    stack: AwsStack, faults: Faults, caplog: pytest.LogCaptureFixture
) -> None:
    """An entry in the shape written before entries kept their events' locations, whose forget died
    before its placeholder: no memory cites the event and the entry does not say where it is. The
    purge searches the project's streams (three here; the event is in the middle one), records
    where it found it, erases its payload and marks the entry purged: the receipt reads purged
    and names nothing unerased (before, the payload was left stored and the receipt named it in
    unlocatedEventIds), and the held job message makes nothing."""
    project = new_project()
    remembered_in_other_streams(project)
    event_id, held = remembered_unindexed(stack, faults, project)
    entry = entry_of_the_old_shape(project, event_id)
    assert "payload" in stored_event(stack, project, event_id)

    with caplog.at_level(logging.INFO):
        first = purge_later()

    assert (first["entries"], first["events"]) == (1, 1)
    ((receipt_id, found, reads, finished),) = searches_logged(caplog)
    assert (receipt_id, found, finished) == (entry.id, 1, True)
    assert reads >= 3 + 3  # the stream heads and alpha's events, at least
    assert not [record for record in caplog.records if hasattr(record, "unlocated")]
    assert_found_and_erased(stack, project, entry, event_id)
    assert_never_structured(stack, project, held)


def test_an_entry_naming_an_event_no_stream_holds_is_finished_once_naming_it(
    stack: AwsStack, caplog: pytest.LogCaptureFixture
) -> None:
    """An old-shape entry naming an event that no stream of its project holds (so no payload of it
    is stored anywhere): after searching every stream, the purge does every other step, keeps the
    event from ever being structured (a placeholder without a source) and takes the entry off its
    work list marked unlocated, reported once; its receipt reads purged and names the event."""
    project = new_project()
    remembered_in_other_streams(project)
    nowhere = ids.event_id()
    entry = entry_of_the_old_shape(project, nowhere)

    with caplog.at_level(logging.INFO):
        first = purge_later()
        reported = [record.unlocated for record in caplog.records if hasattr(record, "unlocated")]
        again = purge_later()

    assert (first["entries"], first["events"]) == (0, 0)
    assert [(found, finished) for _, found, _, finished in searches_logged(caplog)] == [(0, True)]
    assert reported == [[{"projectId": project, "receiptId": entry.id, "events": 1}]]  # once
    assert again == {"applied": 0, "entries": 0, "memories": 0, "events": 0, "complete": True}
    item = ledger_item(stack, project, entry.id)
    assert [e["S"] for e in item["unlocatedEventIds"]["L"]] == [nowhere]
    assert "locateFinishedAt" in item
    assert not {"duePk", "purgedAt", "eventLocations"} & item.keys()  # purgedAt: every payload erased
    served = receipt(project, entry.id).body
    assert served == {**entry.as_served(), "state": "purged", "unlocatedEventIds": [nowhere]}
    assert ledger(project).body["entries"] == [entry.as_served()]  # the hashed entry unchanged
    (placeholder,) = entry.memory_ids
    assert get_memory(project, placeholder).body["status"] == "purged"


class NoStreams:
    """A project's streams as the purge saw them before it searched: none."""

    def stream_names(self, project: ProjectId, after: str | None, limit: int) -> StreamNames:
        return StreamNames((), more=False, reads=0)

    def find_events(
        self, project: ProjectId, stream: str, event_ids: Any, from_seq: int, limit: int
    ) -> EventsFound:
        raise AssertionError("no stream to read")


def marked_unlocated_by_an_older_purge(stack: AwsStack, entry: LedgerEntry) -> None:
    """What the purge did to an old-shape entry before it searched streams: every other step done,
    the entry marked unlocated (off the work list) with no search recorded: no ``locateFinishedAt``."""
    settings = get_settings()
    purger = Purger(
        DynamoLedgerStore(wiring.dynamodb(), settings.ledger_table),
        DynamoForgetStore(
            wiring.dynamodb(), settings.memories_table, settings.index_table, settings.events_table
        ),
        utc_now,
    )
    search = StreamSearch(NoStreams(), LOCATE_READS_PER_RUN, lambda: True)
    done = purger.purge(entry, format_instant(utc_now()), search)
    assert done.unlocated == entry.event_ids
    item = ledger_item(stack, entry.project_id, entry.id)
    stack.dynamodb.update_item(
        TableName=settings.ledger_table,
        Key={"pk": item["pk"], "sk": item["sk"]},
        UpdateExpression="REMOVE locateFinishedAt",
    )


def requeue_unlocated(stack: AwsStack, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    """tools/requeue_unlocated.py on this test's ledger table: its exit status and what it printed."""
    capsys.readouterr()
    table = stack.tables["LedgerTable"]
    status = requeue_unlocated_main(["--ledger-table", table, "--endpoint-url", stack.endpoint_url, *extra])
    return status, capsys.readouterr().out


def test_an_entry_an_older_purge_marked_unlocated_is_requeued_then_its_event_found_and_erased(
    stack: AwsStack, faults: Faults, capsys: pytest.CaptureFixture[str]
) -> None:
    """A purge deployed before it searched streams marked an old entry unlocated without looking:
    the event's payload is still stored, so its receipt reads tombstoned, not purged (it read purged,
    naming the event as stored nowhere). tools/requeue_unlocated.py puts the entry back on the work
    list, and the next purge finds the event, erases its payload, gives the placeholder that purge
    wrote the event it stands for (kaibo verify finds the event through it) and marks the entry
    purged."""
    project = new_project()
    remembered_in_other_streams(project)
    event_id, held = remembered_unindexed(stack, faults, project)
    entry = entry_of_the_old_shape(project, event_id)
    marked_unlocated_by_an_older_purge(stack, entry)
    assert purge_later()["entries"] == 0  # off the work list: never searched
    assert "payload" in stored_event(stack, project, event_id)
    # never looked for, so not "stored nowhere": the receipt does not read purged
    assert receipt(project, entry.id).body == {**entry.as_served(), "state": "tombstoned"}

    printed: list[str] = []
    status, out = requeue_unlocated(stack, capsys, "--max-items", "1")
    printed.append(out)
    while status == STOPPED_EXIT:
        (cursor,) = re.findall(r"--cursor '([^']+)'", out)
        status, out = requeue_unlocated(stack, capsys, "--max-items", "1", "--cursor", cursor)
        printed.append(out)

    assert status == 0, printed
    assert len(printed) > 1  # bounded: one item read per run, resumed from its cursor
    assert "".join(printed).count(f"requeued {project} {entry.id}") == 1
    assert requeue_unlocated(stack, capsys)[1].endswith("0 requeued; finished\n")  # once
    result = purge_later()

    assert (result["entries"], result["events"]) == (1, 1)
    event = stored_event(stack, project, event_id)
    assert not {"payload", "salt"} & event.keys()
    assert {"hash", "payloadDigest"} <= event.keys()  # the chain still verifies
    item = ledger_item(stack, project, entry.id)
    assert [place["M"]["id"]["S"] for place in item["eventLocations"]["L"]] == [event_id]
    assert {"purgedAt", "locateFinishedAt"} <= item.keys()
    assert not {"duePk", "unlocatedEventIds", "unlocatedAt", "locateCursor"} & item.keys()
    assert receipt(project, entry.id).body == {**entry.as_served(), "state": "purged"}
    assert ledger(project).body["entries"] == [entry.as_served()]  # nothing hashed rewritten
    assert requeue_unlocated(stack, capsys)[1].endswith(
        "0 unsearched unlocated entries, 0 requeued; finished\n"
    )
    placeholder = unlocated_placeholder(project, event_id, entry.tombstoned_at)
    cited = get_memory(project, placeholder.id).body["sourceEvents"]
    assert [source["eventId"] for source in cited] == [event_id]  # kaibo verify finds it there
    assert purge_later() == {"applied": 0, "entries": 0, "memories": 0, "events": 0, "complete": True}
    assert_never_structured(stack, project, held)


@pytest.mark.parametrize("others", [0, 100])
def test_a_stream_read_for_sought_events_finds_them_however_many_are_sought(
    stack: AwsStack, others: int
) -> None:
    """A filter names at most 100 ids: more are matched after the read, with the same answer."""
    project = new_project()
    alpha = remembered_in_other_streams(project)["alpha"]
    settings = get_settings()
    store = DynamoForgetStore(
        wiring.dynamodb(), settings.memories_table, settings.index_table, settings.events_table
    )
    sought = [alpha[1], *(ids.event_id() for _ in range(others))]

    whole = store.find_events(ProjectId(project), "alpha", sought, 1, 100)
    first, second = (store.find_events(ProjectId(project), "alpha", sought, at, 2) for at in (1, 3))

    assert (whole.found, whole.next_seq, whole.reads) == ({alpha[1]: 2}, None, 3)
    assert (first.found, first.next_seq, first.reads) == ({alpha[1]: 2}, 3, 2)
    assert (second.found, second.next_seq, second.reads) == ({}, None, 1)


def test_a_search_cut_by_the_run_s_read_budget_goes_on_at_the_next_run_and_finishes(
    stack: AwsStack, faults: Faults, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two reads per run: each run reads at most that many items, keeps its cursor beside the entry
    (which stays on the work list, its receipt tombstoned) and the next one goes on from there, until
    the event is found and erased exactly as in one run. Every run publishes what it read."""
    project = new_project()
    remembered_in_other_streams(project)
    event_id, held = remembered_unindexed(stack, faults, project)
    entry = entry_of_the_old_shape(project, event_id)
    capsys.readouterr()

    cursors = []
    with caplog.at_level(logging.INFO):
        for _ in range(10):
            if purge_later(locate_reads_per_run=2)["entries"]:
                break
            assert receipt(project, entry.id).body["state"] == "tombstoned"
            item = ledger_item(stack, project, entry.id)
            assert "duePk" in item
            cursors.append(item["locateCursor"]["M"])
            assert "payload" in stored_event(stack, project, event_id)

    runs = searches_logged(caplog)
    assert len(runs) > 2, runs  # cut by the budget, more than once
    assert [finished for *_, finished in runs] == [False] * (len(runs) - 1) + [True]
    assert all(0 < reads <= 2 for _, _, reads, _ in runs), runs
    assert len({json.dumps(cursor, sort_keys=True) for cursor in cursors}) == len(cursors)  # it moved on
    assert published_metrics(capsys.readouterr().out)["PurgeLocateReads"] == [
        reads for _, _, reads, _ in runs
    ]
    assert_found_and_erased(stack, project, entry, event_id)
    assert_never_structured(stack, project, held)


def test_an_entry_whose_search_goes_on_waits_behind_the_entries_due_after_it(
    stack: AwsStack, faults: Faults
) -> None:
    """A run takes the oldest due entries, at most ``limit`` (200). An old entry whose search the
    read budget keeps cutting short waits behind the entries due meanwhile: a forget due after it
    is purged by the next run, though the search still goes on (before, the search held its place
    at the head of every run's list, and enough such entries kept every later forget unpurged)."""
    project = new_project()
    remembered_in_other_streams(project)
    event_id, _held = remembered_unindexed(stack, faults, project)
    purge_later()  # nothing else of the session left due but what keeps failing
    settings = get_settings()
    ledger_store = DynamoLedgerStore(wiring.dynamodb(), settings.ledger_table)
    others = len(ledger_store.due(format_instant(utc_now() + timedelta(minutes=5)), 1000))
    old = entry_of_the_old_shape(project, event_id, age=timedelta(hours=1))
    later = new_project()
    remembered_and_structured(stack, later)
    forgotten = forget_now(later, FORGET)
    assert forgotten.status == 200, forgotten.body

    def one_run(minutes: int) -> None:
        Purger(
            ledger_store,
            DynamoForgetStore(
                wiring.dynamodb(), settings.memories_table, settings.index_table, settings.events_table
            ),
            lambda: utc_now() + timedelta(minutes=minutes),
            locate_reads_per_run=2,
        ).run(has_time=lambda: True, limit=others + 1)

    one_run(2)  # the old entry first: its search, cut short
    one_run(3)

    assert receipt(later, forgotten.body["receipt"]["id"]).body["state"] == "purged"
    assert receipt(project, old.id).body["state"] == "tombstoned"  # its search goes on
    assert "locateCursor" in ledger_item(stack, project, old.id)


@pytest.mark.parametrize(
    ("kind", "operation", "nth", "marker"),
    [
        ("throughput", "Query", 2, ""),  # a read of the search refused
        ("crash", "Query", 3, ""),  # the process dies mid-search
        ("lost", "UpdateItem", 1, "locateFinishedAt"),  # the find recorded, its answer lost
        ("crash_after", "UpdateItem", 1, "locateFinishedAt"),  # the find recorded, then death
    ],
)
def test_a_purge_failing_mid_search_is_finished_by_the_next_run(  # noqa: PLR0917 - the case
    stack: AwsStack, faults: Faults, kind: Any, operation: str, nth: int, marker: str
) -> None:
    """A fault while the purge searches for an old entry's event, or as it records the find: the
    run fails (or dies), and the next one finishes the entry to the fault-free end state."""
    project = new_project()
    remembered_in_other_streams(project)
    event_id, held = remembered_unindexed(stack, faults, project)
    entry = entry_of_the_old_shape(project, event_id)
    fault = faults.dynamodb.add(Fault(operation, kind, nth=nth, when=mentions(project, marker)))

    with pytest.raises(BaseException) as failed:  # noqa: PT011 - the function fails, whichever way
        purge_later()
    quiesce_io_pool()
    faults.dynamodb.revive()

    assert fault.fired
    assert isinstance(failed.value, Crash) == kind.startswith("crash")
    assert receipt(project, entry.id).body["state"] == "tombstoned"
    assert purge_later()["entries"] == 1
    assert_found_and_erased(stack, project, entry, event_id)
    assert_never_structured(stack, project, held)


def test_kaibo_verify_checks_an_old_entry_s_found_event_and_names_one_stored_nowhere(
    stack: AwsStack, faults: Faults
) -> None:
    """Over HTTP, as a user checks an erasure: ``kaibo verify --receipt`` of an old-shape entry
    whose event the purge found and erased passes in full, the event checked like any other (before:
    "not located by the purge", its payload left stored); of one naming an event no stream holds,
    it reads purged, names that event (nothing stored to erase) and exits 0."""
    created = create_project()
    project, api_key = created["projectId"], created["apiKey"]
    event_id, _ = remembered_unindexed(stack, faults, project)
    found = entry_of_the_old_shape(project, event_id)
    nowhere_id = ids.event_id()
    nowhere = entry_of_the_old_shape(project, nowhere_id)
    assert purge_later()["events"] == 1

    def verify(entry: LedgerEntry, *options: str) -> subprocess.CompletedProcess[str]:
        return run_kaibo_cli(
            front.url, api_key, "verify", "--receipt", entry.id, "--project", project, *options
        )

    with HttpFront(LocalGateway(load_template()), port=0) as front:
        erased, erased_json = verify(found), verify(found, "--json")
        unlocated, unlocated_json = verify(nowhere), verify(nowhere, "--json")

    for shown in (erased, erased_json, unlocated, unlocated_json):
        assert shown.returncode == 0, shown.stdout + shown.stderr
    assert erased.stdout.splitlines()[-1] == (
        f"verified: receipt {found.id}: state purged; 1 memory without content (1 purged); 1 event "
        "without payload or salt"
    )
    checked = json.loads(erased_json.stdout)
    assert (checked["ok"], checked["eventsChecked"], checked["unlocatedEventIds"], checked["notes"]) == (
        True,
        1,
        [],
        [],
    )
    assert f"unlocatedEventIds: {nowhere_id}" in unlocated.stdout
    assert unlocated.stdout.splitlines()[-1] == (
        f"verified: receipt {nowhere.id}: state purged; 1 memory without content (1 purged); 0 events "
        "without payload or salt, 1 not found in any stream (nothing stored to erase; nothing can be "
        "made from it)"
    )
    checked = json.loads(unlocated_json.stdout)
    assert (checked["ok"], checked["state"], checked["failures"]) == (True, "purged", [])
    assert (checked["unlocatedEventIds"], checked["eventsChecked"]) == ([nowhere_id], 0)


# -- 2. the webhook relay after a commit (forget, structuring) -------------------------------------------


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    server = made.start()
    yield made
    server.shutdown()


class _NeverCalled:
    """The relay neither signs nor sends: a dispatcher that only relays needs neither."""

    def decrypt(self, project: str, webhook_id: str, ciphertext: str) -> str:
        raise AssertionError("the relay decrypted a secret")

    def __call__(self, *args: Any) -> Any:
        raise AssertionError("the relay sent a delivery")


def relay_later(minutes: int = 2) -> int:
    """The dispatch function's schedule ``minutes`` from now: every event still unrelayed a minute
    after its commit goes to the queue. How many it relayed."""
    settings = get_settings()
    dispatcher = WebhookDispatcher(
        DynamoWebhookStore(wiring.dynamodb(), settings.webhooks_table),
        SqsWebhookQueue(wiring.sqs(), settings.webhook_queue_url, settings.webhook_dead_letter_queue_url),
        _NeverCalled(),
        _NeverCalled(),
        clock=lambda: utc_now() + timedelta(minutes=minutes),
    )
    result = handler_module("webhook_dispatch").lambda_handler(
        {"source": "aws.events", "detail-type": "Scheduled Event"}, FakeLambdaContext(), dispatcher=dispatcher
    )
    return int(result["relayed"])


def unrelayed(project: str) -> list[int]:
    store = DynamoWebhookStore(wiring.dynamodb(), get_settings().webhooks_table)
    return sorted(seq for owner, seq in store.unrelayed("9999", 100) if owner == project)


def delivered(receiver: Receiver, project: str) -> list[tuple[str, str]]:
    """``(type, webhook-id)`` of every delivery the receiver got for ``project``."""
    return sorted((b["type"], b["id"]) for b in receiver.bodies() if b["projectId"] == project)


def structured_and_forgotten(
    stack: AwsStack, project: str, receiver: Receiver, faults: Faults, *, fault: Fault | None, phase: str
) -> list[Reply]:
    """A subscriber, the batch remembered, structured and forgotten; ``fault`` during ``phase``."""
    subscribe(project, receiver.url)
    reply = remember_ok(project)
    messages = take_job_messages(stack, {reply.body["jobId"]})
    injector = faults.dynamodb if fault is not None and fault.operation == "UpdateItem" else faults.sqs
    if fault is not None and phase == "structuring":
        injector.add(fault)
    structure_until_done(stack, messages)
    if fault is not None and phase == "forget":
        injector.add(fault)
    forgot = forget(project, FORGET)
    assert forgot.status == 200, forgot.body  # committed: the relay is best effort
    return [reply]


@pytest.mark.parametrize("phase", ["structuring", "forget"])
@pytest.mark.parametrize("failure", ["queue unavailable", "queue answer lost", "relay mark refused"])
def test_a_webhook_event_whose_relay_failed_after_the_commit_is_relayed_by_the_schedule_once(
    stack: AwsStack, faults: Faults, receiver: Receiver, phase: str, failure: str
) -> None:
    """The change and its outbox entry committed together; the fan-out to the webhook queue failed
    (refused; taken but its answer lost; or queued but never marked relayed): the dispatch
    function's schedule relays it, and every event reaches the subscriber exactly once."""
    reference = new_project()
    structured_and_forgotten(stack, reference, receiver, faults, fault=None, phase=phase)
    pump(stack, lambda: "memory.forgotten" in {t for t, _ in delivered(receiver, reference)})
    drain(stack)
    project = new_project()
    fault = {
        "queue unavailable": Fault("SendMessageBatch", "unavailable", when=mentions(project)),
        "queue answer lost": Fault("SendMessageBatch", "lost", when=mentions(project)),
        "relay mark refused": Fault("UpdateItem", "throughput", when=mentions(project, "REMOVE relayPk")),
    }[failure]

    replies = structured_and_forgotten(stack, project, receiver, faults, fault=fault, phase=phase)
    faults.dynamodb.clear()
    faults.sqs.clear()

    assert fault.fired
    left = unrelayed(project)
    assert left  # flagged in the outbox: nothing lost
    assert relay_later() == len(left)
    assert unrelayed(project) == []
    pump(stack, lambda: len(delivered(receiver, project)) >= len(delivered(receiver, reference)))
    drain(stack)
    got = delivered(receiver, project)
    assert len({webhook_id for _, webhook_id in got}) == len(got)  # none twice
    assert [t for t, _ in got] == [t for t, _ in delivered(receiver, reference)]
    assert relay_later() == 0
    assert_acknowledged_events_kept(project, replies)
    assert_same_state(stack, reference, project)


# -- 3. the bookkeeping of a delivery attempt, redelivered after a failure ------------------------------

LAST_ATTEMPT = len(RETRY_SCHEDULE_SECONDS)


def dispatch(stack: AwsStack, message: dict[str, Any]) -> dict[str, Any]:
    """One SQS batch of ``message`` through the dispatch function (as Lambda's trigger sends it)."""
    arn = f"arn:aws:sqs:us-east-1:123456789012:{stack.queues['WebhookQueue'].rsplit('/', 1)[-1]}"
    handler = handler_module("webhook_dispatch").lambda_handler
    result: dict[str, Any] = handler(sqs_event([message], arn), FakeLambdaContext())
    return result


def delivery_message(delivery: Delivery) -> dict[str, Any]:
    return {"MessageId": str(uuid.uuid4()), "ReceiptHandle": "rh", "Body": encode_message(delivery)}


def webhook_with_event_at(project: str, receiver: Receiver, attempt: int) -> tuple[str, int]:
    """A webhook and its test event, whose attempts before ``attempt`` were made (by other messages)."""
    webhook_id = subscribe(project, receiver.url)["id"]
    seq = hooks(project, "POST", f"{webhook_id}/test").body["seq"]
    store = wiring.webhook_store()
    for earlier in range(1, attempt):
        assert store.claim_attempt(ProjectId(project), webhook_id, seq, earlier, f"earlier-{earlier}")
    return webhook_id, seq


def dead_lettered(stack: AwsStack) -> list[str]:
    queue = stack.queues["WebhookDeadLetterQueue"]
    return [
        m["Body"]
        for m in stack.sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
    ]


@pytest.mark.parametrize("failing", ["dead-letter send", "failing mark", "delivery settle"])
def test_a_last_attempt_whose_bookkeeping_failed_is_finished_by_the_redelivery(
    stack: AwsStack, faults: Faults, receiver: Receiver, failing: str
) -> None:
    """The last attempt failed, then one of its writes failed: SQS redelivers the message, which
    makes the attempt again and reaches the dead-letter queue (at least once) and ``failing``."""
    receiver.statuses = [500] * 5
    project = new_project()
    webhook_id, seq = webhook_with_event_at(project, receiver, LAST_ATTEMPT)
    dead_letter_queue = stack.queues["WebhookDeadLetterQueue"].rsplit("/", 1)[-1]
    fault = {
        "dead-letter send": lambda: faults.sqs.add(
            Fault("SendMessage", "unavailable", when=mentions(dead_letter_queue))
        ),
        "failing mark": lambda: faults.dynamodb.add(
            Fault("UpdateItem", "throughput", when=mentions(project, ":failing"))
        ),
        "delivery settle": lambda: faults.dynamodb.add(
            Fault("UpdateItem", "throughput", when=mentions(project, ":status", "failed"))
        ),
    }[failing]()
    message = delivery_message(Delivery(project, webhook_id, seq, LAST_ATTEMPT))

    assert dispatch(stack, message)["batchItemFailures"]  # reported: SQS redelivers it
    assert fault.fired
    faults.sqs.clear()
    faults.dynamodb.clear()
    assert dispatch(stack, message)["batchItemFailures"] == []

    assert hooks(project, "GET", webhook_id).body["status"] == "failing"
    assert message["Body"] in dead_lettered(stack)
    assert len(receiver.bodies()) == 2  # the redelivery made the last attempt again
    assert dispatch(stack, message)["batchItemFailures"] == []  # settled: one more copy is dropped
    assert len(receiver.bodies()) == 2


def test_a_success_whose_recovery_mark_failed_makes_the_webhook_active_on_the_redelivery(
    stack: AwsStack, faults: Faults, receiver: Receiver
) -> None:
    project = new_project()
    webhook_id, seq = webhook_with_event_at(project, receiver, 2)
    wiring.webhook_store().set_health(ProjectId(project), webhook_id, "2026-12-01T00:00:00.000Z")
    fault = faults.dynamodb.add(Fault("UpdateItem", "throughput", when=mentions(project, ":active")))
    message = delivery_message(Delivery(project, webhook_id, seq, 2))

    assert dispatch(stack, message)["batchItemFailures"]
    assert fault.fired
    faults.dynamodb.clear()
    assert dispatch(stack, message)["batchItemFailures"] == []

    assert hooks(project, "GET", webhook_id).body["status"] == "active"


# -- 4. creates whose commit succeeded but whose answer was lost (the SDK retries them) -------------------


def items_of(stack: AwsStack, table: str, project: str) -> list[dict[str, Any]]:
    """Every item of ``table`` that belongs to ``project`` (by key or by its projectId)."""
    found = []
    for item in scan_all(stack.dynamodb, stack.tables[table]):
        if project in item["pk"]["S"] or item.get("projectId", {}).get("S") == project:
            found.append(item)
    return found


def keys_of(stack: AwsStack, project: str) -> list[str]:
    items = items_of(stack, "ProjectsTable", project)
    return sorted(item["pk"]["S"] for item in items if item["pk"]["S"].startswith("apikey#"))


def authorizes(api_key: str) -> bool:
    return str(authorize(f"Bearer {api_key}")["policyDocument"]["Statement"][0]["Effect"]) == "Allow"


def test_a_project_creation_whose_answer_was_lost_answers_201_with_a_working_key(
    stack: AwsStack, faults: Faults
) -> None:
    fault = faults.dynamodb.add(Fault("TransactWriteItems", "lost_retried", when=mentions("project#")))
    reply = call("admin", "POST", "/v1/admin/projects", body={"name": "retried"}, context=ADMIN_CONTEXT)

    assert fault.fired
    assert reply.status == 201, reply.body
    project = reply.body["projectId"]
    assert keys_of(stack, project) == [f"apikey#{reply.body['keyId']}"]
    assert authorizes(reply.body["apiKey"])


def test_a_key_creation_whose_answer_was_lost_answers_201_with_that_key(
    stack: AwsStack, faults: Faults
) -> None:
    project = create_project()["projectId"]
    fault = faults.dynamodb.add(
        Fault("TransactWriteItems", "lost_retried", when=mentions(project, "apikey#"))
    )
    reply = add_key(project, {"scopes": ["read"]})

    assert fault.fired
    assert reply.status == 201, reply.body  # was 404 project_not_found, with the key stored
    assert f"apikey#{reply.body['keyId']}" in keys_of(stack, project)
    assert len(keys_of(stack, project)) == 2
    assert authorizes(reply.body["apiKey"])


def test_a_key_creation_that_lost_a_race_is_retried_and_one_that_keeps_losing_answers_429(
    stack: AwsStack, faults: Faults
) -> None:
    project = create_project()["projectId"]
    once = faults.dynamodb.add(
        Fault("TransactWriteItems", "conflict", conflict_at=0, when=mentions(project, "apikey#"))
    )
    assert add_key(project, {"scopes": ["read"]}).status == 201
    assert once.fired
    faults.dynamodb.add(
        Fault("TransactWriteItems", "conflict", conflict_at=0, times=100, when=mentions(project, "apikey#"))
    )
    busy = add_key(project, {"scopes": ["read"]})

    assert (busy.status, busy.body["error"]["code"]) == (429, "project_busy")  # was 404
    assert len(keys_of(stack, project)) == 2
    assert add_key(f"prj_{'0' * 26}", {"scopes": ["read"]}).status == 404


def test_a_webhook_creation_whose_answer_was_lost_answers_201_and_counts_it_once(
    stack: AwsStack, faults: Faults
) -> None:
    project = new_project()
    fault = faults.dynamodb.add(Fault("TransactWriteItems", "lost_retried", when=mentions(project, "wh#")))
    reply = hooks(project, "POST", body={"url": "https://example.com/hook", "events": ["memory.forgotten"]})

    assert fault.fired
    assert reply.status == 201, reply.body  # was 500, with a subscription nobody had the secret of
    assert [hook["id"] for hook in hooks(project, "GET").body["webhooks"]] == [reply.body["id"]]
    head = wiring.webhook_store().head(ProjectId(project))
    assert head == (0, 1, True)  # counted once: (last seq, subscribers, exists)


def test_a_test_event_whose_answer_was_lost_is_emitted_once(stack: AwsStack, faults: Faults) -> None:
    project = new_project()
    webhook_id = subscribe(project, "https://example.com/hook")["id"]
    fault = faults.dynamodb.add(
        Fault("TransactWriteItems", "lost_retried", when=mentions(f"{project}#outbox"))
    )
    reply = hooks(project, "POST", f"{webhook_id}/test")

    assert fault.fired
    assert reply.status == 202, reply.body
    outbox = [item["sk"]["S"] for item in items_of(stack, "WebhooksTable", f"{project}#outbox")]
    assert sorted(outbox) == [f"{reply.body['seq']:012d}", "head"]  # was two events, two pings


# -- 8. index writes: postings on the side the memory's status says, none left behind -------------------

#: More distinct words than one index transaction takes (49 terms): indexed in two chunks.
LONG_WORDS: tuple[str, ...] = tuple(
    " ".join(
        [
            "alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike november",
            "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu amber bronze",
            "cobalt denim ebony fuchsia garnet henna indigo jasper khaki lilac magenta navy olive peach",
            "quartz russet sepia teal umber violet wheat xanadu yellow zaffre acorn birch cedar dahlia",
            "elmwood fennel gingko",
        ]
    ).split()
)
LONG_TEXT = "Inventory words " + " ".join(LONG_WORDS)


def postings_by_side(stack: AwsStack, project: str, memory_id: str) -> Counter[str]:
    """How many postings ``memory_id`` has on each side (``tc``, ``th``)."""
    items = _project_items(stack, stack.tables["TermIndexTable"], project)
    return Counter(i["pk"]["S"].split("#")[1] for i in items if i["sk"]["S"].endswith("#" + memory_id))


def doc_freq(stack: AwsStack, project: str, term: str) -> int:
    items = stack.dynamodb.query(
        TableName=stack.tables["TermIndexTable"],
        KeyConditionExpression="pk = :pk AND begins_with(sk, :df)",
        ExpressionAttributeValues={":pk": {"S": f"{project}#tc#{term}"}, ":df": {"S": "~df#"}},
    )["Items"]
    return sum(int(item["df"]["N"]) for item in items)


def long_text_keys(stack: AwsStack, project: str) -> list[str]:
    """The index's keys holding a stem of LONG_WORDS (postings, counters) or an index marker."""
    stems = set(analyze(" ".join(LONG_WORDS)))
    items = _project_items(stack, stack.tables["TermIndexTable"], project)
    keys = {i["pk"]["S"] for i in items}
    return sorted(k for k in keys if k.rsplit("#", 1)[-1] in stems or k.startswith(f"{project}#ix#"))


def a_structured_target(stack: AwsStack, project: str) -> str:
    """An active structured memory dated 2025-01-07 (a late statement is filed behind it)."""
    reply = remember(project, body_of([("t1", "The release target is July 13.", "2025-01-07T09:00:00Z")]))
    structure_until_done(stack, take_job_messages(stack, {reply.body["jobId"]}))
    return f"{reply.body['memories'][0]['id']}-1"


def a_late_statement(
    stack: AwsStack, project: str, text: str, target: str
) -> tuple[str, list[dict[str, Any]]]:
    """An older statement superseding ``target``, remembered: (its structured memory's id, its job's
    messages)."""
    reply = remember(
        project,
        {
            "stream": STREAM,
            "events": [message("l1", text, occurredAt="2025-01-06T09:00:00Z", supersedes=[target])],
        },
    )
    return f"{reply.body['memories'][0]['id']}-1", take_job_messages(stack, {reply.body["jobId"]})


def test_a_memory_staged_as_history_and_committed_current_by_a_redelivery_is_indexed_once_on_the_current_side(
    stack: AwsStack, faults: Faults
) -> None:
    """Staged behind a newer memory (history side), its commit fails; the newer one is forgotten, so
    the redelivery commits it active: its postings move to the current side, each once, each term
    counted once, and its forget and purge leave none of its stems."""
    project = new_project()
    target = a_structured_target(stack, project)
    late_id, messages = a_late_statement(stack, project, LONG_TEXT, target)
    faults.dynamodb.add(Fault("TransactWriteItems", "throughput", when=mentions(project, '":replaced"')))
    assert run_structure(stack, messages, as_deployed=True)["batchItemFailures"]
    faults.dynamodb.clear()
    staged = postings_by_side(stack, project, late_id)
    assert list(staged) == ["th"]
    assert forget(project, {"memoryId": target, "reason": "wrong date"}).status == 200

    assert run_structure(stack, messages, as_deployed=True)["batchItemFailures"] == []

    assert postings_by_side(stack, project, late_id) == {"tc": staged["th"]}
    assert {doc_freq(stack, project, term) for term in analyze(" ".join(LONG_WORDS))} == {1}
    assert late_id in [memory_id for memory_id, _ in recalled(project, "xanadu zaffre inventory")]
    gone = forget_now(project, {"memoryId": late_id, "reason": "erase"})
    assert gone.status == 200, gone.body
    purge_later()
    assert receipt(project, gone.body["receipt"]["id"]).body["state"] == "purged"
    assert long_text_keys(stack, project) == []


def test_a_memory_re_resolved_current_within_its_run_moves_its_postings_to_the_current_side(
    stack: AwsStack,
) -> None:
    """The newer memory it was filed behind is forgotten between its staging and its commit: the
    commit's condition fails, the same run resolves it again as active and commits it; its postings
    follow it to the current side, and recall finds it."""
    project = new_project()
    target = a_structured_target(stack, project)
    late_id, messages = a_late_statement(stack, project, "Quarterly zebra inventory finished early.", target)
    forgotten: list[int] = []

    def forget_the_target_before_the_commit(model: Any, params: dict[str, Any], **_: Any) -> None:
        body = params["body"].decode()
        if model.name == "TransactWriteItems" and not forgotten and project in body and '":replaced"' in body:
            forgotten.append(forget(project, {"memoryId": target, "reason": "wrong date"}).status)

    client = wiring.dynamodb()
    client.meta.events.register(
        "before-call.dynamodb", forget_the_target_before_the_commit, unique_id="re-resolve"
    )
    try:
        # A forget runs inside this structuring run: its calls are the forget function's.
        assert run_structure(stack, messages, as_deployed=True, iam_checked=False)["batchItemFailures"] == []
    finally:
        client.meta.events.unregister("before-call.dynamodb", unique_id="re-resolve")

    assert forgotten == [200]
    assert list(postings_by_side(stack, project, late_id)) == ["tc"]
    assert late_id in [memory_id for memory_id, _ in recalled(project, "zebra inventory")]


def history_postings(stack: AwsStack, project: str, memory_id: str) -> set[tuple[int | None, str | None]]:
    """The (validTo in ms, successor) each history posting of ``memory_id`` carries."""
    items = _project_items(stack, stack.tables["TermIndexTable"], project)
    return {
        (posting.valid_to_ms, posting.successor)
        for item in items
        if item["pk"]["S"].split("#")[1] == "th" and item["sk"]["S"].endswith("#" + memory_id)
        for posting in [decode_posting(memory_id, item["p"]["S"])]
    }


def test_a_memory_staged_behind_one_memory_and_committed_behind_its_successor_carries_the_final_end(
    stack: AwsStack, faults: Faults
) -> None:
    """Filed behind the target (history, ending when the target began), its commit fails; the
    target is then superseded by a newer memory, so the redelivery files it behind that one: the
    same side, a later end. Its postings carry the final validTo and successor, not the staged
    ones (recall's asOf filter reads them, without the item)."""
    project = new_project()
    target = a_structured_target(stack, project)
    late_id, messages = a_late_statement(stack, project, LONG_TEXT, target)
    faults.dynamodb.add(Fault("TransactWriteItems", "throughput", when=mentions(project, '":replaced"')))
    assert run_structure(stack, messages, as_deployed=True)["batchItemFailures"]
    faults.dynamodb.clear()
    began = get_memory(project, target).body["validFrom"]
    assert history_postings(stack, project, late_id) == {(instant_ms(began), target)}
    staged = postings_by_side(stack, project, late_id)
    newer = remember(
        project,
        {
            "stream": STREAM,
            "events": [
                message(
                    "t2",
                    "The release target is July 20.",
                    occurredAt="2025-01-08T09:00:00Z",
                    supersedes=[target],
                )
            ],
        },
    )
    structure_until_done(stack, take_job_messages(stack, {newer.body["jobId"]}))
    successor = get_memory(project, target).body["supersededBy"][-1]

    assert run_structure(stack, messages, as_deployed=True)["batchItemFailures"] == []

    late = get_memory(project, late_id).body
    assert (late["status"], late["supersededBy"]) == ("superseded", [successor])
    final_end = get_memory(project, successor).body["validFrom"]
    assert late["validTo"] == final_end != began
    assert history_postings(stack, project, late_id) == {(instant_ms(final_end), successor)}
    assert postings_by_side(stack, project, late_id) == staged  # written again where they were


def test_postings_of_a_provisional_index_that_never_finished_are_purged_with_its_forgotten_stream(
    stack: AwsStack, faults: Faults
) -> None:
    """remember's index of a long event applies its first chunk, never its last (which writes the
    memory item); the stream is forgotten: the purge finds those postings by their index marker."""
    project = new_project()
    fault = faults.dynamodb.add(
        Fault(
            "TransactWriteItems",
            "throughput",
            nth=2,
            times=1000,
            when=both(mentions(project), touches(stack.tables["TermIndexTable"])),
        )
    )
    reply = remember(project, {"stream": STREAM, "events": [message("k1", LONG_TEXT)]})
    faults.dynamodb.clear()
    assert fault.fired
    assert reply.status == 202
    assert reply.body["memories"] == []
    assert long_text_keys(stack, project)  # the first chunk's postings, counters and marker

    gone = forget_now(project, {"stream": STREAM, "reason": "erase"})
    assert gone.status == 200, gone.body
    purge_later()

    assert receipt(project, gone.body["receipt"]["id"]).body["state"] == "purged"
    assert long_text_keys(stack, project) == []


def test_postings_of_a_staged_memory_whose_index_never_finished_are_purged_with_its_event(
    stack: AwsStack, faults: Faults
) -> None:
    """Structuring stages a long memory: its first chunk is applied, its last never; the event is
    forgotten before the redelivery (which is refused): the purge erases the staged postings."""
    project = new_project()
    reply = remember(project, {"stream": STREAM, "events": [message("k1", LONG_TEXT)]})
    messages = take_job_messages(stack, {reply.body["jobId"]})
    staged_id = f"{reply.body['memories'][0]['id']}-1"
    fault = faults.dynamodb.add(
        Fault(
            "TransactWriteItems",
            "throughput",
            nth=2,
            times=1000,
            when=both(mentions(project, staged_id), touches(stack.tables["TermIndexTable"])),
        )
    )
    assert run_structure(stack, messages, as_deployed=True)["batchItemFailures"]
    faults.dynamodb.clear()
    assert fault.fired
    assert postings_by_side(stack, project, staged_id)

    gone = forget_now(project, {"stream": STREAM, "reason": "erase"})
    assert gone.status == 200, gone.body
    assert run_structure(stack, messages, as_deployed=True)["batchItemFailures"] == []  # refused
    purge_later()

    assert receipt(project, gone.body["receipt"]["id"]).body["state"] == "purged"
    assert long_text_keys(stack, project) == []


# -- the index repair (tools/repair_index.py): damage older versions left ---------------------------------


def repair_index(stack: AwsStack, project: str, *extra: str) -> int:
    return repair_main(
        [
            "--memories-table",
            stack.tables["MemoriesTable"],
            "--index-table",
            stack.tables["TermIndexTable"],
            "--endpoint-url",
            stack.endpoint_url,
            "--project",
            project,
            *extra,
        ]
    )


def damaged(stack: AwsStack, project: str, memory_id: str) -> tuple[DynamoStructuringStore, MemoryRecord]:
    """The structuring store on the stack's tables, and ``memory_id`` as stored."""
    store = DynamoStructuringStore(
        stack.dynamodb, stack.tables["MemoriesTable"], stack.tables["TermIndexTable"]
    )
    memory = store.get(ProjectId(project), memory_id)
    assert memory is not None
    return store, memory


def test_the_index_repair_moves_and_rewrites_postings_older_versions_left_wrong_and_nothing_else(
    stack: AwsStack,
) -> None:
    """An active memory whose postings were left on the history side (its item recording no side, as
    items written then), and a superseded one whose postings lost their end and successor: the
    repair puts the first's on the current side and rewrites the second's;
    a healthy project is left exactly as it was, and a second run changes nothing."""
    healthy = new_project()
    remembered_and_structured(stack, healthy)
    expected = state(stack, healthy)
    project = new_project()
    (reply,) = remembered_and_structured(stack, project)
    older = f"{reply.body['memories'][0]['id']}-1"
    store, retired = damaged(stack, project, older)
    newer = retired.superseded_by[-1]
    _, active = damaged(stack, project, newer)
    store.move_postings(active, "c", "h")
    stack.dynamodb.update_item(
        TableName=stack.tables["MemoriesTable"],
        Key={"pk": {"S": f"{project}#{newer}"}},
        UpdateExpression="REMOVE ix",
    )
    store.restate_postings(replace(retired, valid_to=None, superseded_by=()), "h")
    posted = postings_by_side(stack, project, newer)
    assert list(posted) == ["th"]
    assert history_postings(stack, project, older) == {(None, None)}

    assert repair_index(stack, project) == 0

    assert postings_by_side(stack, project, newer) == {"tc": posted["th"]}
    assert newer in [memory_id for memory_id, _ in recalled(project, "release target")]
    assert retired.valid_to is not None
    assert history_postings(stack, project, older) == {(instant_ms(retired.valid_to), newer)}
    repaired = state(stack, project)
    assert repair_index(stack, project) == 0
    assert state_difference(repaired, state(stack, project)) == []
    assert repair_index(stack, healthy) == 0
    assert state_difference(expected, state(stack, healthy)) == []


def test_the_index_repair_erases_the_postings_of_an_index_that_never_finished_before_markers_existed(
    stack: AwsStack, faults: Faults, capsys: pytest.CaptureFixture[str]
) -> None:
    """remember's index of a long event applied its first chunk, never its last, and left no marker
    (as before markers existed): no memory accounts for those postings. The repair erases them, with
    the counters they leave at zero (their keys hold stems), in runs bounded by --max-items that each
    resume where the last stopped."""
    project = new_project()
    faults.dynamodb.add(
        Fault(
            "TransactWriteItems",
            "throughput",
            nth=2,
            times=1000,
            when=both(mentions(project), touches(stack.tables["TermIndexTable"])),
        )
    )
    reply = remember(project, {"stream": STREAM, "events": [message("k1", LONG_TEXT)]})
    faults.dynamodb.clear()
    assert reply.status == 202
    (marker,) = [key for key in long_text_keys(stack, project) if f"{project}#ix#" in key]
    stack.dynamodb.delete_item(
        TableName=stack.tables["TermIndexTable"], Key={"pk": {"S": marker}, "sk": {"S": "marker"}}
    )
    assert long_text_keys(stack, project)  # the first chunk's postings and counters

    runs = [repair_index(stack, project, "--max-items", "40")]
    while runs[-1] == STOPPED_EXIT and len(runs) < 50:
        resume = re.search(r"--cursor '([^']*)'", capsys.readouterr().out)
        assert resume is not None
        cursor = resume.group(1)
        runs.append(repair_index(stack, project, "--max-items", "40", "--cursor", cursor))

    assert runs[-1] == 0
    assert len(runs) > 2  # bounded: several runs, each resumed
    assert long_text_keys(stack, project) == []
    assert long_text_keys(stack, project) == []


# -- 9. races DynamoDB answers with an error: a transaction still in progress, a transaction conflict -----
#
# ``in_progress``: the SDK's retry met its own first attempt still committing and gave up; that first
# attempt commits. The store asks again with the same ClientRequestToken and DynamoDB answers with
# the first attempt's outcome (kaibo_core.adapters.dynamodb_transactions). Before, every one was a 500.

#: Calls a fault answers when it is meant to outlast every retry of the request.
KEEPS_RACING = 1000


def fault_free_reference(stack: AwsStack, *, forgotten: bool = False) -> str:
    """A project through the flow without faults (its batch remembered and structured, and
    forgotten by ``FORGET`` if ``forgotten``): the state a raced project must end in."""
    reference = new_project()
    remembered_and_structured(stack, reference)
    if forgotten:
        assert forget(reference, FORGET).status == 200
    return reference


def event_transaction(stack: AwsStack, project: str) -> Callable[[dict[str, Any]], bool]:
    """The requests of ``project``'s event transaction (remember's commit)."""
    return both(mentions(project), touches(stack.tables["EventsTable"]))


@contextmanager
def racing(faults: Faults, fault: Fault) -> Iterator[Fault]:
    """A fresh copy of ``fault`` on the container's DynamoDB client for the block; none after it."""
    added = faults.dynamodb.add(replace(fault))
    try:
        yield added
    finally:
        faults.dynamodb.clear()


def in_progress(*texts: str) -> Fault:
    """A transaction still in progress when the SDK retried it, for requests holding ``texts``."""
    return Fault("TransactWriteItems", "in_progress", when=mentions(*texts))


def test_an_event_transaction_still_in_progress_is_asked_again_with_its_token_and_written_once(
    stack: AwsStack, faults: Faults
) -> None:
    reference = fault_free_reference(stack)
    project = new_project()
    fault = faults.dynamodb.add(
        Fault("TransactWriteItems", "in_progress", when=event_transaction(stack, project))
    )

    reply = remember_ok(project)

    assert fault.fired == ["TransactWriteItems"]
    assert [e["replayed"] for e in reply.body["events"]] == [False, False]
    assert queued_job_ids(stack) == [reply.body["jobId"]]
    structure_until_done(stack, take_job_messages(stack, {reply.body["jobId"]}))
    assert_acknowledged_events_kept(project, [reply])
    assert_recall_as_without_faults(reference, project)
    assert_same_state(stack, reference, project)


def test_an_event_transaction_in_progress_past_the_deadline_answers_429_and_the_retry_replays_it(
    stack: AwsStack, faults: Faults
) -> None:
    """The first attempt commits (whole: a transaction), but it is still in progress whenever it
    is asked again: 429 with Retry-After, and the client's retry with the same keys replays it."""
    reference = fault_free_reference(stack)
    project = new_project()
    faults.dynamodb.add(
        Fault("TransactWriteItems", "in_progress", times=KEEPS_RACING, when=event_transaction(stack, project))
    )

    busy = remember(project, body_of(BATCH))

    assert busy.status == 429, busy.body
    assert busy.body["error"]["code"] == "stream_busy"
    assert busy.headers["Retry-After"] == "1"
    assert len(events(project, STREAM).body["events"]) == 2  # the first attempt: once, whole
    faults.dynamodb.clear()
    retried = remember_ok(project)
    assert [e["replayed"] for e in retried.body["events"]] == [True, True]
    assert sweep_later() == 1  # its job, whose message the busy request never sent
    structure_until_done(stack, take_job_messages(stack, {retried.body["jobId"]}))
    assert_acknowledged_events_kept(project, [retried])
    assert_recall_as_without_faults(reference, project)
    assert_same_state(stack, reference, project)


@pytest.mark.parametrize("step", ["ledger append", "index removal"])
def test_a_forget_transaction_still_in_progress_is_asked_again_with_its_token_and_forgets_once(
    stack: AwsStack, faults: Faults, step: str
) -> None:
    reference = fault_free_reference(stack, forgotten=True)
    project = new_project()
    replies = remembered_and_structured(stack, project)
    operation, when = forget_step(stack, project, step)
    fault = faults.dynamodb.add(Fault(operation, "in_progress", when=when))

    reply = forget(project, FORGET)

    assert fault.fired == [operation]
    assert reply.status == 200, reply.body
    assert len(ledger(project).body["entries"]) == 1
    assert purge_later()["applied"] == 0  # nothing left to finish
    assert recalled(project, "release target") == []
    assert_acknowledged_events_kept(project, replies)
    assert_same_state(stack, reference, project)


def test_a_ledger_append_that_keeps_conflicting_answers_429_writes_nothing_and_the_retry_forgets_once(
    stack: AwsStack, faults: Faults
) -> None:
    reference = fault_free_reference(stack, forgotten=True)
    project = new_project()
    replies = remembered_and_structured(stack, project)
    before = state(stack, project)
    operation, when = forget_step(stack, project, "ledger append")
    faults.dynamodb.add(Fault(operation, "conflict", times=KEEPS_RACING, when=when))

    busy = forget(project, FORGET)

    assert busy.status == 429, busy.body
    assert busy.body["error"]["code"] == "ledger_busy"
    assert busy.headers["Retry-After"] == "1"
    assert ledger(project).body["entries"] == []
    assert state(stack, project) == before  # nothing of it
    faults.dynamodb.clear()
    assert forget(project, FORGET).status == 200
    assert len(ledger(project).body["entries"]) == 1
    assert_acknowledged_events_kept(project, replies)
    assert_same_state(stack, reference, project)


@pytest.mark.parametrize(
    ("kind", "times"),
    [("in_progress", 1), ("in_progress", KEEPS_RACING), ("conflict", KEEPS_RACING)],
    ids=["in-progress-once", "in-progress-past-the-deadline", "conflicting-past-the-deadline"],
)
def test_a_structuring_commit_racing_converges_in_the_run_or_when_the_message_is_redelivered(
    stack: AwsStack, faults: Faults, kind: Any, times: int
) -> None:
    """Asked again with its token, a commit still in progress is done in the same run; one that
    keeps racing fails the message (the first attempt committed whole, or nothing did), and the
    redelivery ends in the fault-free state."""
    reference = fault_free_reference(stack)
    project = new_project()
    reply = remember_ok(project)
    messages = take_job_messages(stack, {reply.body["jobId"]})
    operation, when = structuring_step(stack, project, "commit")
    fault = faults.dynamodb.add(Fault(operation, kind, times=times, when=when))

    first = run_structure(stack, messages, as_deployed=True)
    faults.dynamodb.clear()

    assert fault.fired
    failed = [f["itemIdentifier"] for f in first["batchItemFailures"]]
    assert failed == ([] if times == 1 else [messages[0]["MessageId"]])
    structure_until_done(stack, messages)
    assert get_job(project, reply.body["jobId"]).body["status"] == "done"
    assert_acknowledged_events_kept(project, [reply])
    assert_recall_as_without_faults(reference, project)
    assert_same_state(stack, reference, project)


def outbox_event_keys(stack: AwsStack, project: str) -> list[str]:
    return sorted(item["sk"]["S"] for item in items_of(stack, "WebhooksTable", f"{project}#outbox"))


def test_webhook_writes_still_in_progress_are_asked_again_with_their_token_and_made_once(
    stack: AwsStack, faults: Faults
) -> None:
    project = new_project()
    with racing(faults, in_progress(project, "wh#")):
        created = hooks(
            project, "POST", body={"url": "https://example.com/hook", "events": ["memory.forgotten"]}
        )
        assert created.status == 201, created.body
        assert [hook["id"] for hook in hooks(project, "GET").body["webhooks"]] == [created.body["id"]]
        assert wiring.webhook_store().head(ProjectId(project)) == (0, 1, True)

    with racing(faults, in_progress(f"{project}#outbox")):
        sent = hooks(project, "POST", f"{created.body['id']}/test")
        assert sent.status == 202, sent.body
        assert outbox_event_keys(stack, project) == [f"{sent.body['seq']:012d}", "head"]

    with racing(faults, in_progress(project, "wh#")):
        assert hooks(project, "DELETE", created.body["id"]).status == 204
        assert hooks(project, "GET").body["webhooks"] == []
        assert wiring.webhook_store().head(ProjectId(project)) == (1, 0, True)


def test_webhook_writes_that_keep_conflicting_answer_429_and_write_nothing(
    stack: AwsStack, faults: Faults
) -> None:
    """Creating a webhook, sending it a test event, deleting it: each answers 429 with Retry-After
    when its transaction keeps meeting another one, writes nothing, and goes through once retried
    (the test event too: its webhook was not stamped as tested)."""
    project = new_project()
    keeps_conflicting = Fault("TransactWriteItems", "conflict", times=KEEPS_RACING, when=mentions(project))

    def refused(reply: Reply) -> bool:
        return (reply.status, reply.body["error"]["code"], reply.headers.get("Retry-After")) == (
            429,
            "transaction_busy",
            "1",
        )

    with racing(faults, keeps_conflicting):
        assert refused(
            hooks(project, "POST", body={"url": "https://example.com/hook", "events": ["memory.forgotten"]})
        )
        assert hooks(project, "GET").body["webhooks"] == []
    webhook_id = subscribe(project, "https://example.com/hook")["id"]

    with racing(faults, keeps_conflicting):
        assert refused(hooks(project, "POST", f"{webhook_id}/test"))
        assert outbox_event_keys(stack, project) == ["head"]
    assert hooks(project, "POST", f"{webhook_id}/test").status == 202  # not "too soon": nothing was sent

    with racing(faults, keeps_conflicting):
        assert refused(hooks(project, "DELETE", webhook_id))
        assert [hook["id"] for hook in hooks(project, "GET").body["webhooks"]] == [webhook_id]
    assert hooks(project, "DELETE", webhook_id).status == 204


def test_admin_creates_still_in_progress_are_asked_again_with_their_token_and_made_once(
    stack: AwsStack, faults: Faults
) -> None:
    with racing(faults, in_progress("project#")):
        made = call("admin", "POST", "/v1/admin/projects", body={"name": "racing"}, context=ADMIN_CONTEXT)
        assert made.status == 201, made.body
        project = made.body["projectId"]
        assert keys_of(stack, project) == [f"apikey#{made.body['keyId']}"]
        assert authorizes(made.body["apiKey"])

    with racing(faults, in_progress(project, "apikey#")):
        added = add_key(project, {"scopes": ["read"]})
        assert added.status == 201, added.body
        assert sorted(keys_of(stack, project)) == sorted(
            [f"apikey#{made.body['keyId']}", f"apikey#{added.body['keyId']}"]
        )
        assert authorizes(added.body["apiKey"])
