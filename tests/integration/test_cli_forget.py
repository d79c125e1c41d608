"""``kaibo forget``, ``kaibo ledger``, ``kaibo receipt`` and ``kaibo verify --ledger/--receipt``:
the real CLI in a subprocess against the stub of tests/integration/test_cli_with_stub_server.py.

The stub's ledger is built by the service's own ledger code (``make_entry(...).as_served()``);
its receipts, memories and events are what the service serves before and after a purge. Tests
tamper with them and read the CLI's exit code and output.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pty
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from kaibo.client import KaiboClient
from kaibo.ledger_verify import verify_ledger, verify_receipt
from kaibo_core.core.ledger import make_entry, reason_digest
from tests.integration.test_cli_with_stub_server import (
    API_KEY,
    FAR_FUTURE,
    PROJECT,
    REASON_SALT,
    Stub,
    kaibo,
    planned,
    serve,
)

DIARY = "diary"
PAST = "2020-01-02T00:00:00.000Z"
OTHER_PROJECT = "prj_01JTESTE2E00000000000000ZZ"


def event_id(n: int) -> str:
    return f"evt_01JTESTFGT{n:016d}"


def provisional(n: int) -> str:
    return f"mem_01JTESTFGT{n:016d}"


STRUCTURED = "mem_01JTESTFGTS000000000000001"
OLD = "mem_01JTESTFGTS000000000000000"


def served_memory(memory_id: str, status: str, sources: list[dict[str, Any]], content: str | None) -> dict:
    memory: dict[str, Any] = {
        "id": memory_id,
        "status": status,
        "type": "episode",
        "validFrom": "2026-06-02T09:30:00.000Z",
        "validTo": None,
        "confidence": 0.5,
        "stream": DIARY,
        "sourceEventIds": [s["eventId"] for s in sources],
        "sourceEvents": sources,
        "supersedes": [],
        "supersededBy": [],
        "replacedBy": [],
        "createdAt": "2026-06-02T09:30:01.000Z",
    }
    if content is not None:
        memory["content"] = content
    return memory


@pytest.fixture
def stub() -> Iterator[Stub]:
    """A diary of 4 events and a ledger of 4 forgets, each served as the service serves it:

    1. an old forget, purged (no events);
    2. event 1's memories, tombstoned, purgeAfter far ahead (``receipt(2)``);
    3. events 2 and 3's memories, purged: the events without payload and salt (``receipt(3)``);
    4. event 4's memory, tombstoned, purgeAfter passed: the purge is pending (``receipt(4)``).
    """
    state = Stub()
    plans = [
        dataclasses.replace(
            planned(n, {"role": "user", "text": f"diary line {n}"}, f"d-{n}", "2026-06-02T09:30:00.000Z"),
            event_id=event_id(n),
        )
        for n in range(1, 5)
    ]
    records = state.append(DIARY, plans, "2026-06-02T09:30:01.000Z")
    cite = {r.id: {"eventId": r.id, "stream": DIARY, "seq": r.seq, "hash": r.hash} for r in records}
    for n, status in ((1, "tombstoned"), (2, "purged"), (3, "purged"), (4, "tombstoned")):
        state.memories[provisional(n)] = served_memory(provisional(n), status, [cite[event_id(n)]], None)
    state.memories[STRUCTURED] = served_memory(STRUCTURED, "tombstoned", [cite[event_id(1)]], None)
    state.memories[OLD] = served_memory(OLD, "purged", [], None)
    # Purged as the service serves it: event 2 with null payload and salt, event 3 without them.
    state.event(DIARY, 2).update(payload=None, salt=None)
    for dropped in ("payload", "salt"):
        del state.event(DIARY, 3)[dropped]

    state.append_entry([OLD], [], purge_after=PAST, state="purged")
    state.append_entry([provisional(1), STRUCTURED], [event_id(1)], purge_after=FAR_FUTURE)
    state.append_entry([provisional(2), provisional(3)], [event_id(2), event_id(3)], purge_after=PAST)
    state.receipts[receipt(3)]["state"] = "purged"
    state.append_entry([provisional(4)], [event_id(4)], purge_after=PAST)

    state.forget_set = [
        {"id": provisional(5), "status": "active", "type": "episode", "why": "match", "content": "x" * 100},
        {
            "id": STRUCTURED + "9",
            "status": "replaced",
            "type": "fact",
            "why": "same_source_event",
            "content": "Locker code\n4312 \x1b[31m",
        },
    ]
    state.forget_event_ids = [event_id(5)]
    with serve(state):
        yield state


def receipt(seq: int) -> str:
    return f"rcpt_01JTESTE2E{seq:016d}"


def ledger_requests(stub: Stub) -> list[int]:
    return [int(r.query.get("fromSeq", ["1"])[0]) for r in stub.requests if r.path == "/v1/ledger"]


def event_requests(stub: Stub) -> list[tuple[int, int]]:
    path = f"/v1/streams/{urllib.parse.quote(DIARY, safe='')}/events"
    return [(int(r.query["fromSeq"][0]), int(r.query["limit"][0])) for r in stub.requests if r.path == path]


def verify(stub: Stub, *args: str) -> Any:
    return kaibo(stub, "verify", *args, "--project", PROJECT)


# -- verify --ledger ---------------------------------------------------------------------------------


def test_given_an_intact_ledger_when_verifying_it_then_exit_0_with_a_pinnable_head(stub: Stub) -> None:
    result = verify(stub, "--ledger")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        f"ok ledger: 4 entries, head 4:{stub.ledger[3]['hash']}",
        "verified: ledger ok",
    ]
    assert ledger_requests(stub) == [1, 3]  # followed nextFromSeq page by page


def test_given_the_project_in_the_environment_when_verifying_the_ledger_then_it_is_used(stub: Stub) -> None:
    result = kaibo(stub, "verify", "--ledger", project_id=PROJECT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_given_no_forget_yet_when_verifying_the_ledger_then_exit_0(stub: Stub) -> None:
    stub.ledger.clear()
    result = verify(stub, "--ledger")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[0] == "ok ledger: 0 entries (no forget yet)"


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("id", "rcpt_01JTESTE2E0000000000000099", "hash_mismatch"),
        ("ledgerSeq", 3, "seq_gap"),
        ("hash", "ab" * 32, "hash_mismatch"),
        ("prevHash", "ab" * 32, "prev_hash_mismatch"),
        ("memoryIds", [provisional(1)], "hash_mismatch"),
        ("memoryIds", [STRUCTURED, provisional(1)], "hash_mismatch"),  # reordered
        ("eventIds", [], "hash_mismatch"),
        ("reasonDigest", "cd" * 32, "hash_mismatch"),
        ("tombstonedAt", "2026-06-03T10:00:00.001Z", "hash_mismatch"),
        ("purgeAfter", "3000-01-01T00:00:00.000Z", "hash_mismatch"),
        ("v", 2, "unsupported_version"),
        ("projectId", OTHER_PROJECT, "wrong_project"),
    ],
)
def test_given_an_altered_field_of_an_entry_when_verifying_the_ledger_then_exit_1_naming_its_seq(
    stub: Stub, field: str, value: Any, code: str
) -> None:
    stub.ledger[1][field] = value
    result = verify(stub, "--ledger")
    assert result.returncode == 1
    assert result.stdout.startswith(f"FAIL ledger seq 2: {code}: ")
    assert result.stdout.splitlines()[-1] == "FAILED: the ledger failed verification"
    assert ledger_requests(stub) == [1]  # stopped paging at the first problem


@pytest.mark.parametrize("field", ["reasonDigest", "hash", "prevHash", "memoryIds"])
def test_given_a_field_missing_from_an_entry_when_verifying_the_ledger_then_exit_1(
    stub: Stub, field: str
) -> None:
    del stub.ledger[2][field]
    result = verify(stub, "--ledger")
    assert result.returncode == 1
    assert result.stdout.startswith(f"FAIL ledger seq 3: missing_field: served entry lacks {field}")


def test_given_a_removed_entry_when_verifying_the_ledger_then_exit_1_with_a_gap(stub: Stub) -> None:
    del stub.ledger[1]
    result = verify(stub, "--ledger")
    assert result.returncode == 1
    assert result.stdout.startswith("FAIL ledger seq 2: seq_gap: ")


def test_given_another_project_when_verifying_the_ledger_then_exit_1_with_a_hint(stub: Stub) -> None:
    result = kaibo(stub, "verify", "--ledger", "--project", OTHER_PROJECT)
    assert result.returncode == 1
    assert result.stdout.startswith("FAIL ledger seq 1: hash_mismatch: ")
    assert f"check that {OTHER_PROJECT} is the project of the API key" in result.stderr


def test_given_the_right_pin_when_verifying_the_ledger_then_exit_0(stub: Stub) -> None:
    result = verify(stub, "--ledger", "--pin", f"2:{stub.ledger[1]['hash'].upper()}")
    assert result.returncode == 0, result.stdout + result.stderr


def test_given_a_pin_with_another_hash_when_verifying_the_ledger_then_exit_1(stub: Stub) -> None:
    # A ledger rewritten as a whole verifies on its own: only the pin catches it.
    old = stub.ledger[1]["hash"]
    rewritten = stub.ledger[:1]
    for served in stub.ledger[1:]:
        rewritten.append(
            make_entry(
                project_id=PROJECT,
                seq=served["ledgerSeq"],
                receipt_id=served["id"],
                memory_ids=served["memoryIds"][:1],
                event_ids=served["eventIds"],
                reason_digest=served["reasonDigest"],
                tombstoned_at=served["tombstonedAt"],
                purge_after=served["purgeAfter"],
                prev_hash=rewritten[-1]["hash"],
            ).as_served()
        )
    stub.ledger[:] = rewritten
    assert verify(stub, "--ledger").returncode == 0
    result = verify(stub, "--ledger", "--pin", f"2:{old}")
    assert result.returncode == 1
    assert result.stdout.startswith("FAIL ledger seq 2: pinned_head_mismatch: ")


def test_given_a_pin_beyond_the_ledger_when_verifying_it_then_exit_1(stub: Stub) -> None:
    result = verify(stub, "--ledger", "--pin", f"5:{stub.ledger[3]['hash']}")
    assert result.returncode == 1
    assert result.stdout.startswith("FAIL ledger seq 5: pinned_head_missing: ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["verify", "--ledger"], "KAIBO_PROJECT_ID"),
        (["verify", "--ledger", "--project", "prj_nope"], "--project"),
        (["verify", "--pin", "2:" + "ab" * 32, "--project", PROJECT], "--pin needs --ledger"),
        (["verify", "--receipt", receipt(2), "--pin", "2:" + "ab" * 32], "--pin needs --ledger"),
        (["verify", "--stream", DIARY, "--project", PROJECT], "--project goes with"),
        (["verify", "--ledger", "--stream", DIARY, "--project", PROJECT], "give at most one of"),
        (["verify", "--ledger", "--pin", "two:abc", "--project", PROJECT], "SEQ:HASH"),
    ],
)
def test_given_a_bad_ledger_verify_usage_then_exit_2_without_a_call(
    stub: Stub, args: list[str], message: str
) -> None:
    result = kaibo(stub, *args)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == ""
    assert stub.requests == []


# -- verify --receipt --------------------------------------------------------------------------------


def test_given_a_receipt_before_purge_after_when_verifying_it_then_exit_0(stub: Stub) -> None:
    result = verify(stub, "--receipt", receipt(2))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        f"ok ledger: 2 entries up to the receipt, head 2:{stub.ledger[1]['hash']}",
        f"verified: receipt {receipt(2)}: state tombstoned; 2 memories without content (2 tombstoned); "
        f"its events are purged after {FAR_FUTURE}",
    ]
    assert ledger_requests(stub) == [1]  # read up to the receipt's seq, no further
    assert event_requests(stub) == []  # not purged yet: the payloads are still there


def test_given_a_purged_receipt_when_verifying_it_then_events_are_read_and_exit_0(stub: Stub) -> None:
    result = verify(stub, "--receipt", receipt(3))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == (
        f"verified: receipt {receipt(3)}: state purged; 2 memories without content (2 purged); "
        "2 events without payload or salt"
    )
    assert sorted(event_requests(stub)) == [(2, 1), (3, 1)]  # located through the provisional memories


def test_given_a_purge_past_due_when_verifying_the_receipt_then_exit_0_with_purge_pending(stub: Stub) -> None:
    result = verify(stub, "--receipt", receipt(4))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"note: purge pending: purgeAfter {PAST} has passed" in result.stdout
    assert f"note: 1 of its memories still read tombstoned: {provisional(4)}" in result.stdout
    assert result.stdout.splitlines()[-1].endswith("its events not checked (purge pending)")
    assert event_requests(stub) == []


@pytest.mark.parametrize(
    ("seq", "memory_id", "change", "failure"),
    [
        (2, STRUCTURED, {"content": "Locker code 4312"}, "content_served: it reads 'tombstoned'"),
        (3, provisional(2), {"content": "diary line 2"}, "content_served: it reads 'purged'"),
        (2, provisional(1), {"status": "active"}, "not_forgotten: it reads 'active'"),
        (3, provisional(3), {"status": "tombstoned"}, "not_purged: it still reads 'tombstoned'"),
    ],
)
def test_given_a_memory_the_receipt_names_still_served_when_verifying_it_then_exit_1_naming_it(
    stub: Stub, seq: int, memory_id: str, change: dict[str, Any], failure: str
) -> None:
    stub.memories[memory_id].update(change)
    result = verify(stub, "--receipt", receipt(seq))
    assert result.returncode == 1
    assert f"FAIL memory {memory_id}: {failure}" in result.stdout
    assert result.stdout.splitlines()[-1] == f"FAILED: receipt {receipt(seq)}: 1 check failed"


def test_given_a_memory_the_receipt_names_not_served_when_verifying_it_then_exit_1(stub: Stub) -> None:
    del stub.memories[STRUCTURED]
    result = verify(stub, "--receipt", receipt(2))
    assert result.returncode == 1
    assert f"FAIL memory {STRUCTURED}: not_served: " in result.stdout


@pytest.mark.parametrize(
    ("field", "value"), [("payload", {"role": "user", "text": "x"}), ("salt", "00" * 16)]
)
def test_given_an_event_with_its_payload_after_the_purge_when_verifying_the_receipt_then_exit_1(
    stub: Stub, field: str, value: Any
) -> None:
    stub.event(DIARY, 3)[field] = value
    result = verify(stub, "--receipt", receipt(3))
    assert result.returncode == 1
    assert (
        f"FAIL event {event_id(3)}: {field}_served: stream {DIARY} seq 3 is served with its {field} "
        "after the purge"
    ) in result.stdout


def test_given_an_event_that_cannot_be_located_when_verifying_the_receipt_then_exit_1(stub: Stub) -> None:
    stub.memories[provisional(2)]["sourceEvents"] = []
    result = verify(stub, "--receipt", receipt(3))
    assert result.returncode == 1
    assert f"FAIL event {event_id(2)}: event_not_located: " in result.stdout


def test_given_a_receipt_the_ledger_does_not_hold_when_verifying_it_then_exit_1(stub: Stub) -> None:
    stub.receipts[receipt(2)] = {**stub.receipts[receipt(2)], "ledgerSeq": 3}
    stub.receipts[receipt(2)]["hash"] = make_entry(
        project_id=PROJECT,
        seq=3,
        receipt_id=receipt(2),
        memory_ids=stub.receipts[receipt(2)]["memoryIds"],
        event_ids=stub.receipts[receipt(2)]["eventIds"],
        reason_digest=stub.receipts[receipt(2)]["reasonDigest"],
        tombstoned_at=stub.receipts[receipt(2)]["tombstonedAt"],
        purge_after=FAR_FUTURE,
        prev_hash=stub.receipts[receipt(2)]["prevHash"],
    ).hash  # self-consistent, but not what the ledger holds at seq 3
    result = verify(stub, "--receipt", receipt(2))
    assert result.returncode == 1
    assert "FAIL ledger seq 3: receipt_not_in_ledger: the ledger's entry at seq 3 is not this receipt" in (
        result.stdout
    )


def test_given_a_ledger_that_ends_before_the_receipt_when_verifying_it_then_exit_1(stub: Stub) -> None:
    del stub.ledger[1:]
    result = verify(stub, "--receipt", receipt(2))
    assert result.returncode == 1
    assert "FAIL ledger seq 2: receipt_not_in_ledger: the served ledger ends at seq 1" in result.stdout


def test_given_a_tampered_ledger_before_the_receipt_when_verifying_it_then_exit_1(stub: Stub) -> None:
    stub.ledger[0]["tombstonedAt"] = "2026-06-03T10:00:00.001Z"
    result = verify(stub, "--receipt", receipt(2))
    assert result.returncode == 1
    assert "FAIL ledger seq 1: hash_mismatch: " in result.stdout


def test_given_a_receipt_altered_when_verifying_it_then_exit_1_naming_the_receipt(stub: Stub) -> None:
    stub.receipts[receipt(2)]["memoryIds"] = [STRUCTURED]  # hides a memory it erased
    result = verify(stub, "--receipt", receipt(2))
    assert result.returncode == 1
    assert f"FAIL receipt {receipt(2)}: hash_mismatch: the receipt is not self-consistent" in result.stdout


def test_given_an_unknown_receipt_when_verifying_it_then_exit_2_with_the_error_code(stub: Stub) -> None:
    result = verify(stub, "--receipt", receipt(9))
    assert result.returncode == 2
    assert "receipt_not_found" in result.stderr


# -- the SDK ---------------------------------------------------------------------------------------


def test_given_now_past_purge_after_when_verifying_a_tombstoned_receipt_then_the_purge_is_pending(
    stub: Stub,
) -> None:
    client = KaiboClient(stub.url, API_KEY)
    before = verify_receipt(client, PROJECT, receipt(2), now=datetime(2026, 12, 1, tzinfo=UTC))
    assert before.ok
    assert (before.purge_due, before.notes) == (False, ())
    after = verify_receipt(client, PROJECT, receipt(2), now=datetime(3000, 1, 1, tzinfo=UTC))
    assert after.ok
    assert after.purge_due
    assert after.notes[0].startswith(f"purge pending: purgeAfter {FAR_FUTURE} has passed")
    assert after.memory_statuses == {"tombstoned": 2}
    with pytest.raises(ValueError, match="timezone-aware"):
        verify_receipt(client, PROJECT, receipt(2), now=datetime(3000, 1, 1))  # naive


def test_given_a_failing_receipt_when_verifying_it_with_the_sdk_then_each_failure_is_named(
    stub: Stub,
) -> None:
    stub.memories[provisional(2)]["content"] = "diary line 2"
    stub.event(DIARY, 2)["payload"] = {"role": "user", "text": "diary line 2"}
    report = verify_receipt(KaiboClient(stub.url, API_KEY), PROJECT, receipt(3))
    assert not report.ok
    assert [(f.subject, f.code) for f in report.failures] == [
        (f"memory {provisional(2)}", "content_served"),
        (f"event {event_id(2)}", "payload_served"),
    ]
    assert report.ledger is not None
    assert (report.ledger.ok, report.ledger.head.seq, report.events_checked) == (True, 3, 2)


def test_given_a_purged_receipt_naming_unlocated_events_when_verifying_it_then_ok_with_a_note(
    stub: Stub,
) -> None:
    """The purge found event 2 in no stream (an entry older than stored event locations): the
    receipt reads purged and names it; the other event is checked, event 2 is not looked for, its
    provisional memory (the purge's placeholder) must read purged, and a note names it."""
    stub.receipts[receipt(3)]["unlocatedEventIds"] = [event_id(2)]
    report = verify_receipt(KaiboClient(stub.url, API_KEY), PROJECT, receipt(3))
    assert report.ok, report.failures
    assert (report.state, report.events_checked, report.unlocated_event_ids) == ("purged", 1, (event_id(2),))
    assert event_requests(stub) == [(3, 1)]
    (note,) = report.notes
    assert note.startswith(
        f"the purge found 1 of its events in no stream of the project (unlocatedEventIds: {event_id(2)})"
    )


def test_given_an_unlocated_event_still_structurable_when_verifying_its_receipt_then_it_fails(
    stub: Stub,
) -> None:
    """An unlocated event whose provisional memory the receipt does not name is checked on its own:
    served as anything but purged, something could still be made from it."""
    stub.append_entry([OLD], [event_id(4)], purge_after=PAST, state="purged")
    stub.receipts[receipt(5)]["unlocatedEventIds"] = [event_id(4)]
    client = KaiboClient(stub.url, API_KEY)
    report = verify_receipt(client, PROJECT, receipt(5))
    assert [(f.subject, f.code) for f in report.failures] == [(f"event {event_id(4)}", "event_not_blocked")]
    stub.memories[provisional(4)]["status"] = "purged"
    assert verify_receipt(client, PROJECT, receipt(5)).ok
    assert event_requests(stub) == []  # an unlocated event is never looked for


@pytest.mark.parametrize(
    ("seq", "unlocated", "detail"),
    [
        (3, event_id(2), "unlocatedEventIds is not a list of ids"),
        (3, [event_id(9)], f"unlocatedEventIds names events it does not: {event_id(9)}"),
        (4, [event_id(4)], "unlocatedEventIds on a receipt reading 'tombstoned', not purged"),
    ],
)
def test_given_a_receipt_with_malformed_unlocated_events_when_verifying_it_then_it_fails(
    stub: Stub, seq: int, unlocated: Any, detail: str
) -> None:
    stub.receipts[receipt(seq)]["unlocatedEventIds"] = unlocated
    report = verify_receipt(KaiboClient(stub.url, API_KEY), PROJECT, receipt(seq))
    assert [(f.code, f.detail) for f in report.failures] == [("malformed_entry", detail)]
    assert report.unlocated_event_ids == ()


def test_given_a_pinned_head_when_verifying_the_ledger_with_the_sdk_then_it_is_checked(stub: Stub) -> None:
    client = KaiboClient(stub.url, API_KEY)
    report = verify_ledger(client, PROJECT, (3, stub.ledger[2]["hash"]))
    assert (report.ok, report.entries_checked, report.head.hash) == (True, 4, stub.ledger[3]["hash"])
    bad = verify_ledger(client, PROJECT, (3, "ab" * 32))
    assert bad.problem is not None
    assert (bad.problem.seq, bad.problem.code) == (3, "pinned_head_mismatch")


# -- ledger, receipt ---------------------------------------------------------------------------------


def test_given_the_ledger_when_listing_it_then_json_lines_across_pages(stub: Stub) -> None:
    result = kaibo(stub, "ledger", "--from-seq", "2")
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == stub.ledger[1:]
    assert ledger_requests(stub) == [2, 4]


def test_given_a_receipt_id_when_reading_it_then_the_entry_and_its_state(stub: Stub) -> None:
    result = kaibo(stub, "receipt", receipt(3))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {**stub.ledger[2], "state": "purged"}


# -- forget ------------------------------------------------------------------------------------------


QUESTION = "Forget these 2 memories? This cannot be undone. [y/N]"


def forget(stub: Stub, *args: str, stdin: str = "") -> Any:
    return kaibo(stub, "forget", "--query", "locker code", "--reason", "user asked", *args, stdin=stdin)


def forget_at_a_terminal(stub: Stub, typed: str) -> Any:
    """Forget with stdin a terminal (a pty) on which ``typed`` is typed ("" types Ctrl-D: no answer)."""
    keyboard, terminal = pty.openpty()
    try:
        os.write(keyboard, typed.encode() or b"\x04")
        return kaibo(stub, "forget", "--query", "locker code", "--reason", "user asked", stdin_fd=terminal)
    finally:
        os.close(terminal)
        os.close(keyboard)


@pytest.mark.parametrize("answer", ["n\n", "\n", "", "yes please\n"])
def test_given_a_dry_run_when_the_answer_is_not_yes_then_nothing_is_forgotten(
    stub: Stub, answer: str
) -> None:
    result = forget_at_a_terminal(stub, answer)
    assert result.returncode == 1
    assert stub.forget_requests() == [{"query": "locker code", "reason": "user asked", "dryRun": True}]
    lines = result.stdout.splitlines()
    assert lines[0] == f'{provisional(5)}  active      match             "{"x" * 59}…"'
    assert lines[1] == f'{STRUCTURED}9  replaced    same_source_event "Locker code 4312 \\u001b[31m"'
    assert lines[2] == "2 memories would be forgotten, and the payloads of 1 event purged."
    assert QUESTION in result.stderr
    assert "not confirmed: nothing was forgotten" in result.stderr
    assert len(stub.ledger) == 4


def test_given_a_dry_run_when_the_answer_is_yes_then_the_set_is_forgotten_with_its_preview_token(
    stub: Stub,
) -> None:
    result = forget_at_a_terminal(stub, "y\n")
    assert result.returncode == 0, result.stderr
    dry, real = stub.forget_requests()
    assert dry == {"query": "locker code", "reason": "user asked", "dryRun": True}
    assert real == {"query": "locker code", "reason": "user asked", "previewToken": stub.preview_token}
    assert QUESTION in result.stderr
    receipt5 = stub.ledger[4]
    out = result.stdout
    assert "forgotten: 2 memories tombstoned; the payloads of 1 event are purged after " in out
    assert json.loads(out[out.index("receipt:\n") + 9 : out.index("reasonSalt:")]) == receipt5
    assert f"reasonSalt: {REASON_SALT}" in out.splitlines()
    assert "the reasonSalt is shown once and Kaibo does not keep it" in result.stderr
    assert f"kaibo verify --receipt {receipt5['id']}" in result.stderr
    assert receipt5["reasonDigest"] == reason_digest(REASON_SALT, "user asked")


def test_given_yes_when_forgetting_then_no_question_is_asked(stub: Stub) -> None:
    result = forget(stub, "--yes")
    assert result.returncode == 0, result.stderr
    assert "This cannot be undone" not in result.stderr
    assert [body.get("previewToken") for body in stub.forget_requests()] == [None, stub.preview_token]


def test_given_json_when_forgetting_then_stdout_is_the_answer_only(stub: Stub) -> None:
    result = forget(stub, "--yes", "--json")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["receipt"] == stub.ledger[4]
    assert answer["reasonSalt"] == REASON_SALT
    assert "2 memories would be forgotten" in result.stderr  # the set is still shown, on stderr


def test_given_a_forgotten_memory_when_verifying_its_receipt_then_exit_0(stub: Stub) -> None:
    stub.forget_set = [{"id": provisional(1), "status": "active", "type": "episode", "why": "match"}]
    stub.memories[provisional(1)].update(status="active", content="diary line 1")
    assert forget(stub, "--yes").returncode == 0
    result = verify(stub, "--receipt", stub.ledger[4]["id"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 memory without content (1 tombstoned)" in result.stdout


def test_given_the_set_changed_after_the_dry_run_when_forgetting_then_exit_2_and_nothing_forgotten(
    stub: Stub,
) -> None:
    stub.change_set_after_dry_run = True
    result = forget_at_a_terminal(stub, "y\n")
    assert result.returncode == 2
    assert "preview_changed: the set changed since the dry run" in result.stderr
    assert "Run the command again" in result.stderr
    assert len(stub.forget_requests()) == 2
    assert len(stub.ledger) == 4


def test_given_an_empty_set_when_forgetting_then_nothing_to_forget_and_no_question(stub: Stub) -> None:
    stub.forget_set, stub.forget_event_ids = [], []
    result = forget(stub, stdin="y\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "nothing to forget"
    assert "This cannot be undone" not in result.stderr
    assert len(stub.forget_requests()) == 1


def test_given_a_set_above_the_limit_when_forgetting_then_exit_2_with_a_hint(stub: Stub) -> None:
    stub.forget_set = stub.forget_set * 51  # 102 memories
    result = forget(stub, "--yes")
    assert result.returncode == 2
    assert "forget_set_too_large" in result.stderr
    assert "--max-memories" in result.stderr
    allowed = forget(stub, "--yes", "--max-memories", "200")
    assert allowed.returncode == 0, allowed.stderr
    assert [body.get("maxMemories") for body in stub.forget_requests()] == [None, 200, 200]


def test_given_an_idempotency_key_when_forgetting_then_the_real_call_carries_it_not_the_dry_run(
    stub: Stub,
) -> None:
    result = forget(stub, "--yes", "--idempotency-key", "erase-ticket-8812")
    assert result.returncode == 0, result.stderr
    dry, real = stub.forget_requests()
    assert dry == {"query": "locker code", "reason": "user asked", "dryRun": True}  # a key is refused there
    assert real == {
        "query": "locker code",
        "reason": "user asked",
        "previewToken": stub.preview_token,
        "idempotencyKey": "erase-ticket-8812",
    }
    # and the warning says the salt is kept for retries, not "not kept"
    assert "Kaibo keeps it, encrypted, only so that a retry under this idempotency key" in result.stderr
    assert "does not keep it" not in result.stderr


def test_given_a_keyed_forget_whose_answer_is_lost_then_it_is_resent_and_answered_once(stub: Stub) -> None:
    # Given a server that forgets, then loses its answer (502)
    stub.forget_answers_lost = 1

    # When forgetting under a key
    result = forget(stub, "--yes", "--idempotency-key", "erase-ticket-8812")

    # Then the CLI resends the same call, and the replay's receipt and salt are printed: one erasure
    assert result.returncode == 0, result.stderr
    _dry_run, first, resent = stub.forget_requests()
    assert resent == first
    assert len(stub.ledger) == 5
    out = result.stdout
    assert json.loads(out[out.index("receipt:\n") + 9 : out.index("reasonSalt:")]) == stub.ledger[4]
    assert f"reasonSalt: {REASON_SALT}" in out.splitlines()


def test_given_a_forget_without_a_key_whose_answer_is_lost_then_it_is_not_resent(stub: Stub) -> None:
    stub.forget_answers_lost = 1
    result = forget(stub, "--yes")
    assert result.returncode == 2
    assert "502" in result.stderr
    assert len(stub.forget_requests()) == 2  # the dry run and one real call, never a second
    assert len(stub.ledger) == 5


@pytest.mark.parametrize(
    ("selector", "sent"),
    [
        (["--memory", provisional(1)], {"memoryId": provisional(1)}),
        (["--stream", DIARY], {"stream": DIARY}),
        (["--subject", "Locker code"], {"subject": "Locker code"}),
    ],
)
def test_given_a_selector_when_forgetting_then_it_is_sent(
    stub: Stub, selector: list[str], sent: dict[str, str]
) -> None:
    result = kaibo(stub, "forget", *selector, "--reason", "r", "--yes")
    assert result.returncode == 0, result.stderr
    assert stub.forget_requests()[0] == {**sent, "reason": "r", "dryRun": True}


@pytest.mark.parametrize(
    "args",
    [
        ["forget", "--reason", "r"],  # no selector
        ["forget", "--query", "a", "--stream", DIARY, "--reason", "r"],  # two
        ["forget", "--subject", "a", "--memory", "mem_1", "--reason", "r"],  # two
        ["forget", "--query", "a"],  # no reason
        ["forget", "--query", "a", "--reason", "r", "--max-memories", "0"],
    ],
)
def test_given_a_bad_forget_usage_then_exit_2_without_a_call(stub: Stub, args: list[str]) -> None:
    result = kaibo(stub, *args, stdin="y\n")
    assert result.returncode == 2
    assert stub.requests == []


def test_given_stdin_not_a_terminal_when_forgetting_without_yes_then_it_refuses_and_forgets_nothing(
    stub: Stub,
) -> None:
    result = forget(stub, stdin="y\n")  # piped: a "y" here was not typed by a person at the question
    assert result.returncode == 1
    assert "2 memories would be forgotten" in result.stdout  # the dry run is still shown
    assert "not_confirmed: stdin is not a terminal" in result.stderr
    assert "--yes" in result.stderr
    assert QUESTION not in result.stderr
    assert stub.forget_requests() == [{"query": "locker code", "reason": "user asked", "dryRun": True}]
    assert len(stub.ledger) == 4
