"""forget through the real handlers against the emulator (#16, first part): set resolution, dry
run and preview token, tombstone at once, the ledger and receipts, scopes and tenancy."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from kaibo_core.adapters import aws
from kaibo_core.adapters.dynamodb_forget import DynamoForgetStore
from kaibo_core.adapters.dynamodb_index import DynamoTermIndex
from kaibo_core.adapters.dynamodb_ledger import DynamoLedgerStore
from kaibo_core.adapters.dynamodb_values import key
from kaibo_core.core import storage_keys
from kaibo_core.core.chain import ChainVerifier, canonicalize
from kaibo_core.core.forgetting import ForgetRequest as CoreForgetRequest
from kaibo_core.core.forgetting import normalized_request
from kaibo_core.core.ledger import LedgerVerifier
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.core.text import analyze
from kaibo_core.runtime import wiring
from kaibo_core.runtime.observability import FunctionFailedError
from kaibo_core.runtime.settings import get_settings
from kaibo_core.services.forgetting import ForgetService
from kaibo_core.services.purging import Purger
from tests.conftest import emulator_client, scan_all
from tests.integration.api import FakeLambdaContext, Reply, call, get_job, handler_module, project_context
from tests.integration.iam_calls import checked_invocation
from tests.integration.test_recall_api import get_memory, recall
from tests.integration.test_remember_api import events, message, new_project, remember
from tests.integration.test_structuring_api import explain, run_structure, take_job_messages


def forget(project: str, body: dict[str, Any], scopes: str = "forget read") -> Reply:
    return call("forget", "POST", "/v1/forget", body=body, context=project_context(project, scopes))


def receipt(project: str, receipt_id: str) -> Reply:
    return call(
        "memories",
        "GET",
        f"/v1/receipts/{receipt_id}",
        resource="/v1/receipts/{receipt_id}",
        path_parameters={"receipt_id": receipt_id},
        context=project_context(project, "read"),
    )


def ledger(project: str, from_seq: int = 1) -> Reply:
    return call(
        "memories",
        "GET",
        "/v1/ledger",
        query=[("fromSeq", str(from_seq))],
        context=project_context(project, "read"),
    )


def remember_structured(stack: Any, project: str, stream: str, *texts: str) -> list[dict[str, Any]]:
    """Remember each text as its own event and structure it with the rules, in order; the
    structured memories of each (from its job)."""
    made = []
    for number, text in enumerate(texts):
        reply = remember(project, {"stream": stream, "events": [message(f"{stream}-{number}", text)]})
        assert reply.status == 202, reply.body
        job = reply.body["jobId"]
        run_structure(stack, take_job_messages(stack, {job}), as_deployed=True)
        made.append(reply.body)
    return made


def memory_ids_of(project: str, remembered: dict[str, Any]) -> list[str]:
    provisional = remembered["memories"][0]["id"]
    return [provisional, *get_memory(project, provisional).body["replacedBy"]]


def recalled_ids(project: str, question: str, **extra: Any) -> list[str]:
    reply = recall(project, {"question": question, **extra})
    assert reply.status == 200, reply.body
    return [item["memoryId"] for item in reply.body["items"]]


def every_item(stack: Any) -> dict[str, list[dict[str, Any]]]:
    return {name: sorted(scan_all(stack.dynamodb, table), key=repr) for name, table in stack.tables.items()}


def corpus_docs(stack: Any, project: str) -> int:
    index = DynamoTermIndex(stack.dynamodb, stack.tables["TermIndexTable"], clock=lambda: 0.0)
    return index.read(ProjectId(project), [], 1, history=False)[1].docs


def test_given_an_old_fact_when_forgotten_by_id_then_the_newer_version_from_another_event_stays(
    handler_env: Any,
) -> None:
    project = new_project()
    old, new = remember_structured(
        handler_env,
        project,
        "chat",
        "The release target is July 13.",
        "Move the release target from July 13 to July 17.",
    )
    old_ids, new_ids = memory_ids_of(project, old), memory_ids_of(project, new)
    docs_before = corpus_docs(handler_env, project)

    reply = forget(project, {"memoryId": old_ids[1], "reason": "wrong date, entered by mistake"})

    assert reply.status == 200, reply.body
    assert {m["id"]: m["why"] for m in reply.body["memories"]} == {
        old_ids[1]: "match",
        old_ids[0]: "older_version",
    }
    assert all("content" not in m for m in reply.body["memories"])  # a real forget never echoes text
    assert reply.body["eventIds"] == [old["events"][0]["id"]]
    assert any(get_memory(project, memory_id).body.get("subject") for memory_id in new_ids)  # kept while live
    for memory_id in old_ids:
        shown = get_memory(project, memory_id).body
        assert shown["status"] == "tombstoned"
        assert "content" not in shown
        assert "subject" not in shown  # "release target": taken from the text, withheld with it
        assert "tags" not in shown
    newer = [get_memory(project, memory_id).body for memory_id in new_ids[1:]]
    assert all(memory["status"] == "active" for memory in newer)  # not taken: another event
    (successor,) = [memory["id"] for memory in newer if old_ids[1] in memory["supersedes"]]
    chain = explain(project, successor).body["chain"]
    forgotten_versions = [v for v in chain if v["memoryId"] in old_ids]
    assert forgotten_versions  # the newer version's history still names them...
    assert all(v["status"] == "tombstoned" and "content" not in v for v in forgotten_versions)  # ...textless
    questions: list[tuple[str, dict[str, Any]]] = [
        ("When is the release target?", {}),
        ("July 13 release target", {"includeSuperseded": True}),
        ("release target", {"asOf": "2020-01-01T00:00:00Z", "includeSuperseded": True}),
    ]
    for question, extra in questions:
        assert not set(recalled_ids(project, question, **extra)) & set(old_ids), question
        streamed = recall(project, {"question": question, **extra}, accept="text/event-stream")
        assert streamed.status == 200
        assert not any(memory_id in streamed.body for memory_id in old_ids), question  # SSE too
    assert (
        successor
        in recall(project, {"question": "When is the release target?"}, accept="text/event-stream").body
    )
    assert corpus_docs(handler_env, project) == docs_before - 1  # the structured memory; its
    # provisional copy was replaced (unindexed) already


def test_given_a_forget_then_its_receipt_and_ledger_entry_prove_it(handler_env: Any) -> None:
    project = new_project()
    (made,) = remember_structured(handler_env, project, "chat", "My locker code is 4471.")
    reason = "user asked to erase the locker code"

    reply = forget(project, {"query": "locker code", "reason": reason})

    assert reply.status == 200, reply.body
    entry, salt = reply.body["receipt"], reply.body["reasonSalt"]
    assert entry["ledgerSeq"] == 1
    assert entry["prevHash"] == "00" * 32
    assert entry["reasonDigest"] == hashlib.sha256(bytes.fromhex(salt) + reason.encode()).hexdigest()
    assert sorted(entry["memoryIds"]) == sorted(memory_ids_of(project, made))
    assert entry["eventIds"] == [made["events"][0]["id"]]
    served = receipt(project, entry["id"])
    assert served.status == 200
    assert served.body == {**entry, "state": "tombstoned"}
    assert ledger(project).body == {"entries": [entry]}
    stored = repr(every_item(handler_env))
    assert reason not in stored  # only its salted digest is stored
    assert salt not in stored  # and not the salt that would let a guess be confirmed
    assert receipt(new_project(), entry["id"]).status == 404  # another project: as if missing
    assert receipt(project, "rcpt_01JUNKNOWN").status == 404


def test_given_a_key_that_may_forget_but_not_read_then_its_dry_run_shows_the_set_without_text(
    handler_env: Any,
) -> None:
    project = new_project()
    remember_structured(handler_env, project, "chat", "The locker code is 4471.")

    blind = forget(project, {"stream": "chat", "reason": "r", "dryRun": True}, scopes="forget")
    reader = forget(project, {"stream": "chat", "reason": "r", "dryRun": True}, scopes="forget read")

    assert blind.status == reader.status == 200
    assert [m["id"] for m in blind.body["memories"]] == [m["id"] for m in reader.body["memories"]]
    assert all("content" not in m for m in blind.body["memories"])  # it could not GET them either
    assert any("4471" in m["content"] for m in reader.body["memories"])
    assert blind.body["previewToken"] == reader.body["previewToken"]


def test_given_a_dry_run_then_nothing_changes_and_a_stale_preview_token_is_refused(handler_env: Any) -> None:
    project = new_project()
    remember_structured(
        handler_env, project, "chat", "Lunch with Dana on Friday.", "Lunch with Omar on Monday."
    )
    before = every_item(handler_env)

    dry = forget(project, {"query": "lunch Dana", "reason": "r", "dryRun": True})

    assert dry.status == 200, dry.body
    assert every_item(handler_env) == before
    assert "receipt" not in dry.body
    assert "reasonSalt" not in dry.body
    assert all("Dana" in m["content"] for m in dry.body["memories"] if m["why"] == "match")  # all stems
    assert not any("Omar" in m.get("content", "") for m in dry.body["memories"])
    remember_structured(handler_env, project, "chat-2", "Lunch with Dana moved to the cafe.")
    stale = forget(project, {"query": "lunch Dana", "reason": "r", "previewToken": dry.body["previewToken"]})
    assert stale.status == 409
    assert stale.body["error"]["code"] == "preview_changed"
    fresh = forget(project, {"query": "lunch Dana", "reason": "r", "dryRun": True})
    done = forget(project, {"query": "lunch Dana", "reason": "r", "previewToken": fresh.body["previewToken"]})
    assert done.status == 200
    assert done.body["receipt"]["memoryIds"] == sorted(m["id"] for m in fresh.body["memories"])


def test_given_a_stream_when_forgotten_then_all_of_it_goes_and_nothing_of_another_stream(
    handler_env: Any,
) -> None:
    project = new_project()
    gone = remember_structured(
        handler_env, project, "private", "My bank PIN is 8812.", "My PIN hint is owls."
    )
    kept = remember_structured(handler_env, project, "work", "The PIN pad vendor is Acme.")
    gone_ids = {m for made in gone for m in memory_ids_of(project, made)}

    reply = forget(project, {"stream": "private", "reason": "erase the private stream"})

    assert reply.status == 200, reply.body
    assert {m["id"] for m in reply.body["memories"]} == gone_ids
    assert sorted(reply.body["eventIds"]) == sorted(made["events"][0]["id"] for made in gone)
    assert get_memory(project, memory_ids_of(project, kept[0])[1]).body["status"] == "active"
    assert recalled_ids(project, "PIN") == [memory_ids_of(project, kept[0])[1]]
    assert forget(project, {"stream": "nope", "reason": "r"}).status == 404


def test_given_a_set_larger_than_the_limit_then_it_is_refused_unless_max_memories_allows(
    handler_env: Any,
) -> None:
    project = new_project()
    texts = [f"Note {n} about the garden hose." for n in range(3)]
    remember_structured(handler_env, project, "chat", *texts)

    refused = forget(project, {"query": "garden hose", "reason": "r", "maxMemories": 2})
    assert refused.status == 422
    assert refused.body["error"]["code"] == "forget_set_too_large"
    allowed = forget(project, {"query": "garden hose", "reason": "r", "maxMemories": 6})
    assert allowed.status == 200
    assert len(allowed.body["memories"]) == 6  # three provisional, three structured


@pytest.mark.parametrize(
    "body",
    [
        {"reason": "r"},
        {"memoryId": "mem_x", "query": "q", "reason": "r"},
        {"query": "q"},
        {"query": "q", "reason": ""},
        {"query": "q", "reason": "r", "dryRun": "yes"},
        {"query": "q", "reason": "r", "previewToken": "short"},
        {"query": "q", "reason": "r", "maxMemories": 0},
        {"query": "q", "reason": "r", "maxMemories": 100_000},
        {"query": "q", "reason": "r", "extra": 1},
        {"subject": "Alice", "stream": "chat", "reason": "r"},
        {"subject": "", "reason": "r"},
        {"subject": "Alice"},
    ],
)
def test_given_a_bad_forget_request_then_422_and_nothing_written(
    handler_env: Any, body: dict[str, Any]
) -> None:
    project = new_project()
    reply = forget(project, body)
    assert reply.status == 422, reply.body
    assert ledger(project).body == {"entries": []}


def test_given_keys_without_the_forget_scope_or_another_project_then_refused_or_not_found(
    handler_env: Any,
) -> None:
    project = new_project()
    (made,) = remember_structured(handler_env, project, "chat", "The alarm code is 5150.")
    memory_id = memory_ids_of(project, made)[1]

    assert forget(project, {"memoryId": memory_id, "reason": "r"}, scopes="read write").status == 403
    other = forget(new_project(), {"memoryId": memory_id, "reason": "r"})
    assert other.status == 404
    assert other.body["error"]["code"] == "memory_not_found"
    assert get_memory(project, memory_id).body["status"] == "active"


def test_given_a_forgotten_event_then_structuring_and_a_replayed_key_bring_nothing_back(
    handler_env: Any,
) -> None:
    project = new_project()
    body = {"stream": "chat", "events": [message("k1", "The safe combination is 31-22-7.")]}
    first = remember(project, body)
    job = first.body["jobId"]
    assert forget(project, {"stream": "chat", "reason": "r"}).status == 200

    run_structure(handler_env, take_job_messages(handler_env, {job}), as_deployed=True)  # arrives late
    replay = remember(project, body)

    provisional = first.body["memories"][0]["id"]
    assert get_memory(project, provisional).body["status"] == "tombstoned"
    assert get_memory(project, provisional).body.get("replacedBy", []) == []
    assert replay.body["events"][0]["replayed"] is True
    assert [(m["status"], "content" in m) for m in replay.body["memories"]] == [("tombstoned", False)]
    assert recalled_ids(project, "safe combination") == []


# -- the purge ---------------------------------------------------------------------------------------


def forget_now(project: str, body: dict[str, Any]) -> Reply:
    """forget with no grace window: the next purge run erases what it took."""
    settings = get_settings()
    store = DynamoForgetStore(
        wiring.dynamodb(), settings.memories_table, settings.index_table, settings.events_table
    )
    ledger_store = DynamoLedgerStore(wiring.dynamodb(), settings.ledger_table)

    def clock() -> datetime:
        return datetime.now(UTC) - timedelta(seconds=1)

    service = ForgetService(
        store,
        wiring.event_store(),
        ledger_store,
        timedelta(0),
        clock,
        finish=Purger(ledger_store, store, clock).apply,
        salts=wiring.forget_salt_cipher(),
    )
    return call(
        "forget",
        "POST",
        "/v1/forget",
        body=body,
        context=project_context(project),
        services={"forget": service},
    )


SCHEDULED_EVENT = {"version": "0", "detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}


def run_purge() -> dict[str, Any]:
    handler = handler_module("purge").lambda_handler
    result: dict[str, Any] = checked_invocation("purge", handler, SCHEDULED_EVENT, FakeLambdaContext())
    return result


def list_events(project: str, stream: str) -> list[dict[str, Any]]:
    reply = events(project, stream)
    assert reply.status == 200, reply.body
    return list(reply.body["events"])


def marker_forms(word: str) -> list[str]:
    """Every form the pipeline keeps a word in: as written, case-folded, stemmed."""
    return sorted({word, word.casefold(), *analyze(word)})


def residue(stack: Any, forms: list[str]) -> list[str]:
    """Every stored item (every table, every queue message) holding one of ``forms``."""
    found: list[str] = []
    for name, items in every_item(stack).items():
        for item in items:
            text = json.dumps(item).casefold()
            found.extend(f"{name}: {form}" for form in forms if form.casefold() in text)
    for name, url in stack.queues.items():
        for queued in stack.sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0
        ).get("Messages", []):
            found.extend(f"{name}: {form}" for form in forms if form.casefold() in queued["Body"].casefold())
    return found


def test_given_a_marker_forgotten_and_purged_then_no_table_or_queue_holds_any_form_of_it(
    handler_env: Any,
) -> None:
    project = new_project()
    marker = "Quixotically"  # stems to "quixot": no other test says it
    forms = marker_forms(marker)
    made, kept = remember_structured(
        handler_env,
        project,
        "chat",
        f"The vault phrase is {marker} 9931.",
        "The vault door is painted green.",
    )
    assert recalled_ids(project, marker)
    assert residue(handler_env, forms)  # the scan finds it before: it can fail

    forgotten = forget_now(project, {"query": marker, "reason": "erase the vault phrase"})
    assert forgotten.status == 200, forgotten.body
    first, again = run_purge(), run_purge()

    assert first["entries"] >= 1
    assert again["entries"] == 0 or again["memories"] == 0  # nothing left owed by this project
    assert residue(handler_env, forms) == []
    for memory_id in forgotten.body["receipt"]["memoryIds"]:
        shown = get_memory(project, memory_id).body
        assert shown["status"] == "purged"
        assert "content" not in shown
    purged_event, kept_event = list_events(project, "chat")
    assert purged_event["id"] == made["events"][0]["id"]
    assert "payload" not in purged_event
    assert "salt" not in purged_event
    item = handler_env.dynamodb.get_item(  # stored, not only served: a kept salt would confirm a guess
        TableName=handler_env.tables["EventsTable"],
        Key=key(storage_keys.event_key(ProjectId(project), "chat", purged_event["seq"])),
    )["Item"]
    assert "payload" not in item
    assert "salt" not in item
    assert "payloadDigest" in item  # the chain still verifies
    assert kept_event["payload"]["text"] == "The vault door is painted green."
    assert receipt(project, forgotten.body["receipt"]["id"]).body["state"] == "purged"
    assert get_memory(project, memory_ids_of(project, kept)[1]).body["status"] == "active"
    verified = LedgerVerifier(project)
    assert [verified.feed(entry) for entry in ledger(project).body["entries"]] == [None]
    chain = ChainVerifier("chat")
    assert [chain.feed(e) for e in list_events(project, "chat")] == [None, None]  # still verifies


class KilledError(Exception):
    """A chosen DynamoDB write failing (raised before the write is sent): the function answers 500."""


class ProcessDiedError(BaseException):
    """The purge's process dying at a chosen DynamoDB write: a BaseException, as nothing in a dead
    process goes on with the next entry."""


def dying_client(
    stack: Any, write: int | None, death: type[BaseException] = KilledError
) -> tuple[Any, list[str]]:
    """A real DynamoDB client whose ``write``-th write (from 1) dies before it is sent, raising
    ``death`` (None: never); and the writes it sent."""
    client = emulator_client("dynamodb", stack.endpoint_url)
    sent: list[str] = []

    def before_call(model: Any, **_: Any) -> None:
        if model.name in {"UpdateItem", "DeleteItem", "PutItem", "TransactWriteItems"}:
            if write is not None and len(sent) + 1 == write:
                raise death(f"killed before write {write} ({model.name})")
            sent.append(model.name)

    client.meta.events.register("before-call.dynamodb.*", before_call)
    return client, sent


def purger_dying_at(stack: Any, write: int | None) -> tuple[Purger, list[str]]:
    """A purge on a ``dying_client`` (its process dies), and the writes it sent."""
    client, sent = dying_client(stack, write, ProcessDiedError)
    tables = stack.tables
    store = DynamoForgetStore(
        client, tables["MemoriesTable"], tables["TermIndexTable"], tables["EventsTable"]
    )
    purger = Purger(DynamoLedgerStore(client, tables["LedgerTable"]), store, lambda: datetime.now(UTC))
    return purger, sent


def word(number: int) -> str:
    """A word no other test says, different for each number (letters only: it survives stemming)."""
    letters = "".join(chr(ord("a") + int(d)) for d in str(number))
    return f"Blorvex{letters}ian"


def test_given_a_purge_killed_before_each_of_its_writes_then_the_next_run_finishes_it(
    handler_env: Any,
) -> None:
    def forgotten_project(number: int) -> tuple[str, str, str]:
        project = new_project()
        marker = word(number)
        remember_structured(handler_env, project, "chat", f"The gate code is {marker} 5521.")
        reply = forget_now(project, {"query": marker, "reason": "r"})
        assert reply.status == 200, reply.body
        return project, marker, reply.body["receipt"]["id"]

    run_purge()  # nothing else owed: every write counted below is this project's
    project, marker, receipt_id = forgotten_project(0)
    counting, writes = purger_dying_at(handler_env, None)
    counting.run(has_time=lambda: True)
    assert len(writes) > 5
    assert receipt(project, receipt_id).body["state"] == "purged"

    for kill_at in range(1, len(writes) + 1):
        project, marker, receipt_id = forgotten_project(kill_at)
        dying, _ = purger_dying_at(handler_env, kill_at)
        with pytest.raises(ProcessDiedError):
            dying.run(has_time=lambda: True)
        assert receipt(project, receipt_id).body["state"] == "tombstoned", kill_at  # not done yet

        finishing, _ = purger_dying_at(handler_env, None)
        finishing.run(has_time=lambda: True)

        assert receipt(project, receipt_id).body["state"] == "purged", kill_at
        assert residue(handler_env, marker_forms(marker)) == [], kill_at
        assert ChainVerifier("chat").feed(list_events(project, "chat")[0]) is None


def test_given_one_entry_that_keeps_failing_then_later_entries_are_purged_and_the_run_fails_after(
    handler_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_purge()  # nothing else owed
    stuck, later = new_project(), new_project()
    for number, project in enumerate((stuck, later), start=900):
        remember_structured(handler_env, project, "chat", f"The gate code is {word(number)} 5521.")
    stuck_receipt = forget_now(stuck, {"stream": "chat", "reason": "r"}).body["receipt"]["id"]
    later_receipt = forget_now(later, {"stream": "chat", "reason": "r"}).body["receipt"]["id"]
    client, _ = dying_client(handler_env, None)

    def refuse_the_stuck_project(params: dict[str, Any], **_: Any) -> None:
        if stuck in json.dumps(params) and "TableName" in params:  # every write of the older entry
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "bad item"}}, "UpdateItem")

    client.meta.events.register("provide-client-params.dynamodb.UpdateItem", refuse_the_stuck_project)
    tables = handler_env.tables
    store = DynamoForgetStore(
        client, tables["MemoriesTable"], tables["TermIndexTable"], tables["EventsTable"]
    )
    purger = Purger(DynamoLedgerStore(client, tables["LedgerTable"]), store, lambda: datetime.now(UTC))

    result = purger.run(has_time=lambda: True)

    assert [type(failure) for failure in result.failures] == [ClientError]
    assert receipt(stuck, stuck_receipt).body["state"] == "tombstoned"  # still on the work list
    assert receipt(later, later_receipt).body["state"] == "purged"  # not held back by it
    failing = handler_module("purge").lambda_handler
    with pytest.raises(FunctionFailedError):  # seen: the run fails once the others are done
        failing({}, FakeLambdaContext(), purger=purger)


def test_given_two_concurrent_forgets_of_overlapping_sets_then_two_chained_entries_and_no_gap(
    handler_env: Any,
) -> None:
    project = new_project()
    remember_structured(  # each query has a memory of its own, and one they share
        handler_env,
        project,
        "chat",
        "Piano lesson on Monday.",
        "Piano tuner visits Ana on Friday.",
        "Ana's violin recital is on Sunday.",
    )
    bodies = [{"query": "piano", "reason": "one"}, {"query": "Ana", "reason": "two"}]
    with ThreadPoolExecutor(2) as pool:
        replies = list(pool.map(lambda body: forget(project, body), bodies))

    assert [reply.status for reply in replies] == [200, 200]
    entries = ledger(project).body["entries"]
    assert sorted(entry["ledgerSeq"] for entry in entries) == [1, 2]
    verifier = LedgerVerifier(project)
    assert [verifier.feed(entry) for entry in sorted(entries, key=lambda e: e["ledgerSeq"])] == [None, None]
    named = {memory_id for entry in entries for memory_id in entry["memoryIds"]}
    assert all(get_memory(project, memory_id).body["status"] == "tombstoned" for memory_id in named)
    assert recalled_ids(project, "piano") == []
    assert recalled_ids(project, "Ana") == []


def test_given_a_purged_event_then_a_redelivered_or_swept_job_message_makes_nothing(handler_env: Any) -> None:
    project = new_project()
    reply = remember(
        project, {"stream": "chat", "events": [message("k1", "The attic key is under the Plover mat.")]}
    )
    job = reply.body["jobId"]
    messages = take_job_messages(handler_env, {job})  # held back: forgotten and purged unstructured
    forgotten = forget_now(project, {"stream": "chat", "reason": "r"})
    run_purge()
    assert receipt(project, forgotten.body["receipt"]["id"]).body["state"] == "purged"
    before = every_item(handler_env)

    run_structure(handler_env, messages, as_deployed=True)  # the message arrives at last
    handler_env.sqs.send_message(
        QueueUrl=handler_env.queues["StructuringQueue"], MessageBody=messages[0]["Body"]
    )
    run_structure(
        handler_env, take_job_messages(handler_env, {job}), as_deployed=True
    )  # as the sweeper sends it

    after = every_item(handler_env)
    assert {k: v for k, v in after.items() if k != "JobsTable"} == {
        k: v for k, v in before.items() if k != "JobsTable"
    }  # nothing made, nothing written back: only the job moved on
    assert residue(handler_env, marker_forms("Plover")) == []
    assert get_job(project, job).body["status"] == "done"
    assert get_job(project, job).body["memoryIds"] == []


def forget_dying_after_its_entry(stack: Any, project: str, body: dict[str, Any]) -> Reply:
    """A forget whose function dies right after appending its ledger entry (its second write),
    dated long enough ago for the purge's apply step to finish it."""
    client, _ = dying_client(stack, 2)
    tables = stack.tables
    store = DynamoForgetStore(
        client, tables["MemoriesTable"], tables["TermIndexTable"], tables["EventsTable"]
    )
    ledger_store = DynamoLedgerStore(client, tables["LedgerTable"])

    def clock() -> datetime:
        return datetime.now(UTC) - timedelta(minutes=2)

    service = ForgetService(
        store,
        wiring.event_store(),
        ledger_store,
        timedelta(days=1),
        clock,
        finish=Purger(ledger_store, store, clock).apply,
        salts=wiring.forget_salt_cipher(),
    )
    return call(
        "forget",
        "POST",
        "/v1/forget",
        body=body,
        context=project_context(project),
        services={"forget": service},
    )


