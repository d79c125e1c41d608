"""Invariant 1 (the chain), property-based: any appended history verifies; any change to it does not.

Chains are built by the service's own pure code (``chain_records``) and served
as the events endpoint serves them (``kaibo_core.api.mapping.stored_event``). Each property is
checked twice: against ``ChainVerifier`` directly, and through the JSON wire
form and the client's ``kaibo.verify.verify_events`` (what ``kaibo verify`` runs).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kaibo.verify import verify_events
from kaibo_core.api.mapping import stored_event
from kaibo_core.core import chain
from kaibo_core.core.chain import ChainProblem, ChainVerifier
from kaibo_core.core.clock import format_instant
from kaibo_core.core.limits import STREAM_NAME_PATTERN
from kaibo_core.core.models.events import EventRecord, StreamHead
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.services.remember import PlannedEvent, chain_records

PROPERTY = settings(
    max_examples=50,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- strategies ------------------------------------------------------------------------------------

MAX_SAFE = 2**53 - 1
streams = st.from_regex(STREAM_NAME_PATTERN, fullmatch=True)
unicode_text = st.text(st.characters(codec="utf-8"), max_size=12)
idempotency_keys = st.text(
    st.characters(codec="utf-8", exclude_characters=[chr(c) for c in (*range(0x20), 0x7F)]),
    min_size=1,
    max_size=24,
)
instants = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
).map(format_instant)
salts = st.binary(min_size=chain.SALT_BYTES, max_size=chain.SALT_BYTES).map(bytes.hex)
kinds = st.sampled_from(["message", "tool_call", "file", "commit"])


def _json_values(floats: st.SearchStrategy[float]) -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | st.integers(-MAX_SAFE, MAX_SAFE) | floats | unicode_text
    return st.recursive(
        scalars,
        lambda children: st.lists(children, max_size=4) | st.dictionaries(unicode_text, children, max_size=4),
        max_leaves=10,
    )


all_floats = st.floats(allow_nan=False, allow_infinity=False)
# Kaibo's payload domain: every double except 2^53 <= |x| < 1e21 (canonical_payload refuses those:
# JCS writes them as plain digits that JSON parsers read back as unsafe integers).
jcs_floats = (
    st.floats(-(2.0**53), 2.0**53, exclude_min=True, exclude_max=True)
    | st.floats(min_value=1e21, allow_infinity=False)
    | st.floats(max_value=-1e21, allow_infinity=False)
)
json_values = _json_values(jcs_floats)
any_json_values = _json_values(all_floats)


#: For properties about headers and links, where the payload only needs to exist.
simple_json_values = st.none() | st.integers(-MAX_SAFE, MAX_SAFE) | jcs_floats | unicode_text


def payloads(values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(unicode_text, values, min_size=1, max_size=5)


@dataclass(frozen=True)
class Batch:
    received_at: str
    events: tuple[PlannedEvent, ...]


@dataclass(frozen=True)
class Chain:
    project: str
    stream: str
    batches: tuple[Batch, ...]
    records: tuple[EventRecord, ...]


def planned_event(
    payload: dict[str, Any],
    *,
    index: int = 0,
    event_id: str = "evt_1",
    kind: str = "message",
    key: str = "k",
    occurred_at: str = "2026-06-02T09:30:00.000Z",
    salt: str = "00" * chain.SALT_BYTES,
) -> PlannedEvent:
    canonical = chain.canonical_payload(payload)  # as remember plans it
    return PlannedEvent(
        index=index,
        event_id=event_id,
        kind=kind,
        idempotency_key=key,
        occurred_at=occurred_at,
        occurred_at_given=True,
        canonical_payload=canonical.decode("utf-8"),
        salt=salt,
        payload_digest=chain.payload_digest(salt, canonical),
    )


def link(project: str, stream: str, batches: Sequence[Batch]) -> tuple[EventRecord, ...]:
    """Append the batches one ``remember`` call at a time, as the service does."""
    records: list[EventRecord] = []
    head = StreamHead.genesis()
    for batch in batches:
        appended = chain_records(ProjectId(project), stream, head, batch.events, batch.received_at)
        records.extend(appended)
        head = StreamHead(seq=appended[-1].seq, hash=appended[-1].hash)
    return tuple(records)


@st.composite
def chains(draw: st.DrawFn, values: st.SearchStrategy[Any] = json_values, max_batches: int = 4) -> Chain:
    project = draw(st.sampled_from(["prj_01JTEST0000000000000000000", "prj_Ü", "p"]) | unicode_text)
    stream = draw(streams)
    sizes = draw(st.lists(st.integers(1, 3), min_size=1, max_size=max_batches))
    batches: list[Batch] = []
    for size in sizes:
        events = tuple(
            planned_event(
                index=index,
                event_id=draw(st.just(f"evt_{len(batches):02d}{index:024d}") | unicode_text),
                kind=draw(kinds),
                key=draw(idempotency_keys),
                occurred_at=draw(instants),
                payload=draw(payloads(values)),
                salt=draw(salts),
            )
            for index in range(size)
        )
        batches.append(Batch(draw(instants), events))
    return Chain(project, stream, tuple(batches), link(project, stream, batches))


# -- verifying ---------------------------------------------------------------------------------------


def served(records: Sequence[EventRecord]) -> list[dict[str, Any]]:
    return [stored_event(record) for record in records]


def verify_direct(
    stream: str, events: Sequence[dict[str, Any]], pin: tuple[int, str] | None = None
) -> ChainProblem | None:
    verifier = ChainVerifier(stream)
    if pin is not None:
        verifier.expect(*pin)
    for event in events:
        if verifier.feed(event) is not None:
            break
    return verifier.finish()


def verify_wire(
    stream: str, events: Sequence[dict[str, Any]], pin: tuple[int, str] | None = None
) -> ChainProblem | None:
    """As ``kaibo verify`` sees it: the events endpoint's JSON, parsed, through the client."""
    wire = json.loads(json.dumps({"events": events}))["events"]
    return verify_events(stream, wire, pin).problem


