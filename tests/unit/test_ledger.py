"""The deletion ledger's pure core (kaibo_core.core.ledger), its in-memory store, and the doc's vector.

The ledger is a hash chain like the events' (same JCS, same hash, same genesis): these tests pin
its bytes with a fixed vector (also in docs/verify.md), and show that ``LedgerVerifier`` accepts
what the stores append and fails at the right seq, with the right code, on any change.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaibo_core.adapters.dynamodb_ledger import MAX_APPEND_ATTEMPTS, DynamoLedgerStore
from kaibo_core.adapters.memory_ledger import InMemoryLedgerStore
from kaibo_core.api import mapping
from kaibo_core.core import chain, ids, ledger, storage_keys
from kaibo_core.core.errors import TooManyRequestsError
from kaibo_core.core.forgetting import FORGET_KEY_TTL, KeyedForget
from kaibo_core.core.ledger import LedgerEntry, LedgerProblem, LedgerVerifier
from kaibo_core.core.limits import TRANSACTION_RACE_ATTEMPTS, TRANSACTION_RACE_BACKOFF_CAP_SECONDS
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.ports import DeletionLedger
from kaibo_core.services.ledger import LedgerService

DOC = Path(__file__).resolve().parents[2] / "docs" / "verify.md"
PROJECT = "prj_01JZ8Q4W7T2M5R9X3C6B1N0VKD"

# --- the fixed vector (docs/verify.md, "Ledger test vector", first entry) --------------------------

VECTOR_SALT = "00112233445566778899aabbccddeeff"
VECTOR_REASON = "Kundin bat um Löschung (DSGVO Art. 17)"
VECTOR_REASON_DIGEST = "32a9da13346f34dd12abe7244db2ac576cdbf20ee8fcf174e19a8152248f753e"
VECTOR_CANONICAL_HEADER = (
    '{"eventIds":["evt_01JZ8Q5A0000000000000000AA","evt_01JZ8Q5B0000000000000000BB"],'
    '"id":"rcpt_01JZ9A0B0000000000000000CC",'
    '"memoryIds":["mem_01JZ8Q6B0000000000000000EE","mem_01JZ8Q6C0000000000000000DD"],'
    '"projectId":"prj_01JZ8Q4W7T2M5R9X3C6B1N0VKD","purgeAfter":"2026-06-04T10:00:00.000Z",'
    '"reasonDigest":"32a9da13346f34dd12abe7244db2ac576cdbf20ee8fcf174e19a8152248f753e",'
    '"seq":1,"tombstonedAt":"2026-06-03T10:00:00.000Z","v":1}'
)
VECTOR_HASH = "f21cd6a206da706411d853be3237460c36792077bcb80c94b71c4da13a5e4734"


def vector_entry() -> LedgerEntry:
    return ledger.make_entry(
        project_id=PROJECT,
        seq=1,
        receipt_id="rcpt_01JZ9A0B0000000000000000CC",
        memory_ids=["mem_01JZ8Q6C0000000000000000DD", "mem_01JZ8Q6B0000000000000000EE"],
        event_ids=["evt_01JZ8Q5B0000000000000000BB", "evt_01JZ8Q5A0000000000000000AA"],
        reason_digest=ledger.reason_digest(VECTOR_SALT, VECTOR_REASON),
        tombstoned_at="2026-06-03T10:00:00.000Z",
        purge_after="2026-06-04T10:00:00.000Z",
        prev_hash=chain.GENESIS_PREV_HASH,
    )


def test_given_the_fixed_vector_then_the_reason_digest_canonical_header_and_hash_are_exact() -> None:
    entry = vector_entry()
    assert entry.reason_digest == VECTOR_REASON_DIGEST
    assert chain.canonicalize(entry.header()) == VECTOR_CANONICAL_HEADER.encode("utf-8")
    assert entry.hash == VECTOR_HASH
    assert entry.prev_hash == "00" * 32


def test_given_the_fixed_vector_when_hashed_with_hashlib_alone_then_the_same_hashes() -> None:
    salted = bytes.fromhex(VECTOR_SALT) + VECTOR_REASON.encode("utf-8")
    assert len(VECTOR_REASON.encode("utf-8")) == 39
    assert hashlib.sha256(salted).hexdigest() == VECTOR_REASON_DIGEST
    linked = bytes(32) + VECTOR_CANONICAL_HEADER.encode("utf-8")
    assert hashlib.sha256(linked).hexdigest() == VECTOR_HASH


# --- the doc's vector ---------------------------------------------------------------------------


def doc_vector() -> list[dict[str, Any]]:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"^```json ledger-test-vector\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)
    assert len(blocks) == 1, "docs/verify.md needs exactly one ```json ledger-test-vector block"
    entries: list[dict[str, Any]] = json.loads(blocks[0])["entries"]
    return entries


def doc_served(item: dict[str, Any]) -> dict[str, Any]:
    header = item["header"]
    return {
        **{k: v for k, v in header.items() if k not in {"seq", "projectId"}},
        "ledgerSeq": header["seq"],
        "hash": item["hash"],
        "prevHash": item["prevHash"],
    }


def test_given_the_doc_vector_then_its_first_entry_is_the_fixed_vector() -> None:
    first = doc_vector()[0]
    assert first["reasonSalt"] == VECTOR_SALT
    assert first["reason"] == VECTOR_REASON
    assert first["reasonDigest"] == VECTOR_REASON_DIGEST
    assert first["canonicalHeader"] == VECTOR_CANONICAL_HEADER
    assert first["hash"] == VECTOR_HASH


@pytest.mark.parametrize("index", [0, 1])
def test_given_a_doc_vector_entry_when_recomputed_then_every_value_matches_the_code(index: int) -> None:
    item = doc_vector()[index]
    header = item["header"]
    assert list(header) == list(ledger.LEDGER_HEADER_FIELDS)
    assert ledger.reason_digest(item["reasonSalt"], item["reason"]) == item["reasonDigest"]
    rebuilt = ledger.ledger_header(
        project_id=header["projectId"],
        seq=header["seq"],
        receipt_id=header["id"],
        memory_ids=item["memoryIdsGiven"],
        event_ids=item["eventIdsGiven"],
        reason_digest=item["reasonDigest"],
        tombstoned_at=header["tombstonedAt"],
        purge_after=header["purgeAfter"],
    )
    assert rebuilt == header
    assert chain.canonicalize(header) == item["canonicalHeader"].encode("utf-8")
    assert ledger.ledger_hash(item["prevHash"], header) == item["hash"]
    linked = bytes.fromhex(item["prevHash"]) + item["canonicalHeader"].encode("utf-8")
    assert hashlib.sha256(linked).hexdigest() == item["hash"]


def test_given_the_doc_vector_when_served_then_the_ledger_verifier_accepts_both_entries() -> None:
    items = doc_vector()
    assert items[0]["prevHash"] == chain.GENESIS_PREV_HASH
    assert items[1]["prevHash"] == items[0]["hash"]
    verifier = LedgerVerifier(PROJECT)
    verifier.expect(1, items[0]["hash"])
    for item in items:
        assert verifier.feed(doc_served(item)) is None
    assert verifier.finish() is None
    assert verifier.head == chain.ChainHead(2, items[1]["hash"])


def test_given_the_doc_problem_table_then_it_lists_exactly_the_codes_the_ledger_verifier_reports() -> None:
    text = DOC.read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `([a-z_]+)` \| LedgerVerifier \|", text, re.MULTILINE))
    source = inspect.getsource(ledger)
    reported = set(re.findall(r'LedgerProblem\(\s*[^,]+,\s*"([a-z_]+)"', source))
    assert documented == reported


# --- headers, digests, entries ------------------------------------------------------------------


def test_given_a_header_then_it_has_the_documented_fields_with_sorted_deduplicated_ids() -> None:
    header = ledger.ledger_header(
        project_id=PROJECT,
        seq=3,
        receipt_id="rcpt_X",
        memory_ids=("mem_b", "mem_a", "mem_b"),
        event_ids=iter(["evt_2", "evt_1"]),
        reason_digest="d" * 64,
        tombstoned_at="t",
        purge_after="p",
    )
    assert tuple(header) == ledger.LEDGER_HEADER_FIELDS
    assert header["v"] == ledger.LEDGER_FORMAT_VERSION == 1
    assert header["memoryIds"] == ["mem_a", "mem_b"]
    assert header["eventIds"] == ["evt_1", "evt_2"]


def test_given_an_entry_then_as_served_is_the_receipt_shape_and_header_round_trips() -> None:
    entry = vector_entry()
    served = entry.as_served()
    assert set(served) == {
        "id",
        "ledgerSeq",
        "hash",
        "prevHash",
        "memoryIds",
        "eventIds",
        "reasonDigest",
        "tombstonedAt",
        "purgeAfter",
        "v",
    }
    assert served["ledgerSeq"] == 1
    assert ledger.served_header(PROJECT, served) == entry.header()
    assert ledger.check_receipt(PROJECT, served) is None


def test_given_a_reason_then_its_digest_depends_on_salt_and_reason_and_bad_input_is_refused() -> None:
    salt = ledger.new_reason_salt()
    assert re.fullmatch(r"[0-9a-f]{32}", salt)
    assert salt != ledger.new_reason_salt()
    assert ledger.reason_digest(salt, "a") != ledger.reason_digest(salt, "b")
    assert ledger.reason_digest(salt, "a") != ledger.reason_digest(ledger.new_reason_salt(), "a")
    with pytest.raises(ValueError, match="salt"):
        ledger.reason_digest(VECTOR_SALT.upper(), "a")
    with pytest.raises(ValueError, match="salt"):
        ledger.reason_digest("00", "a")
    with pytest.raises(ValueError, match="Unicode"):
        ledger.reason_digest(VECTOR_SALT, "lone \ud800")


def test_given_receipt_ids_then_they_are_prefixed_sortable_kaibo_ids() -> None:
    first = ledger.new_receipt_id()
    assert re.fullmatch(r"rcpt_[0-9A-HJKMNP-TV-Z]{26}", first)
    ids.issued_at(first)  # the time part parses
    assert first != ledger.new_receipt_id()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"seq": 0}, "seq"),
        ({"prev_hash": "00" * 31}, "prev_hash"),
        ({"prev_hash": "AB" * 32}, "prev_hash"),
        ({"reason_digest": "not hex"}, "reason_digest"),
    ],
)
def test_given_an_impossible_entry_then_make_entry_refuses_it(change: dict[str, Any], message: str) -> None:
    fields: dict[str, Any] = {
        "project_id": PROJECT,
        "seq": 1,
        "receipt_id": "rcpt_X",
        "memory_ids": ["mem_a"],
        "event_ids": [],
        "reason_digest": "0" * 64,
        "tombstoned_at": "t",
        "purge_after": "p",
        "prev_hash": chain.GENESIS_PREV_HASH,
    }
    with pytest.raises(ValueError, match=message):
        ledger.make_entry(**{**fields, **change})


# --- the verifier -------------------------------------------------------------------------------


def build_chain(count: int, project: str = PROJECT) -> list[LedgerEntry]:
    store = InMemoryLedgerStore()
    for number in range(count):
        store.append(
            ProjectId(project),
            memory_ids=[f"mem_{number}a", f"mem_{number}b"],
            event_ids=[f"evt_{number}"],
            reason_digest=hashlib.sha256(str(number).encode()).hexdigest(),
            tombstoned_at=f"2026-06-0{1 + number % 9}T10:00:00.000Z",
            purge_after=f"2026-06-0{1 + number % 9}T11:00:00.000Z",
        )
    entries, _ = store.read(ProjectId(project), 1, 100)
    return entries


def served_chain(count: int) -> list[dict[str, Any]]:
    return [entry.as_served() for entry in build_chain(count)]


def verify(entries: list[dict[str, Any]], pins: tuple[tuple[int, str], ...] = ()) -> LedgerProblem | None:
    verifier = LedgerVerifier(PROJECT)
    for seq, hash_hex in pins:
        verifier.expect(seq, hash_hex)
    for entry in entries:
        if verifier.feed(entry):
            break
    return verifier.finish()


def test_given_a_good_ledger_then_the_verifier_accepts_it_and_reaches_its_head() -> None:
    entries = served_chain(4)
    verifier = LedgerVerifier(PROJECT)
    for entry in entries:
        assert verifier.feed(entry) is None
    assert verifier.finish() is None
    assert verifier.head == chain.ChainHead(4, entries[-1]["hash"])
    assert verify([]) is None


#: The code a change to each served field is reported with (at the entry changed).
FIELD_CHANGES: dict[str, tuple[Any, str]] = {
    "ledgerSeq": (99, "seq_gap"),
    "id": ("rcpt_other", "hash_mismatch"),
    "memoryIds": (["mem_other"], "hash_mismatch"),
    "eventIds": (["evt_other"], "hash_mismatch"),
    "reasonDigest": ("e" * 64, "hash_mismatch"),
    "tombstonedAt": ("2026-06-09T10:00:00.001Z", "hash_mismatch"),
    "purgeAfter": ("2026-06-09T10:00:00.001Z", "hash_mismatch"),
    "hash": ("f" * 64, "hash_mismatch"),
    "prevHash": ("a" * 64, "prev_hash_mismatch"),
    "v": (2, "unsupported_version"),
    "projectId": ("prj_other", "wrong_project"),
}


@pytest.mark.parametrize("index", [0, 1, 2])
@pytest.mark.parametrize("field", sorted(FIELD_CHANGES))
def test_given_any_field_of_any_entry_changed_then_verification_fails_there(field: str, index: int) -> None:
    entries = served_chain(3)
    value, code = FIELD_CHANGES[field]
    entries[index][field] = value
    problem = verify(entries)
    assert problem is not None
    assert (problem.seq, problem.code) == (index + 1, code)
    assert str(problem).startswith(f"ledger seq {index + 1}: {code}: ")


@pytest.mark.parametrize("field", ["memoryIds", "eventIds"])
def test_given_an_id_list_reordered_then_the_hash_no_longer_matches(field: str) -> None:
    entries = served_chain(2)
    entries[1][field] = ["x_2", "x_1"]
    assert verify(entries) is not None
    entries = served_chain(2)
    entries[1]["memoryIds"] = list(reversed(entries[1]["memoryIds"]))
    problem = verify(entries)
    assert problem is not None
    assert (problem.seq, problem.code) == (2, "hash_mismatch")


@pytest.mark.parametrize("field", ["id", "hash", "prevHash", "memoryIds", "v", "ledgerSeq"])
def test_given_a_field_missing_then_missing_field_or_seq_gap(field: str) -> None:
    entries = served_chain(2)
    del entries[1][field]
    problem = verify(entries)
    assert problem is not None
    expected = "seq_gap" if field == "ledgerSeq" else "missing_field"
    assert (problem.seq, problem.code) == (2, expected)


@pytest.mark.parametrize("removed", [0, 1, 2])
def test_given_an_entry_removed_then_verification_fails_at_its_seq(removed: int) -> None:
    entries = served_chain(4)
    del entries[removed]
    problem = verify(entries)
    assert problem is not None
    assert (problem.seq, problem.code) == (removed + 1, "seq_gap")


def test_given_the_last_entry_removed_then_only_a_pin_notices() -> None:
    full = served_chain(3)
    truncated = full[:2]
    assert verify(truncated) is None
    problem = verify(truncated, pins=((3, full[2]["hash"]),))
    assert problem is not None
    assert (problem.seq, problem.code) == (3, "pinned_head_missing")


def test_given_entries_reordered_then_verification_fails_at_the_first_out_of_place() -> None:
    entries = served_chain(3)
    entries[1], entries[2] = entries[2], entries[1]
    problem = verify(entries)
    assert problem is not None
    assert (problem.seq, problem.code) == (2, "seq_gap")


def test_given_a_self_consistent_rewrite_then_only_a_pinned_head_notices() -> None:
    original = build_chain(3)
    rewritten: list[LedgerEntry] = []
    prev = chain.GENESIS_PREV_HASH
    for entry in original:
        reason = "9" * 64 if entry.seq == 2 else entry.reason_digest
        new = ledger.make_entry(
            project_id=entry.project_id,
            seq=entry.seq,
            receipt_id=entry.id,
            memory_ids=entry.memory_ids,
            event_ids=entry.event_ids,
            reason_digest=reason,
            tombstoned_at=entry.tombstoned_at,
            purge_after=entry.purge_after,
            prev_hash=prev,
        )
        rewritten.append(new)
        prev = new.hash
    served = [entry.as_served() for entry in rewritten]
    assert verify(served) is None
    assert verify(served, pins=((1, original[0].hash),)) is None
    problem = verify(served, pins=((1, original[0].hash), (3, original[2].hash)))
    assert problem is not None
    assert (problem.seq, problem.code) == (3, "pinned_head_mismatch")


def test_given_another_projects_ledger_then_it_does_not_verify_as_ours() -> None:
    theirs = [entry.as_served() for entry in build_chain(2, project="prj_THEIRS")]
    problem = verify(theirs)
    assert problem is not None
    assert (problem.seq, problem.code) == (1, "hash_mismatch")


def test_given_a_header_without_canonical_form_then_bad_header() -> None:
    entries = served_chain(1)
    entries[0]["memoryIds"] = [float("nan")]
    problem = verify(entries)
    assert problem is not None
    assert problem.code == "bad_header"


def test_given_a_problem_then_the_verifier_keeps_reporting_it() -> None:
    entries = served_chain(3)
    entries[0]["hash"] = "0" * 64
    verifier = LedgerVerifier(PROJECT)
    first = verifier.feed(entries[0])
    assert first is not None
    assert verifier.feed(entries[1]) is first
    assert verifier.finish() is first
    with pytest.raises(ValueError, match="seq 1 or more"):
        verifier.expect(0, "0" * 64)


def test_given_a_receipt_alone_then_check_receipt_recomputes_it() -> None:
    receipt = served_chain(2)[1]
    assert ledger.check_receipt(PROJECT, receipt) is None
    changed = ledger.check_receipt(PROJECT, {**receipt, "reasonDigest": "0" * 64})
    assert changed is not None
    assert (changed.seq, changed.code) == (2, "hash_mismatch")
    bad_prev = ledger.check_receipt(PROJECT, {**receipt, "prevHash": "xyz"})
    assert bad_prev is not None
    assert bad_prev.code == "bad_header"
    other_project = ledger.check_receipt("prj_other", receipt)
    assert other_project is not None
    assert other_project.code == "hash_mismatch"


# --- property: any ledger verifies, any single change is caught where it is made ----------------

PROPERTY = settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
id_lists = st.lists(st.text(st.characters(codec="utf-8"), max_size=8), max_size=4)


@st.composite
def ledgers(draw: st.DrawFn) -> list[LedgerEntry]:
    count = draw(st.integers(1, 6))
    entries: list[LedgerEntry] = []
    prev = chain.GENESIS_PREV_HASH
    for seq in range(1, count + 1):
        entry = ledger.make_entry(
            project_id=PROJECT,
            seq=seq,
            receipt_id=ledger.new_receipt_id(),
            memory_ids=draw(id_lists),
            event_ids=draw(id_lists),
            reason_digest=draw(st.binary(min_size=32, max_size=32)).hex(),
            tombstoned_at=draw(st.text(max_size=6, alphabet="0123456789:TZ.-")),
            purge_after=draw(st.text(max_size=6, alphabet="0123456789:TZ.-")),
            prev_hash=prev,
        )
        entries.append(entry)
        prev = entry.hash
    return entries


@PROPERTY
@given(ledgers(), st.data())
def test_property_any_ledger_verifies_and_any_header_change_fails_at_its_seq(
    entries: list[LedgerEntry], data: st.DataObject
) -> None:
    served = [entry.as_served() for entry in entries]
    assert verify(copy.deepcopy(served)) is None
    index = data.draw(st.integers(0, len(served) - 1))
    field = data.draw(
        st.sampled_from(["id", "memoryIds", "eventIds", "reasonDigest", "tombstonedAt", "purgeAfter"])
    )
    values: st.SearchStrategy[Any] = id_lists if field in {"memoryIds", "eventIds"} else st.text(max_size=5)
    changed = data.draw(values)
    if changed == served[index][field]:
        return
    served[index][field] = changed
    problem = verify(served)
    assert problem is not None
    assert (problem.seq, problem.code) == (index + 1, "hash_mismatch")


# --- storage keys -------------------------------------------------------------------------------


def test_given_ledger_keys_then_entries_sort_by_seq_and_the_head_after_them() -> None:
    project = ProjectId(PROJECT)
    keys = [storage_keys.ledger_entry_key(project, seq)["sk"] for seq in (1, 2, 10, 999_999_999_999)]
    assert keys == sorted(keys)
    assert keys[0] == "000000000001"
    assert storage_keys.ledger_head_key(project) == {"pk": f"{PROJECT}#ledger", "sk": "head"}
    assert max(keys) < storage_keys.ledger_head_key(project)["sk"]
    assert storage_keys.receipt_key(project, "rcpt_1") == {"pk": f"{PROJECT}#receipt#rcpt_1", "sk": "r"}
    for seq in (0, 10**12):
        with pytest.raises(ValueError, match="outside"):
            storage_keys.ledger_sort_key(seq)


# --- the in-memory store ------------------------------------------------------------------------


def append(store: DeletionLedger, project: str, number: int, receipt_id: str | None = None) -> LedgerEntry:
    return store.append(
        ProjectId(project),
        memory_ids=[f"mem_{number}"],
        event_ids=[f"evt_{number}"],
        reason_digest="0" * 64,
        tombstoned_at="2026-06-03T10:00:00.000Z",
        purge_after="2026-06-04T10:00:00.000Z",
        receipt_id=receipt_id,
    )


def test_given_the_memory_store_then_appends_chain_and_read_pages_in_seq_order() -> None:
    store = InMemoryLedgerStore()
    assert store.head(ProjectId(PROJECT)) == (0, chain.GENESIS_PREV_HASH)
    assert store.read(ProjectId(PROJECT), 1, 10) == ([], None)
    first = append(store, PROJECT, 1)
    assert (first.seq, first.prev_hash) == (1, chain.GENESIS_PREV_HASH)
    for number in range(2, 6):
        append(store, PROJECT, number)
    assert store.head(ProjectId(PROJECT))[0] == 5
    page, next_seq = store.read(ProjectId(PROJECT), 1, 2)
    assert ([e.seq for e in page], next_seq) == ([1, 2], 3)
    page, next_seq = store.read(ProjectId(PROJECT), 5, 2)
    assert ([e.seq for e in page], next_seq) == ([5], None)
    everything, _ = store.read(ProjectId(PROJECT), 0, 100)
    assert verify([e.as_served() for e in everything]) is None
    with pytest.raises(ValueError, match="limit"):
        store.read(ProjectId(PROJECT), 1, 0)


def test_given_the_memory_store_then_receipts_are_found_only_in_their_project() -> None:
    store = InMemoryLedgerStore()
    entry = append(store, PROJECT, 1)
    assert store.receipt(ProjectId(PROJECT), entry.id) == entry
    assert store.receipt(ProjectId(PROJECT), "rcpt_unknown") is None
    assert store.receipt(ProjectId("prj_other"), entry.id) is None


def test_given_a_receipt_id_appended_twice_then_the_same_entry_or_receipt_id_taken() -> None:
    store = InMemoryLedgerStore()
    entry = append(store, PROJECT, 1, receipt_id="rcpt_fixed")
    assert append(store, PROJECT, 1, receipt_id="rcpt_fixed") == entry
    assert store.head(ProjectId(PROJECT))[0] == 1
    with pytest.raises(ledger.ReceiptIdTakenError):
        append(store, PROJECT, 2, receipt_id="rcpt_fixed")


def kept_forget(key: str, attempt_id: str, written_at: int) -> KeyedForget:
    return KeyedForget(key, "d" * 64, "5" * 32, attempt_id, attempt_id, (), (), written_at)


def test_given_the_memory_store_then_a_purged_entry_releases_its_own_forget_key_record_only() -> None:
    store = InMemoryLedgerStore()
    project = ProjectId(PROJECT)
    day = int(FORGET_KEY_TTL.total_seconds())
    first = store.append(
        project,
        memory_ids=["mem_1"],
        event_ids=["evt_1"],
        reason_digest="0" * 64,
        tombstoned_at="2026-06-03T10:00:00.000Z",
        purge_after="2026-06-04T10:00:00.000Z",
        receipt_id="rcpt_first",
        keyed=kept_forget("k", "rcpt_first", 0),
    )
    assert first.forget_key == "k"
    store.release_forget_key(first)
    assert store.forget_key(project, "k", 1) is None

    later = kept_forget("k", "rcpt_later", day)  # the key used afresh, by another forget
    assert store.claim_forget_key(project, later) == later
    store.release_forget_key(first)  # the first entry's purge, run again: not its record any more
    assert store.forget_key(project, "k", day + 1) == later


def test_given_how_the_purge_finished_each_entry_then_its_receipt_reads_tombstoned_or_purged() -> None:
    """Owed: tombstoned. Every payload erased: purged. Finished with events it could not locate:
    purged too, naming them; the hashed entry is served unchanged either way."""
    store = InMemoryLedgerStore()
    owed, erased, unlocated = (append(store, PROJECT, n) for n in (1, 2, 3))
    store.mark_purged(erased, "2026-06-04T10:05:00.000Z")
    store.mark_unlocated(unlocated, unlocated.event_ids, "2026-06-04T10:05:00.000Z")
    service = LedgerService(store)

    def served(entry: LedgerEntry) -> dict[str, Any]:
        return mapping.receipt_state_out(*service.receipt(ProjectId(PROJECT), entry.id)).model_dump(
            mode="json"
        )

    assert served(owed) == {**owed.as_served(), "state": "tombstoned"}
    assert served(erased) == {**erased.as_served(), "state": "purged"}
    assert served(unlocated) == {
        **unlocated.as_served(),
        "state": "purged",
        "unlocatedEventIds": ["evt_3"],
    }
    assert store.due("2099-01-01T00:00:00.000Z", 10) == [owed]  # both finished ones left the work list


def test_given_concurrent_appends_to_the_memory_store_then_seqs_have_no_gap() -> None:
    store = InMemoryLedgerStore()
    threads = [threading.Thread(target=append, args=(store, PROJECT, n)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    entries, _ = store.read(ProjectId(PROJECT), 1, 100)
    assert [e.seq for e in entries] == list(range(1, 17))
    assert verify([e.as_served() for e in entries]) is None


# --- the DynamoDB store's retry, against a stub client (no network) -----------------------------


class CancellingClient:
    """Answers reads as an empty table and cancels every transaction with ``codes``."""

    def __init__(self, codes: list[str]) -> None:
        self.codes = codes
        self.transactions = 0

    def get_item(self, **_: Any) -> dict[str, Any]:
        return {}

    def transact_write_items(self, **_: Any) -> None:
        self.transactions += 1
        raise ClientError(
            {
                "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
                "CancellationReasons": [{"Code": code} for code in self.codes],
            },
            "TransactWriteItems",
        )


def test_given_the_head_moved_every_time_then_ledger_busy_after_the_attempts_with_backoff() -> None:
    client = CancellingClient(["None", "None", "ConditionalCheckFailed"])
    waits: list[float] = []
    store = DynamoLedgerStore(client, "t", sleep=waits.append)  # type: ignore[arg-type]
    with pytest.raises(TooManyRequestsError) as raised:
        append(store, PROJECT, 1)
    assert (raised.value.status, raised.value.code, raised.value.retry_after_seconds) == (
        429,
        "ledger_busy",
        1,
    )
    assert client.transactions == MAX_APPEND_ATTEMPTS
    assert len(waits) == MAX_APPEND_ATTEMPTS
    assert all(0 <= wait <= 0.5 for wait in waits)


def test_given_a_transaction_conflict_every_time_then_the_same_entry_is_retried_then_ledger_busy() -> None:
    """A TransactionConflict applied nothing and the head did not move: the same transaction is
    sent again (dynamodb_transactions), never re-chained onto a new head, until it gives up."""
    client = CancellingClient(["None", "None", "TransactionConflict"])
    waits: list[float] = []
    store = DynamoLedgerStore(client, "t", sleep=waits.append)  # type: ignore[arg-type]
    with pytest.raises(TooManyRequestsError, match="forgets"):
        append(store, PROJECT, 1)
    assert client.transactions == TRANSACTION_RACE_ATTEMPTS
    assert len(waits) <= TRANSACTION_RACE_ATTEMPTS - 1
    assert all(0 <= wait <= TRANSACTION_RACE_BACKOFF_CAP_SECONDS for wait in waits)


def test_given_a_cancellation_for_another_reason_then_it_is_not_retried() -> None:
    client = CancellingClient(["ValidationError", "None", "None"])
    store = DynamoLedgerStore(client, "t", sleep=lambda _: None)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="unexpected reason"):
        append(store, PROJECT, 1)
    assert client.transactions == 1