def test_given_a_forget_that_died_after_its_ledger_entry_then_the_next_purge_finishes_its_tombstones(
    handler_env: Any,
) -> None:
    project = new_project()
    (made,) = remember_structured(handler_env, project, "chat", "The garage code is Quillmoth 4410.")
    died = forget_dying_after_its_entry(handler_env, project, {"query": "Quillmoth", "reason": "r"})
    assert died.status == 500  # the function died after its entry, before any tombstone
    (entry,) = ledger(project).body["entries"]  # owed from now on
    assert set(recalled_ids(project, "Quillmoth garage code")) & set(entry["memoryIds"])  # still served

    result = run_purge()

    assert result["applied"] >= 1
    assert recalled_ids(project, "Quillmoth garage code") == []
    for memory_id in entry["memoryIds"]:
        assert get_memory(project, memory_id).body["status"] == "tombstoned"  # not purged: grace runs
    assert receipt(project, entry["id"]).body["state"] == "tombstoned"
    assert memory_ids_of(project, made)[0] in entry["memoryIds"]


def test_given_a_forget_that_died_then_structuring_of_its_event_is_undone_by_the_purge(
    handler_env: Any,
) -> None:
    project = new_project()
    first = remember(
        project, {"stream": "late", "events": [message("late-1", "The bike lock code is Vorpalish 3321.")]}
    )
    held = take_job_messages(handler_env, {first.body["jobId"]})
    died = forget_dying_after_its_entry(handler_env, project, {"stream": "late", "reason": "r"})
    assert died.status == 500  # nothing tombstoned
    run_structure(handler_env, held, as_deployed=True)  # the event is not forgotten yet: it structures
    structured = f"{first.body['memories'][0]['id']}-1"
    assert get_memory(project, structured).body["status"] == "active"
    (entry,) = ledger(project).body["entries"]
    assert structured not in entry["memoryIds"]  # made after the forget read its set

    run_purge()

    assert get_memory(project, structured).body["status"] == "tombstoned"  # made from a forgotten event
    assert recalled_ids(project, "Vorpalish") == []