def assert_fails_at(problem: ChainProblem | None, seq: int, *codes: str) -> None:
    assert problem is not None, f"expected a failure at seq {seq}"
    assert problem.seq == seq, problem
    if codes:
        assert problem.code in codes, problem


def canonical_or_none(value: Any) -> bytes | None:
    try:
        return chain.canonicalize(value)
    except chain.NotCanonicalizableError:
        return None


# -- (a) appended histories verify -------------------------------------------------------------------


@PROPERTY
@given(chains(json_values))
def test_given_any_appended_history_when_verified_directly_then_it_verifies(history: Chain) -> None:
    verifier = ChainVerifier(history.stream)
    for event in served(history.records):
        assert verifier.feed(event) is None
    assert verifier.finish() is None
    last = history.records[-1]
    assert verifier.head == chain.ChainHead(seq=last.seq, hash=last.hash)
    assert verifier.payloads_checked == len(history.records)
    assert [r.seq for r in history.records] == list(range(1, len(history.records) + 1))
    assert history.records[0].prev_hash == chain.GENESIS_PREV_HASH


@PROPERTY
@given(chains())
def test_given_any_appended_history_when_verified_over_the_wire_then_it_verifies(history: Chain) -> None:
    wire = json.loads(json.dumps({"events": served(history.records)}))["events"]
    report = verify_events(history.stream, wire)
    assert report.problem is None
    assert (report.head.seq, report.head.hash) == (history.records[-1].seq, history.records[-1].hash)
    assert report.events_checked == report.payloads_checked == len(history.records)


@PROPERTY
@given(chains(json_values), st.data())
def test_given_purged_events_when_verified_then_headers_still_verify(
    history: Chain, data: st.DataObject
) -> None:
    purged_seqs = data.draw(st.sets(st.sampled_from([r.seq for r in history.records])))
    records = [
        replace(r, canonical_payload=None, salt=None) if r.seq in purged_seqs else r for r in history.records
    ]
    events = served(records)
    assert all(("payload" in e) == (e["seq"] not in purged_seqs) for e in events)
    assert verify_direct(history.stream, events) is None
    nulls = [{**e, "payload": None, "salt": None} if e["seq"] in purged_seqs else e for e in events]
    report = verify_events(history.stream, json.loads(json.dumps(nulls)))
    assert report.problem is None
    assert report.payloads_checked == len(records) - len(purged_seqs)


