"""``kaibo verify --ledger`` and ``--receipt``: the deletion ledger recomputed, an erasure checked.

The chain checks live in ``kaibo_core.core.ledger.LedgerVerifier`` (the code the service hashes
its entries with); this module pages the served ledger into it, trusting no hash it is sent,
and for one receipt checks what the receipt promises (docs/forget.md, "Proving an erasure"):

- the receipt is in the ledger: the chain recomputes up to the receipt's ``ledgerSeq``, and
  the entry there hashes to exactly the receipt's ``hash``;
- every memory it names is served without content, as ``tombstoned`` or ``purged``; once the
  receipt reads ``purged``, as ``purged`` only;
- once the receipt reads ``purged``, every event it names is served without payload and salt,
  except those it names in ``unlocatedEventIds`` (the purge found them in no stream of the project:
  no payload of theirs is stored): for each of these, the placeholder that keeps anything from
  being made from it (its provisional memory) reads ``purged``, and a note names them.

Served entries do not carry their project, which is part of every hashed header: the caller
names it (``kaibo verify --project``, ``KAIBO_PROJECT_ID``). docs/verify.md specifies the bytes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kaibo.client import KaiboAPIError, KaiboClient
from kaibo_core.core.chain import ChainHead
from kaibo_core.core.ledger import LedgerProblem, LedgerVerifier, check_receipt

_PROJECT_ID = re.compile(r"^prj_[0-9A-HJKMNP-TV-Z]{26}$")
_HEX64 = re.compile("^[0-9a-f]{64}$")
_RECEIPT_STATES = ("tombstoned", "purged")


def parse_project_id(text: str) -> str:
    """A project id as ``make run`` and ``keys create`` print it: ``prj_`` + 26 Crockford base32."""
    value = text.strip()
    if not _PROJECT_ID.match(value):
        raise ValueError(f"expected a project id such as prj_01JZ8Q4W7T2M5R9X3C6B1N0VKD, got {text!r}")
    return value


# -- the whole ledger --------------------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerReport:
    """The outcome of recomputing the ledger.

    ``entries_checked`` counts the entries fed to the verifier (including the one that failed,
    if any); ``head`` is the last entry that verified (seq 0 and the genesis hash if none did);
    ``problem`` is the first thing wrong, or None.
    """

    project_id: str
    entries_checked: int
    head: ChainHead
    problem: LedgerProblem | None

    @property
    def ok(self) -> bool:
        return self.problem is None


def verify_ledger_entries(
    project_id: str,
    entries: Iterable[Any],
    pinned_head: tuple[int, str] | None = None,
    *,
    through_seq: int | None = None,
) -> LedgerReport:
    """Verify served ledger entries (in the order served); stops at the first problem.

    ``pinned_head`` is a head kept from before (``SEQ:HASH`` printed by an earlier verify, or a
    receipt's ``ledgerSeq`` and ``hash``): the ledger must hold exactly that entry.
    ``through_seq`` stops after that entry (what a receipt needs), instead of reading to the end.
    """
    verifier = LedgerVerifier(project_id)
    if pinned_head is not None:
        verifier.expect(*pinned_head)
    checked = 0
    problem: LedgerProblem | None = None
    for entry in entries:
        checked += 1
        problem = _feed(verifier, entry)
        if problem is not None or (through_seq is not None and verifier.head.seq >= through_seq):
            break
    if problem is None:
        problem = verifier.finish()
    return LedgerReport(project_id, checked, verifier.head, problem)


def _feed(verifier: LedgerVerifier, entry: Any) -> LedgerProblem | None:
    seq = verifier.head.seq + 1
    if not isinstance(entry, dict):
        return LedgerProblem(seq, "malformed_entry", "served entry is not a JSON object")
    try:
        return verifier.feed(entry)
    except (TypeError, ValueError, AttributeError) as exc:  # defensive: a field the checks cannot use
        return LedgerProblem(seq, "malformed_entry", f"{type(exc).__name__}: {exc}")


def verify_ledger(
    client: KaiboClient, project_id: str, pinned_head: tuple[int, str] | None = None
) -> LedgerReport:
    """Page through the project's whole deletion ledger (``GET /v1/ledger``) and recompute it."""
    entries = client.ledger()
    try:
        return verify_ledger_entries(project_id, entries, pinned_head)
    finally:
        entries.close()  # stop paging at the first problem


# -- one receipt -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReceiptFailure:
    """One thing a receipt promises that the server does not show.

    ``subject`` names what failed: ``receipt rcpt_…``, ``ledger seq N``, ``memory mem_…`` or
    ``event evt_…``.
    """

    subject: str
    code: str
    detail: str

    def __str__(self) -> str:
        return f"{self.subject}: {self.code}: {self.detail}"


@dataclass(frozen=True)
class ReceiptReport:
    """The outcome for one receipt; ``ok`` when nothing failed (``notes`` are not failures)."""

    receipt_id: str
    state: str | None
    ledger_seq: int | None
    purge_after: str | None
    purge_due: bool  # purgeAfter has passed (by ``now``)
    ledger: LedgerReport | None  # None when the receipt gives no seq and hash to look for
    memories_checked: int
    memory_statuses: dict[str, int]  # status -> how many of the named memories read it
    events_checked: int  # events looked up (only once the receipt reads purged)
    failures: tuple[ReceiptFailure, ...]
    notes: tuple[str, ...]
    #: The events the purge found in no stream, as the receipt names them (nothing stored to erase).
    unlocated_event_ids: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failures


def _instant(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def _id_list(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    return None


class _ReceiptCheck:
    """The state of one ``verify_receipt`` run: what failed so far, and the memories read."""

    def __init__(self, client: KaiboClient, receipt_id: str) -> None:
        self.client = client
        self.receipt_id = receipt_id
        self.failures: list[ReceiptFailure] = []
        self.notes: list[str] = []
        self._memories: dict[str, dict[str, Any] | None] = {}

    def fail(self, subject: str, code: str, detail: str) -> None:
        self.failures.append(ReceiptFailure(subject, code, detail))

    def memory(self, memory_id: str) -> dict[str, Any] | None:
        """``GET /v1/memories/{id}``, once per id; None for ``404 memory_not_found``."""
        if memory_id not in self._memories:
            try:
                self._memories[memory_id] = self.client.memory(memory_id)
            except KaiboAPIError as exc:
                if exc.status != 404:
                    raise
                self._memories[memory_id] = None
        return self._memories[memory_id]

    # -- the ledger ------------------------------------------------------------------------------

    def ledger(self, project_id: str, receipt: Mapping[str, Any]) -> LedgerReport | None:
        subject = f"receipt {self.receipt_id}"
        if receipt.get("id") != self.receipt_id:
            self.fail(subject, "wrong_receipt", f"the server answered with entry {receipt.get('id')!r}")
        try:
            problem = check_receipt(project_id, receipt)
        except (TypeError, ValueError, AttributeError) as exc:
            problem = LedgerProblem(0, "malformed_entry", f"{type(exc).__name__}: {exc}")
        if problem is not None:
            self.fail(subject, problem.code, f"the receipt is not self-consistent: {problem.detail}")
        seq, hash_hex = receipt.get("ledgerSeq"), receipt.get("hash")
        if type(seq) is not int or seq < 1 or not isinstance(hash_hex, str) or not _HEX64.match(hash_hex):
            if problem is None:
                self.fail(subject, "malformed_entry", "its ledgerSeq and hash cannot name a ledger entry")
            return None
        entries = self.client.ledger()
        try:
            report = verify_ledger_entries(project_id, entries, (seq, hash_hex), through_seq=seq)
        finally:
            entries.close()
        found = report.problem
        if found is not None and found.code == "pinned_head_mismatch":
            self.fail(
                f"ledger seq {seq}",
                "receipt_not_in_ledger",
                f"the ledger's entry at seq {seq} is not this receipt: {found.detail}",
            )
        elif found is not None and found.code == "pinned_head_missing":
            self.fail(
                f"ledger seq {seq}",
                "receipt_not_in_ledger",
                f"the served ledger ends at seq {report.head.seq}, before the receipt's seq {seq}",
            )
        elif found is not None:
            self.fail(f"ledger seq {found.seq}", found.code, found.detail)
        return report

    # -- memories and events ---------------------------------------------------------------------

    def memories(self, memory_ids: list[str], state: Any, due: bool) -> dict[str, int]:
        statuses: dict[str, int] = {}
        pending: list[str] = []
        for memory_id in memory_ids:
            subject = f"memory {memory_id}"
            memory = self.memory(memory_id)
            if memory is None:
                self.fail(subject, "not_served", "GET /v1/memories answers 404 memory_not_found")
                continue
            status = memory.get("status")
            statuses[str(status)] = statuses.get(str(status), 0) + 1
            if memory.get("content") is not None:
                self.fail(subject, "content_served", f"it reads {status!r} and is served with its content")
            if status == "purged":
                continue
            if status != "tombstoned":
                self.fail(subject, "not_forgotten", f"it reads {status!r}, not tombstoned or purged")
            elif state == "purged":
                self.fail(
                    subject, "not_purged", "it still reads 'tombstoned', but the receipt reads 'purged'"
                )
            elif due:
                pending.append(memory_id)
        if pending:
            self.notes.append(f"{len(pending)} of its memories still read tombstoned: {', '.join(pending)}")
        return statuses

    def _provisional_of(self, subject: str, event_id: str) -> str | None:
        """The id of the event's provisional memory (evt_X -> mem_X); None, failed, if it is not an
        event id."""
        provisional = _provisional_memory_id(event_id)
        if provisional is None:
            self.fail(subject, "bad_event_id", "not an event id (evt_...)")
        return provisional

    def event(self, event_id: str) -> None:
        subject = f"event {event_id}"
        provisional = self._provisional_of(subject, event_id)
        if provisional is None:
            return
        # The event's provisional memory (evt_X -> mem_X) cites where the event is: stream and seq.
        memory = self.memory(provisional)
        sources = memory.get("sourceEvents") if memory is not None else None
        cited = next(
            (s for s in sources or () if isinstance(s, dict) and s.get("eventId") == event_id),
            None,
        )
        stream, seq = (cited.get("stream"), cited.get("seq")) if cited is not None else (None, None)
        if not isinstance(stream, str) or type(seq) is not int or seq < 1:
            why = "is not served" if memory is None else "does not cite it with a stream and seq"
            self.fail(subject, "event_not_located", f"its provisional memory {provisional} {why}")
            return
        where = f"stream {stream} seq {seq}"
        events = self.client.events(stream, from_seq=seq, limit=1)
        try:
            served = next(events, None)
        finally:
            events.close()
        if not isinstance(served, dict) or served.get("seq") != seq:
            self.fail(subject, "event_not_found", f"{where} serves no event")
            return
        if served.get("id") != event_id:
            self.fail(subject, "event_not_found", f"{where} serves another event, {served.get('id')!r}")
            return
        for field in ("payload", "salt"):
            if served.get(field) is not None:
                self.fail(subject, f"{field}_served", f"{where} is served with its {field} after the purge")

    def unlocated_event(self, event_id: str) -> None:
        """An event the purge found in no stream: its place is unknown here too, but nothing may be
        made from it, so its provisional memory (the purge's placeholder) must read purged."""
        subject = f"event {event_id}"
        provisional = self._provisional_of(subject, event_id)
        if provisional is None:
            return
        memory = self.memory(provisional)
        if memory is None:
            self.fail(
                subject,
                "event_not_blocked",
                f"the purge found it in no stream, and its placeholder {provisional} is not served",
            )
        elif memory.get("status") != "purged" or memory.get("content") is not None:
            self.fail(
                subject,
                "event_not_blocked",
                f"the purge found it in no stream, and its provisional memory {provisional} reads "
                f"{memory.get('status')!r}{' with content' if memory.get('content') is not None else ''}, "
                "not purged",
            )


def _provisional_memory_id(event_id: str) -> str | None:
    """``evt_X`` -> ``mem_X``, the event's provisional memory; None for what is not an event id."""
    prefix, _, suffix = event_id.partition("_")
    return f"mem_{suffix}" if prefix == "evt" and suffix else None


def verify_receipt(
    client: KaiboClient, project_id: str, receipt_id: str, now: datetime | None = None
) -> ReceiptReport:
    """Check one forget's receipt against the ledger and what the server serves now.

    ``now`` (timezone-aware; default: this machine's clock) decides whether ``purgeAfter`` has
    passed. A receipt past ``purgeAfter`` that still reads ``tombstoned`` is not a failure (the
    purge runs every few minutes): it is reported in ``notes`` as a pending purge. Nor is a purged
    receipt naming ``unlocatedEventIds`` (events stored nowhere, nothing to erase): a note names them.
    Raises KaiboAPIError if the server refuses a call (``404 receipt_not_found``, ...).
    """
    now = now if now is not None else datetime.now(UTC)
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    check = _ReceiptCheck(client, receipt_id)
    receipt = client.receipt(receipt_id)
    ledger = check.ledger(project_id, receipt)

    subject = f"receipt {receipt_id}"
    state = receipt.get("state")
    if state not in _RECEIPT_STATES:
        check.fail(subject, "unknown_state", f"state {state!r}, not tombstoned or purged")
    purge_after = _instant(receipt.get("purgeAfter"))
    if purge_after is None:
        check.fail(subject, "malformed_entry", f"purgeAfter {receipt.get('purgeAfter')!r} is not an instant")
    due = purge_after is not None and now >= purge_after
    if due and state == "tombstoned":
        check.notes.append(
            f"purge pending: purgeAfter {receipt.get('purgeAfter')} has passed and the receipt still reads "
            "tombstoned (the purge runs every few minutes); its events were not checked: verify again later"
        )
    elif purge_after is not None and not due and state == "purged":
        check.notes.append(
            f"the receipt reads purged before purgeAfter {receipt.get('purgeAfter')} by this machine's clock"
        )

    memory_ids, event_ids = _id_list(receipt.get("memoryIds")), _id_list(receipt.get("eventIds"))
    for name, ids in (("memoryIds", memory_ids), ("eventIds", event_ids)):
        if ids is None:
            check.fail(subject, "malformed_entry", f"{name} is not a list of ids")
    unlocated = _unlocated_event_ids(check, receipt, state, event_ids or [])
    statuses = check.memories(memory_ids or [], state, due)
    events_checked = 0
    if state == "purged":
        for event_id in event_ids or []:
            if event_id in unlocated:
                if _provisional_memory_id(event_id) not in (memory_ids or []):  # else checked above
                    check.unlocated_event(event_id)
                continue
            events_checked += 1
            check.event(event_id)
    if unlocated:
        check.notes.append(
            f"the purge found {len(unlocated)} of its events in no stream of the project "
            f"(unlocatedEventIds: {', '.join(unlocated)}): no payload of theirs is stored, so there "
            "was nothing to erase, and nothing can be made from them (docs/forget.md)"
        )

    seq = receipt.get("ledgerSeq")
    return ReceiptReport(
        receipt_id=receipt_id,
        state=state if isinstance(state, str) else None,
        ledger_seq=seq if type(seq) is int else None,
        purge_after=receipt.get("purgeAfter") if isinstance(receipt.get("purgeAfter"), str) else None,
        purge_due=due,
        ledger=ledger,
        memories_checked=len(memory_ids or []),
        memory_statuses=statuses,
        events_checked=events_checked,
        failures=tuple(check.failures),
        notes=tuple(check.notes),
        unlocated_event_ids=tuple(unlocated),
    )


def _unlocated_event_ids(
    check: _ReceiptCheck, receipt: Mapping[str, Any], state: Any, event_ids: list[str]
) -> list[str]:
    """The receipt's ``unlocatedEventIds`` (absent: none): only on a purged receipt, and only events
    it names; anything else is a failure, and no event is then taken as unlocated."""
    served = receipt.get("unlocatedEventIds")
    if served is None:
        return []
    subject = f"receipt {check.receipt_id}"
    ids = _id_list(served)
    if ids is None:
        check.fail(subject, "malformed_entry", "unlocatedEventIds is not a list of ids")
        return []
    if state != "purged":
        check.fail(
            subject, "malformed_entry", f"unlocatedEventIds on a receipt reading {state!r}, not purged"
        )
        return []
    foreign = sorted(set(ids) - set(event_ids))
    if foreign:
        check.fail(
            subject, "malformed_entry", f"unlocatedEventIds names events it does not: {', '.join(foreign)}"
        )
        return []
    return ids