def test_given_a_forgotten_reply_then_recall_s_context_never_brings_it_back(handler_env: Any) -> None:
    """Context reads the neighbours of the memories a question finds (docs/recall.md, "Context"):
    a forgotten neighbour is read, and dropped by its tombstone like every candidate."""
    project = new_project()
    turns = [
        message("t0", "What did you think of the new ramen place downtown?"),
        message("t1", "Loved the broth, but the place was crowded"),
    ]
    reply = remember(project, {"stream": "dinner", "events": turns})
    assert reply.status == 202, reply.body
    question, reply_memory = "What did they think of the ramen place?", reply.body["memories"][1]["id"]
    assert reply_memory in recalled_ids(project, question)  # found as context, before the forget

    assert forget(project, {"memoryId": reply_memory, "reason": "asked to"}).status == 200

    assert reply_memory not in recalled_ids(project, question)
    streamed = recall(project, {"question": question}, accept="text/event-stream")
    assert streamed.status == 200
    assert reply_memory not in streamed.body
    assert "crowded" not in streamed.body


def test_given_a_purged_event_then_its_key_is_refused_rather_than_new_content_dropped(
    handler_env: Any,
) -> None:
    project = new_project()
    body = {"stream": "chat", "events": [message("chat-0", "The alarm code is 4417.")]}  # the first one's key
    remember_structured(handler_env, project, "chat", "The alarm code is 4417.", "Lunch is at noon.")
    assert remember(project, body).body["events"][0]["replayed"] is True  # before the purge: a replay
    assert forget_now(project, {"stream": "chat", "reason": "erase"}).status == 200
    run_purge()
    assert "payload" not in list_events(project, "chat")[0]

    for text in ("The alarm code is 4417.", "Something new entirely."):  # a retry, and new content
        again = remember(project, {"stream": "chat", "events": [message("chat-0", text)]})
        assert again.status == 409, again.body
        assert again.body["error"]["code"] == "idempotency_key_reused"
        assert "forgotten and purged" in again.body["error"]["message"]
    assert len(list_events(project, "chat")) == 2  # nothing appended