@PROPERTY
@given(any_json_values)
def test_given_any_accepted_payload_value_when_its_canonical_text_is_parsed_back_then_same_bytes(
    value: Any,
) -> None:
    # What remember accepts, the events endpoint serves as parsed JSON: it must canonicalize again to the
    # very bytes that were digested, or a verifier could never confirm it.
    try:
        canonical: bytes | None = chain.canonical_payload(value)
    except chain.NotCanonicalizableError:
        canonical = None
    assume(canonical is not None)
    assert canonical is not None
    assert chain.canonicalize(json.loads(canonical)) == canonical
    assert chain.canonicalize(json.loads(json.dumps(json.loads(canonical)))) == canonical


# -- (b) any header change, or a changed hash, fails at exactly that seq -------------------------------


@PROPERTY
@given(
    chains(simple_json_values),
    st.sampled_from([*chain.HEADER_FIELDS, "hash"]),
    any_json_values,
    st.data(),
)
def test_given_a_changed_header_field_or_hash_when_verified_then_fails_at_that_seq(
    history: Chain, field: str, new_value: Any, data: st.DataObject
) -> None:
    index = data.draw(st.integers(0, len(history.records) - 1))
    events = served(history.records)
    assume(canonical_or_none(new_value) != canonical_or_none(events[index][field]))
    events[index] = {**events[index], field: new_value}
    seq = index + 1

    assert_fails_at(verify_direct(history.stream, events), seq)
    assert_fails_at(verify_wire(history.stream, events), seq)


@PROPERTY
@given(chains(simple_json_values), st.sampled_from([*chain.HEADER_FIELDS, "hash"]), st.data())
def test_given_a_removed_header_field_when_verified_then_fails_at_that_seq_unless_it_is_the_stream(
    history: Chain, field: str, data: st.DataObject
) -> None:
    index = data.draw(st.integers(0, len(history.records) - 1))
    events = served(history.records)
    del events[index][field]
    if field == "stream":  # implied by the stream asked for, and still hashed
        assert verify_direct(history.stream, events) is None
        assert verify_direct(history.stream + "x", events) is not None
        return
    assert_fails_at(verify_direct(history.stream, events), index + 1)
    assert_fails_at(verify_wire(history.stream, events), index + 1)


@PROPERTY
@given(chains(simple_json_values), st.data())
def test_given_a_changed_served_prev_hash_when_verified_then_fails_at_that_seq(
    history: Chain, data: st.DataObject
) -> None:
    index = data.draw(st.integers(0, len(history.records) - 1))
    other = data.draw(salts.map(lambda s: s * 2))
    assume(other != history.records[index].prev_hash)
    events = served(history.records)
    events[index]["prevHash"] = other
    assert_fails_at(verify_direct(history.stream, events), index + 1, "prev_hash_mismatch")
    assert_fails_at(verify_wire(history.stream, events), index + 1, "prev_hash_mismatch")


# -- (c) any changed byte of a stored canonical payload fails at that seq ------------------------------


def parsed_object(text: bytes) -> dict[str, Any] | None:
    try:
        parsed = json.loads(text.decode("utf-8"))
    except ValueError:  # not UTF-8, or not JSON
        return None
    return parsed if isinstance(parsed, dict) else None


def servable_changes(original: bytes, position: int) -> list[tuple[bytes, dict[str, Any]]]:
    """Every one-byte change at ``position`` the events endpoint could still serve (JSON, an object)
    that changes the payload's value (``\u000f`` → ``\u000f`` or ``e`` → ``E`` changes only the text)."""
    changes = []
    for byte in range(256):
        if byte == original[position]:
            continue
        tampered = original[:position] + bytes([byte]) + original[position + 1 :]
        parsed = parsed_object(tampered)
        if parsed is not None and canonical_or_none(parsed) != original:
            changes.append((tampered, parsed))
    return changes