class StructuredMeanwhile(DynamoForgetStore):
    """The forget store, with a held structuring job committed between forget's resolve and its
    tombstones: the interleaving in which the structured memories were not in the set forget read."""

    def __init__(self, stack: Any, held: list[dict[str, Any]]) -> None:
        settings = get_settings()
        super().__init__(wiring.dynamodb(), settings.memories_table, settings.index_table)
        self._stack, self._held = stack, held

    def tombstone_many(self, project: ProjectId, memories: Any, marks: dict[str, str]) -> Any:
        if self._held:
            run_structure(self._stack, self._held, as_deployed=True)
            self._held = []
        return super().tombstone_many(project, memories, marks)


def test_given_structuring_committing_while_a_forget_runs_then_what_it_made_is_forgotten_too(
    handler_env: Any,
) -> None:
    project = new_project()
    marker = "Zugzwangish"  # no other test says it
    first = remember(
        project, {"stream": "race", "events": [message("race-1", f"The locker code is {marker} 4471.")]}
    )
    provisional = first.body["memories"][0]["id"]
    held = take_job_messages(handler_env, {first.body["jobId"]})
    settings = get_settings()
    service = ForgetService(
        StructuredMeanwhile(handler_env, held),
        wiring.event_store(),
        DynamoLedgerStore(wiring.dynamodb(), settings.ledger_table),
        timedelta(0),
        lambda: datetime.now(UTC) - timedelta(seconds=1),
        finish=wiring.purger().apply,  # unkeyed: never called
        salts=wiring.forget_salt_cipher(),  # unkeyed: never called
    )

    reply = call(
        "forget",
        "POST",
        "/v1/forget",
        body={"stream": "race", "reason": "erase"},
        context=project_context(project),
        services={"forget": service},
        iam_checked=False,  # the structure function's commit runs inside this forget
    )

    assert reply.status == 200, reply.body
    assert (
        reply.body["memories"] == [{"id": provisional, "why": "match", "status": "tombstoned"}] or reply.body
    )
    structured = f"{provisional}-1"
    assert get_memory(project, structured).body["status"] == "tombstoned"  # made meanwhile, forgotten too
    assert recalled_ids(project, marker) == []
    run_purge()
    assert get_memory(project, structured).body["status"] == "purged"
    assert residue(handler_env, marker_forms(marker)) == []


def test_given_one_memory_of_an_event_forgotten_then_every_memory_of_that_event_goes_with_it(
    handler_env: Any,
) -> None:
    project = new_project()
    (made,) = remember_structured(
        handler_env, project, "chat", "Move the offsite from Lisbon to Porto, Kiko books it."
    )
    provisional, *structured = memory_ids_of(project, made)
    assert len(structured) >= 2  # one event, several memories (the decision, the new fact, ...)

    reply = forget(project, {"memoryId": structured[-1], "reason": "wrong city"})

    assert reply.status == 200, reply.body
    why = {m["id"]: m["why"] for m in reply.body["memories"]}
    assert why[structured[-1]] == "match"
    assert {why[sibling] for sibling in structured[:-1]} == {"same_source_event"}, why
    assert why[provisional] == "older_version"  # the event's provisional memory: what the match replaced
    assert all(get_memory(project, m).body["status"] == "tombstoned" for m in [provisional, *structured])
    assert recalled_ids(project, "offsite Porto") == []


# -- idempotency keys ----------------------------------------------------------------------------------


def keyed_service(clock: Any) -> ForgetService:
    """The forget function's service (the container's clients), on ``clock``."""
    settings = get_settings()
    store = DynamoForgetStore(
        wiring.dynamodb(), settings.memories_table, settings.index_table, settings.events_table
    )
    ledger_store = DynamoLedgerStore(wiring.dynamodb(), settings.ledger_table)
    return ForgetService(
        store,
        wiring.event_store(),
        ledger_store,
        timedelta(days=1),
        clock,
        finish=Purger(ledger_store, store, clock).apply,
        salts=wiring.forget_salt_cipher(),
    )