@PROPERTY
@given(chains(json_values), st.data())
def test_given_a_changed_byte_of_a_stored_payload_when_verified_then_fails_at_that_seq(
    history: Chain, data: st.DataObject
) -> None:
    index = data.draw(st.integers(0, len(history.records) - 1))
    record = history.records[index]
    assert record.canonical_payload is not None
    original = record.canonical_payload.encode("utf-8")
    changes = servable_changes(original, data.draw(st.integers(0, len(original) - 1)))
    assume(changes)  # e.g. a brace: no other byte there leaves JSON the server could serve
    tampered, parsed = data.draw(st.sampled_from(changes))

    records = list(history.records)
    records[index] = replace(record, canonical_payload=tampered.decode("utf-8"))
    events = served(records)
    seq = index + 1

    direct = verify_direct(history.stream, events)
    wire = verify_wire(history.stream, events)
    # A digit changed into a number outside the JCS domain cannot even be canonicalized.
    expected = "payload_digest_mismatch" if canonical_or_none(parsed) is not None else "bad_payload"
    assert_fails_at(direct, seq, expected)
    assert_fails_at(wire, seq, expected)


@PROPERTY
@given(chains(simple_json_values), st.data())
def test_given_a_changed_salt_when_verified_then_fails_at_that_seq(
    history: Chain, data: st.DataObject
) -> None:
    index = data.draw(st.integers(0, len(history.records) - 1))
    other = data.draw(salts)
    assume(other != history.records[index].salt)
    events = served(history.records)
    events[index]["salt"] = other
    assert_fails_at(verify_direct(history.stream, events), index + 1, "payload_digest_mismatch")
    assert_fails_at(verify_wire(history.stream, events), index + 1, "payload_digest_mismatch")


@PROPERTY
@given(chains(simple_json_values), st.sampled_from(["payload", "salt"]), st.data())
def test_given_half_a_purge_when_verified_then_partial_purge_at_that_seq(
    history: Chain, field: str, data: st.DataObject
) -> None:
    index = data.draw(st.integers(0, len(history.records) - 1))
    events = served(history.records)
    del events[index][field]
    assert_fails_at(verify_direct(history.stream, events), index + 1, "partial_purge")
    assert_fails_at(verify_wire(history.stream, events), index + 1, "partial_purge")


# -- (d) a removed, repeated or reordered event fails at that seq --------------------------------------


@PROPERTY
@given(chains(simple_json_values).filter(lambda c: len(c.records) >= 2), st.data())
def test_given_a_removed_event_when_verified_then_fails_at_its_seq(
    history: Chain, data: st.DataObject
) -> None:
    index = data.draw(st.integers(0, len(history.records) - 2))  # the last one: see the pin tests
    events = served(history.records)
    del events[index]
    assert_fails_at(verify_direct(history.stream, events), index + 1, "seq_gap")
    assert_fails_at(verify_wire(history.stream, events), index + 1, "seq_gap")


@PROPERTY
@given(chains(simple_json_values).filter(lambda c: len(c.records) >= 2), st.data())
def test_given_two_events_swapped_when_verified_then_fails_at_the_first(
    history: Chain, data: st.DataObject
) -> None:
    index = data.draw(st.integers(0, len(history.records) - 2))
    events = served(history.records)
    events[index], events[index + 1] = events[index + 1], events[index]
    assert_fails_at(verify_direct(history.stream, events), index + 1, "seq_gap")


@PROPERTY
@given(chains(simple_json_values))
def test_given_another_streams_history_when_verified_then_fails_at_seq_one(history: Chain) -> None:
    assert_fails_at(verify_direct(history.stream + "-other", served(history.records)), 1, "wrong_stream")


# -- (e) pinned heads: a rewritten or truncated history fails ------------------------------------------


@PROPERTY
@given(chains(simple_json_values), st.data())
def test_given_a_pinned_head_of_the_served_history_when_verified_then_it_verifies(
    history: Chain, data: st.DataObject
) -> None:
    pinned = data.draw(st.sampled_from(history.records))
    pin = (pinned.seq, pinned.hash.upper() if data.draw(st.booleans()) else pinned.hash)
    assert verify_direct(history.stream, served(history.records), pin) is None
    assert verify_wire(history.stream, served(history.records), pin) is None