def forget_at(project: str, body: dict[str, Any], moment: datetime) -> Reply:
    service = keyed_service(lambda: moment)
    return call(
        "forget",
        "POST",
        "/v1/forget",
        body=body,
        context=project_context(project),
        services={"forget": service},
    )


def answer_of(reply: Reply) -> dict[str, Any]:
    """A forget's answer without ``replayed``."""
    return {name: value for name, value in reply.body.items() if name != "replayed"}


LOCKER_CODE = "The locker code is 4471."
LUNCH = "Lunch with Dana on Friday."


def project_remembering(stack: Any, *texts: str) -> str:
    """A new project whose chat holds ``texts``, structured."""
    project = new_project()
    remember_structured(stack, project, "chat", *texts)
    return project


def keyed(query: str, key: str = "k", **extra: Any) -> dict[str, Any]:
    """A forget request by ``query`` under the idempotency key ``key``."""
    return {"query": query, "reason": "r", "idempotencyKey": key, **extra}


def test_given_a_keyed_forget_when_sent_again_then_the_first_answer_is_replayed_and_one_entry_kept(
    handler_env: Any,
) -> None:
    project = project_remembering(handler_env, LOCKER_CODE, LUNCH)
    body = {"query": "locker code", "reason": "user asked to erase it", "idempotencyKey": "erase-1"}

    first = forget(project, body)
    again = forget(project, body)

    assert first.status == again.status == 200, (first.body, again.body)
    assert first.body["replayed"] is False
    assert again.body["replayed"] is True
    assert first.body["receipt"]
    assert first.body["memories"]
    assert answer_of(again) == answer_of(first)  # receipt, memories, eventIds, previewToken, reasonSalt
    assert [entry["id"] for entry in ledger(project).body["entries"]] == [first.body["receipt"]["id"]]
    salt, digest = again.body["reasonSalt"], again.body["receipt"]["reasonDigest"]
    assert hashlib.sha256(bytes.fromhex(salt) + body["reason"].encode()).hexdigest() == digest
    unkeyed = forget(project, {"query": "locker code", "reason": "user asked to erase it"})
    assert unkeyed.status == 200
    assert "replayed" not in unkeyed.body  # no key, no replay: an empty set, as documented
    assert unkeyed.body["memories"] == []
    assert "receipt" not in unkeyed.body


@pytest.mark.parametrize(
    "change",
    [
        {"reason": "another reason"},
        {"query": "lunch Dana"},
        {"maxMemories": 5},
        {"query": None, "memoryId": "mem_00000000000000000000000000"},
        {"query": None, "subject": "locker code"},
    ],
)
def test_given_a_used_forget_key_with_another_request_then_409_and_nothing_more_written(
    handler_env: Any, change: dict[str, Any]
) -> None:
    project = project_remembering(handler_env, LOCKER_CODE, LUNCH)
    body = {"query": "locker code", "reason": "user asked to erase it", "idempotencyKey": "erase-1"}
    first = forget(project, body)
    assert first.status == 200, first.body
    before = every_item(handler_env)

    other = {name: value for name, value in {**body, **change}.items() if value is not None}
    reply = forget(project, other)

    assert reply.status == 409, reply.body
    assert reply.body["error"]["code"] == "idempotency_key_reused"
    assert reply.body["error"]["details"] == {
        "idempotencyKey": "erase-1",
        "receiptId": first.body["receipt"]["id"],
    }
    assert every_item(handler_env) == before
    assert recalled_ids(project, "lunch Dana")  # not forgotten


def test_given_a_query_with_the_same_stems_under_the_key_then_it_is_the_same_request(
    handler_env: Any,
) -> None:
    project = project_remembering(handler_env, LOCKER_CODE)
    first = forget(project, keyed("locker code"))
    again = forget(project, keyed("  Code, LOCKERS "))
    assert again.status == 200, again.body
    assert again.body["replayed"] is True
    assert again.body["receipt"] == first.body["receipt"]


def test_given_forget_keys_then_they_are_apart_from_remember_keys_and_other_projects(
    handler_env: Any,
) -> None:
    project, other = new_project(), new_project()
    remember_structured(handler_env, project, "chat", LOCKER_CODE)  # remember key chat-0
    remember_structured(handler_env, other, "chat", "The locker code is 9012.")

    mine = forget(project, keyed("locker code", "chat-0"))
    theirs = forget(other, keyed("locker code", "chat-0"))

    assert mine.status == theirs.status == 200, (mine.body, theirs.body)
    assert mine.body["replayed"] is theirs.body["replayed"] is False
    assert mine.body["receipt"]["id"] != theirs.body["receipt"]["id"]
    assert recalled_ids(other, "locker code") == []
    replay = remember(project, {"stream": "chat", "events": [message("chat-0", "The locker code is 4471.")]})
    assert replay.body["events"][0]["replayed"] is True  # remember's own key, untouched by forget's


def test_given_a_dry_run_with_an_idempotency_key_then_400_and_nothing_written(handler_env: Any) -> None:
    project = project_remembering(handler_env, LOCKER_CODE)
    reply = forget(project, keyed("locker code", dryRun=True))
    assert reply.status == 400, reply.body
    assert reply.body["error"]["code"] == "idempotency_key_with_dry_run"
    real = forget(project, keyed("locker code"))
    assert real.status == 200
    assert real.body["replayed"] is False


@pytest.mark.parametrize("key", ["", "a\nb", "k" * 257])
def test_given_a_bad_forget_idempotency_key_then_422_as_for_remember(handler_env: Any, key: str) -> None:
    project = new_project()
    reply = forget(project, keyed("q", key))
    assert reply.status == 422, reply.body
    assert ledger(project).body == {"entries": []}


def test_given_a_keyed_forget_that_found_nothing_then_a_retry_answers_nothing_even_after_a_match_appears(
    handler_env: Any,
) -> None:
    project = new_project()
    body = keyed("locker code")
    first = forget(project, body)
    remember_structured(handler_env, project, "chat", LOCKER_CODE)

    again = forget(project, body)

    assert first.status == again.status == 200
    assert first.body["memories"] == again.body["memories"] == []
    assert (first.body["replayed"], again.body["replayed"]) == (False, True)
    assert "receipt" not in again.body
    assert "reasonSalt" not in again.body
    assert recalled_ids(project, "locker code")  # the retry forgot nothing
    assert ledger(project).body == {"entries": []}


def test_given_a_forget_key_older_than_a_day_then_it_may_be_used_afresh(handler_env: Any) -> None:
    project = project_remembering(handler_env, LOCKER_CODE, LUNCH)
    now = datetime.now(UTC)
    first = forget_at(project, keyed("locker code"), now)
    assert first.status == 200, first.body
    assert forget_at(project, keyed("lunch Dana"), now).status == 409

    later = forget_at(project, keyed("lunch Dana"), now + timedelta(hours=24))

    assert later.status == 200, later.body
    assert later.body["replayed"] is False
    assert len(ledger(project).body["entries"]) == 2
    assert recalled_ids(project, "lunch Dana") == []


def test_given_concurrent_forgets_under_one_key_then_one_entry_and_both_answer_its_receipt(
    handler_env: Any,
) -> None:
    project = project_remembering(handler_env, LOCKER_CODE)
    body = keyed("locker code")
    with ThreadPoolExecutor(4) as pool:
        replies = list(pool.map(lambda _: forget(project, body), range(4)))

    assert [reply.status for reply in replies] == [200] * 4, [reply.body for reply in replies]
    (entry,) = ledger(project).body["entries"]
    assert {reply.body["receipt"]["id"] for reply in replies} == {entry["id"]}
    assert {reply.body["reasonSalt"] for reply in replies} == {replies[0].body["reasonSalt"]}
    assert sorted(reply.body["replayed"] for reply in replies) == [False, True, True, True]


def stored_strings(value: Any) -> Iterator[str]:
    """Every string an item holds, however deep (DynamoDB JSON: ``S``, ``SS``, ``L``, ``M``)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for inner in value.values():
            yield from stored_strings(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from stored_strings(inner)


def confirmed_guesses(stack: Any, guesses: dict[str, bytes], known_salts: Iterable[str] = ()) -> list[str]:
    """The guesses that someone who reads every table can confirm: a stored salt (32 hex
    characters), or one of ``known_salts``, that, hashed with the guess, gives a digest stored too."""
    strings = {text for items in every_item(stack).values() for text in stored_strings(items)}
    salts = [*(text for text in strings if re.fullmatch("[0-9a-f]{32}", text)), *known_salts]
    return sorted(
        name
        for name, guess in guesses.items()
        for salt in salts
        if hashlib.sha256(bytes.fromhex(salt) + guess).hexdigest() in strings
    )


def test_given_a_keyed_forget_then_no_stored_salt_confirms_a_guess_of_its_reason_or_subject_before_its_purge(
    handler_env: Any,
) -> None:
    project = new_project()
    remember_structured(handler_env, project, "chat", "Alice is the release manager.")
    reason = "Alice left the company and asked to be forgotten"
    body = {"subject": "Alice", "reason": reason, "idempotencyKey": "erase-alice"}
    guesses = {
        "reason": reason.encode(),
        "subject and reason": canonicalize(normalized_request(CoreForgetRequest(reason, subject="Alice"))),
    }
    forgotten = forget_now(project, body)
    assert forgotten.status == 200, forgotten.body
    assert forgotten.body["receipt"]["memoryIds"]
    salt = forgotten.body["reasonSalt"]
    # The digests a guess is checked against are stored (the entry's, the key record's): with the
    # salt the caller was answered, the check confirms both guesses, so it can fail.
    assert confirmed_guesses(handler_env, guesses, [salt]) == sorted(guesses)
    assert confirmed_guesses(handler_env, guesses) == []  # while the key is held: its salt is encrypted
    assert forget_now(project, body).body["reasonSalt"] == salt  # and a retry still answers it

    run_purge()

    assert confirmed_guesses(handler_env, guesses, [salt]) == ["reason"]  # the key's record is gone
    assert confirmed_guesses(handler_env, guesses) == []
    assert receipt(project, forgotten.body["receipt"]["id"]).body["state"] == "purged"
    again = forget_now(project, body)  # the key went with what it held: a new forget, of nothing left
    assert again.status == 200, again.body
    assert (again.body["replayed"], again.body["memories"]) == (False, [])
    assert [entry["id"] for entry in ledger(project).body["entries"]] == [forgotten.body["receipt"]["id"]]


@contextmanager
def kms_calls() -> Iterator[list[tuple[str, dict[str, str]]]]:
    """The calls the container's KMS client makes meanwhile: (operation, encryption context)."""
    client: Any = aws.kms_client()  # the botocore client: its events
    seen: list[tuple[str, dict[str, str]]] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        seen.append((model.name, dict(params.get("EncryptionContext", {}))))

    client.meta.events.register("provide-client-params.kms.*", record)
    try:
        yield seen
    finally:
        client.meta.events.unregister("provide-client-params.kms.*", record)


def forget_key_record(stack: Any, project: str, idempotency_key: str) -> dict[str, Any]:
    item: dict[str, Any] = stack.dynamodb.get_item(
        TableName=stack.tables["LedgerTable"],
        Key=key(storage_keys.forget_key_key(ProjectId(project), idempotency_key)),
        ConsistentRead=True,
    )["Item"]
    return item


def test_given_forgets_then_one_kms_encrypt_per_keyed_forget_one_decrypt_per_retry_and_none_without_a_key(
    handler_env: Any,
) -> None:
    project = new_project()
    remember_structured(
        handler_env, project, "chat", "The locker code is 4471.", "Lunch with Dana on Friday."
    )
    body = {"query": "locker code", "reason": "r", "idempotencyKey": "k"}

    with kms_calls() as unkeyed:
        assert forget(project, {"query": "lunch Dana", "reason": "r"}).status == 200
    with kms_calls() as first:
        forgotten = forget(project, body)
    with kms_calls() as retried:
        again = forget(project, body)
    with kms_calls() as reused:
        refused = forget(project, {**body, "reason": "another reason"})

    assert (forgotten.status, again.status, refused.status) == (200, 200, 409)
    assert again.body["replayed"] is True
    context = {"project": project, "purpose": "forget-key-salt", "attempt": forgotten.body["receipt"]["id"]}
    assert unkeyed == []
    assert first == [("Encrypt", context)]
    assert retried == reused == [("Decrypt", context)]
    record = forget_key_record(handler_env, project, "k")
    assert "reasonSalt" not in record
    assert forgotten.body["reasonSalt"] not in json.dumps(record)


def test_given_a_kept_salt_s_ciphertext_then_it_decrypts_only_for_its_project_and_attempt(
    handler_env: Any,
) -> None:
    salts, salt = wiring.forget_salt_cipher(), "5" * 32
    sealed = salts.encrypt(ProjectId("prj_a"), "rcpt_1", salt)

    assert salts.decrypt(ProjectId("prj_a"), "rcpt_1", sealed) == salt
    for project, attempt in [("prj_b", "rcpt_1"), ("prj_a", "rcpt_2")]:
        with pytest.raises(ClientError, match="InvalidCiphertext"):
            salts.decrypt(ProjectId(project), attempt, sealed)
    with pytest.raises(ClientError, match="InvalidCiphertext"):  # nor as a webhook's secret
        wiring.webhook_cipher().decrypt("prj_a", "rcpt_1", sealed)