@PROPERTY
@given(chains(simple_json_values), st.data())
def test_given_history_rewritten_consistently_when_verified_against_an_earlier_pin_then_fails_at_the_pin(
    history: Chain, data: st.DataObject
) -> None:
    pinned = data.draw(st.sampled_from(history.records))
    # The server rewrites one event at or before the pin and recomputes every hash after it.
    positions = [(b, e) for b, batch in enumerate(history.batches) for e in range(len(batch.events))]
    batch_no, event_no = data.draw(st.sampled_from(positions[: pinned.seq]))
    batch = history.batches[batch_no]
    rewritten = list(batch.events)
    rewritten[event_no] = replace(
        rewritten[event_no], idempotency_key=rewritten[event_no].idempotency_key + "'"
    )
    batches = list(history.batches)
    batches[batch_no] = replace(batch, events=tuple(rewritten))
    forged = link(history.project, history.stream, batches)

    assert verify_direct(history.stream, served(forged)) is None  # self-consistent: only a pin tells
    pin = (pinned.seq, pinned.hash)
    assert_fails_at(verify_direct(history.stream, served(forged), pin), pinned.seq, "pinned_head_mismatch")
    assert_fails_at(verify_wire(history.stream, served(forged), pin), pinned.seq, "pinned_head_mismatch")


@PROPERTY
@given(chains(simple_json_values), st.data())
def test_given_a_pin_with_another_hash_when_verified_then_fails_at_the_pin(
    history: Chain, data: st.DataObject
) -> None:
    pinned = data.draw(st.sampled_from(history.records))
    other = data.draw(salts.map(lambda s: s * 2))
    assume(other != pinned.hash)
    problem = verify_direct(history.stream, served(history.records), (pinned.seq, other))
    assert_fails_at(problem, pinned.seq, "pinned_head_mismatch")


@PROPERTY
@given(chains(simple_json_values), st.data())
def test_given_a_pin_beyond_the_served_history_when_verified_then_pinned_head_missing(
    history: Chain, data: st.DataObject
) -> None:
    # Truncation (or rollback): the server serves only the first `kept` events.
    pinned = data.draw(st.sampled_from(history.records))
    kept = data.draw(st.integers(0, pinned.seq - 1))
    events = served(history.records[:kept])
    assert verify_direct(history.stream, events) is None  # a shorter chain is self-consistent
    pin = (pinned.seq, pinned.hash)
    assert_fails_at(verify_direct(history.stream, events, pin), pinned.seq, "pinned_head_missing")
    assert_fails_at(verify_wire(history.stream, events, pin), pinned.seq, "pinned_head_missing")
    beyond = (len(history.records) + data.draw(st.integers(1, 5)), pinned.hash)
    assert_fails_at(
        verify_direct(history.stream, served(history.records), beyond), beyond[0], "pinned_head_missing"
    )


@PROPERTY
@given(chains(simple_json_values))
def test_given_the_listed_head_when_the_served_events_stop_short_then_the_client_fails(
    history: Chain,
) -> None:
    last = history.records[-1]
    events = json.loads(json.dumps(served(history.records[:-1])))
    report = verify_events(history.stream, events, listed_head=(last.seq, last.hash))
    assert_fails_at(report.problem, last.seq, "listed_head_missing")
    report = verify_events(
        history.stream, json.loads(json.dumps(served(history.records))), listed_head=(last.seq, "0" * 64)
    )
    assert_fails_at(report.problem, last.seq, "listed_head_mismatch")


def test_given_a_non_ascii_served_hash_when_verified_then_hash_mismatch_not_an_exception() -> None:
    events = served(link("prj_1", "s", [Batch("2026-06-02T09:30:00.000Z", (planned_event({"a": 1}),))]))
    events[0]["hash"] = "é" * 64
    assert_fails_at(verify_direct("s", events), 1, "hash_mismatch")
    assert_fails_at(verify_wire("s", events), 1, "hash_mismatch")