def test_given_a_key_record_written_with_its_salt_in_clear_then_a_retry_still_replays_it(
    handler_env: Any,
) -> None:
    """A record written before salts were encrypted (``reasonSalt`` in clear) answers its retries
    alike until it expires, with no KMS call."""
    project = new_project()
    remember_structured(handler_env, project, "chat", "The locker code is 4471.")
    body = {"query": "locker code", "reason": "r", "idempotencyKey": "k"}
    first = forget(project, body)
    assert first.status == 200, first.body
    record = forget_key_record(handler_env, project, "k")
    del record["reasonSaltCiphertext"]
    handler_env.dynamodb.put_item(
        TableName=handler_env.tables["LedgerTable"],
        Item={**record, "reasonSalt": {"S": first.body["reasonSalt"]}},
    )

    with kms_calls() as made:
        again = forget(project, body)
        refused = forget(project, {**body, "reason": "another reason"})

    assert again.status == 200, again.body
    assert again.body["replayed"] is True
    assert answer_of(again) == answer_of(first)
    assert refused.status == 409, refused.body
    assert made == []


def test_given_a_forget_key_used_afresh_after_a_day_then_the_purge_of_its_first_forget_keeps_the_new_record(
    handler_env: Any,
) -> None:
    project = project_remembering(handler_env, LOCKER_CODE, LUNCH)
    now = datetime.now(UTC)
    later_body = keyed("lunch Dana")
    first = forget_at(project, keyed("locker code"), now - timedelta(days=2))
    later = forget_at(project, later_body, now - timedelta(hours=23))
    assert first.status == later.status == 200, (first.body, later.body)
    assert later.body["replayed"] is False

    run_purge()  # the first forget is past its grace window (a day), the later one is not

    assert receipt(project, first.body["receipt"]["id"]).body["state"] == "purged"
    retry = forget_at(project, later_body, now - timedelta(hours=22))
    assert retry.status == 200, retry.body
    assert retry.body["replayed"] is True
    assert retry.body["receipt"] == later.body["receipt"]


# -- the subject selector ----------------------------------------------------------------------------


def subjects_by_id(project: str, made: list[dict[str, Any]]) -> dict[str, str | None]:
    """Every memory of ``made`` (provisional and structured) and the subject it is served with."""
    return {
        memory_id: get_memory(project, memory_id).body.get("subject")
        for remembered in made
        for memory_id in memory_ids_of(project, remembered)
    }


def test_given_memories_about_alice_when_forgotten_by_subject_then_hers_go_and_similar_subjects_stay(
    handler_env: Any,
) -> None:
    project = new_project()
    made = remember_structured(
        handler_env,
        project,
        "chat",
        "Alice is the release manager.",
        "Alice is now the QA lead.",
        "Alice Chen is the design lead.",
        "Alicia is on vacation until May.",
        "Alice's phone is 555-0101.",
        "Dana will review the slides with Alice.",
    )
    subjects = subjects_by_id(project, made)
    hers = {memory_id for memory_id, subject in subjects.items() if subject == "alice"}
    assert len(hers) == 2, subjects  # the release manager (superseded by now) and the QA lead
    assert {"alice chen", "alicia", "alice phone"} <= set(subjects.values())
    hers_and_provisional = {m for number in (0, 1) for m in memory_ids_of(project, made[number])}

    too_many = forget(project, {"subject": "Alice", "reason": "r", "maxMemories": 3})
    dry = forget(project, {"subject": "  ALICE ", "reason": "r", "dryRun": True})
    reply = forget(project, {"subject": "alice", "reason": "r", "previewToken": dry.body["previewToken"]})

    assert too_many.status == 422
    assert too_many.body["error"]["code"] == "forget_set_too_large"
    assert dry.status == reply.status == 200, (dry.body, reply.body)
    assert {m["id"]: m["why"] for m in reply.body["memories"]} == {
        **dict.fromkeys(hers, "match"),
        **dict.fromkeys(hers_and_provisional - hers, "older_version"),
    }
    assert sorted(reply.body["eventIds"]) == sorted(made[n]["events"][0]["id"] for n in (0, 1))
    for memory_id, subject in subjects.items():
        status = get_memory(project, memory_id).body["status"]
        assert (status == "tombstoned") == (memory_id in hers_and_provisional), (subject, status)
    assert not set(recalled_ids(project, "Alice lead", includeSuperseded=True)) & hers_and_provisional
    assert recalled_ids(project, "Alicia vacation")  # a similar subject stays


def test_given_a_preference_when_forgotten_by_its_subject_then_found_though_its_text_lacks_a_word(
    handler_env: Any,
) -> None:
    project = new_project()
    (made,) = remember_structured(handler_env, project, "chat", "I like green tea.")
    (subject,) = {s for s in subjects_by_id(project, [made]).values() if s}
    assert subject == "tea preference"  # "preference" is the rules' word, not the text's

    reply = forget(project, {"subject": "Tea Preference", "reason": "r"})

    assert reply.status == 200, reply.body
    assert {m["id"] for m in reply.body["memories"]} == set(memory_ids_of(project, made))


@pytest.mark.parametrize("subject", ["the", "...", "   "])
def test_given_a_subject_without_searchable_words_then_422_invalid_subject_and_nothing_written(
    handler_env: Any, subject: str
) -> None:
    project = new_project()
    remember_structured(handler_env, project, "chat", "The release target is July 13.")
    reply = forget(project, {"subject": subject, "reason": "r"})
    assert reply.status == 422, reply.body
    assert reply.body["error"]["code"] == "invalid_subject"
    assert reply.body["error"]["details"] == {"field": "subject"}
    assert ledger(project).body == {"entries": []}


def test_given_a_keyed_forget_by_subject_then_a_variant_spelling_replays_it_and_another_subject_is_refused(
    handler_env: Any,
) -> None:
    project = new_project()
    remember_structured(handler_env, project, "chat", "Alice is the release manager.", "Alicia is on call.")
    first = forget(project, {"subject": "Alice", "reason": "r", "idempotencyKey": "k"})

    again = forget(project, {"subject": " ALICE ", "reason": "r", "idempotencyKey": "k"})
    other = forget(project, {"subject": "Alicia", "reason": "r", "idempotencyKey": "k"})

    assert first.status == again.status == 200, (first.body, again.body)
    assert (first.body["replayed"], again.body["replayed"]) == (False, True)
    assert again.body["receipt"] == first.body["receipt"]
    assert other.status == 409, other.body
    assert other.body["error"]["code"] == "idempotency_key_reused"
    assert recalled_ids(project, "Alicia")  # not forgotten
