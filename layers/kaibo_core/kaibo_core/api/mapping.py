"""The one place where domain values become the wire format (and requests become domain values).

Services take and return domain types (``kaibo_core.core.models``); handlers call these
functions on the way in and out. API.md's shapes live in ``kaibo_core.api.models``; this
module is the only code that knows both sides.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kaibo_core.api.models import (
    CreateKeyResponse,
    CreateProjectResponse,
    EventsPage,
    ExplainResponse,
    ForgetRequest,
    ForgetResponse,
    ForgottenMemoryOut,
    JobOut,
    LedgerPage,
    MemoryOut,
    RecallRequest,
    RecallResponse,
    ReceiptOut,
    ReceiptStateOut,
    RememberRequest,
    RememberResponse,
    StoredEventOut,
    StreamsPage,
)
from kaibo_core.core.forgetting import ForgetOutcome
from kaibo_core.core.forgetting import ForgetRequest as ForgetCall
from kaibo_core.core.ledger import LedgerEntry, PurgeOutcome
from kaibo_core.core.models.events import EventPage, EventRecord, HeadPage, NewEvent, RememberOutcome
from kaibo_core.core.models.jobs import JobRecord
from kaibo_core.core.models.keys import CreatedKey, CreatedProject
from kaibo_core.core.models.memories import Explanation, MemoryRecord, SourceEventRef
from kaibo_core.core.models.recall import ABSTAIN_MESSAGES, RecallAnswer, RecallCandidate, RecallQuery

#: Statuses whose text is no longer served (the item may still hold it until purge).
_TEXT_WITHHELD = frozenset({"tombstoned", "purged"})

# --- remember ------------------------------------------------------------------------------------


def new_events(request: RememberRequest) -> list[NewEvent]:
    return [
        NewEvent(
            idempotency_key=event.idempotencyKey,
            kind=event.kind,
            payload=event.payload.model_dump(mode="python", exclude_unset=True),
            occurred_at=event.occurredAt,
            time_zone=event.timeZone,
            supersedes=tuple(event.supersedes),
            cancels=tuple(event.cancels),
        )
        for event in request.events
    ]


def remember_response(outcome: RememberOutcome) -> tuple[int, RememberResponse]:
    """``202`` with the provisional memories, or ``200`` with the structured ones once a waited-for
    job is done (API.md)."""
    structured = outcome.structured
    shown = outcome.memories if structured is None else structured
    body = RememberResponse(
        jobId=outcome.job_id,
        events=[
            {
                "id": e.record.id,
                "stream": e.record.stream,
                "seq": e.record.seq,
                "hash": e.record.hash,
                "prevHash": e.record.prev_hash,
                "idempotencyKey": e.record.idempotency_key,
                "replayed": e.replayed,
            }
            for e in outcome.events
        ],
        memories=[
            {
                "id": m.id,
                "status": m.status,
                "type": m.type,
                "content": None if m.status in _TEXT_WITHHELD else m.content or "",
            }
            for m in shown
        ],
        job=None if outcome.job is None else job_out(outcome.job),
    )
    return (202 if structured is None else 200), body


# --- recall --------------------------------------------------------------------------------------


def recall_query(request: RecallRequest) -> RecallQuery:
    return RecallQuery(
        question=request.question,
        budget=request.budget,
        as_of=request.asOf,
        streams=frozenset(request.streams) if request.streams else None,
        types=frozenset(request.types) if request.types else None,
        include_superseded=request.includeSuperseded,
    )


def citations(refs: Sequence[SourceEventRef]) -> list[dict[str, Any]]:
    return [{"eventId": r.event_id, "stream": r.stream, "seq": r.seq, "hash": r.hash} for r in refs]


def recall_body(answer: RecallAnswer) -> dict[str, Any]:
    """The JSON of ``POST /v1/recall`` (also the SSE ``final`` event's data)."""
    reason = answer.abstain_reason
    abstain: dict[str, Any] = (
        {"abstained": False}
        if reason is None
        else {"abstained": True, "reason": reason, "message": ABSTAIN_MESSAGES[reason]}
    )
    return {
        "items": [
            {
                "memoryId": hit.memory.id,
                "type": hit.memory.type,
                "form": hit.form,
                "text": hit.text,
                "validFrom": hit.memory.valid_from,
                "validTo": hit.memory.valid_to,
                "confidence": hit.memory.confidence,
                "score": round(hit.score, 4),
                "tokens": hit.tokens,
                "citations": citations(hit.memory.source_events),
                **({"olderThan": hit.older_than} if hit.older_than else {}),
                **({"foundVia": hit.found_via} if hit.found_via else {}),
            }
            for hit in answer.items
        ],
        "usedTokens": answer.used_tokens,
        "budget": answer.budget,
        "asOf": answer.as_of,
        "abstain": abstain,
    }


def recall_response(answer: RecallAnswer) -> RecallResponse:
    return RecallResponse.model_validate(recall_body(answer))


def candidates_event(candidates: Sequence[RecallCandidate]) -> dict[str, Any]:
    """The SSE ``candidates`` event: ids, types and scores only, before packing."""
    return {
        "candidates": [
            {
                "memoryId": c.memory.id,
                "type": c.memory.type,
                "score": round(c.score, 4),
                "validFrom": c.memory.valid_from,
            }
            for c in candidates
        ]
    }


def packed_event(body: dict[str, Any]) -> dict[str, Any]:
    """The SSE ``packed`` event, from ``recall_body``'s JSON."""
    return {"items": body["items"], "usedTokens": body["usedTokens"]}


# --- memories, explain, jobs ---------------------------------------------------------------------


def memory_out(memory: MemoryRecord) -> MemoryOut:
    """``GET /v1/memories/{id}``: any status; once tombstoned no text at all: no content, and no
    subject or tags either (both are taken from the text: "dana whitfield hiv test result")."""
    withheld = memory.status in _TEXT_WITHHELD
    served: dict[str, Any] = {
        "id": memory.id,
        "status": memory.status,
        "type": memory.type,
        "validFrom": memory.valid_from,
        "validTo": memory.valid_to,
        "confidence": memory.confidence,
        "stream": memory.stream,
        "sourceEventIds": list(memory.source_event_ids),
        "sourceEvents": citations(memory.source_events),
        "supersedes": list(memory.supersedes),
        "supersededBy": list(memory.superseded_by),
        "replacedBy": list(memory.replaced_by),
        "createdAt": memory.created_at,
        "subject": None if withheld else memory.subject,
        "tags": None if withheld else list(memory.tags) or None,
        "replaces": memory.replaces,
    }
    if memory.content is not None and not withheld:
        served["content"] = memory.content
    return MemoryOut.model_validate(served)


def explain_response(explanation: Explanation) -> ExplainResponse:
    return ExplainResponse.model_validate(
        {"memoryId": explanation.memory_id, "chain": [_version(m) for m in explanation.chain]}
    )


def _version(memory: MemoryRecord) -> dict[str, Any]:
    version: dict[str, Any] = {
        "memoryId": memory.id,
        "status": memory.status,
        "type": memory.type,
        "validFrom": memory.valid_from,
        "validTo": memory.valid_to,
        "confidence": memory.confidence,
        "supersedes": list(memory.supersedes),
        "supersededBy": list(memory.superseded_by),
        "replacedBy": list(memory.replaced_by),
        "replaces": memory.replaces,
        "sourceEvents": citations(memory.source_events),
    }
    if memory.content is not None and memory.status not in _TEXT_WITHHELD:
        version["content"] = memory.content
    return version


def job_out(job: JobRecord) -> JobOut:
    return JobOut(
        jobId=job.id,
        status=job.status,
        eventIds=list(job.event_ids),
        memoryIds=list(job.memory_ids),
        createdAt=job.created_at,
        updatedAt=job.updated_at,
        error=job.error,
    )


# --- the event log -------------------------------------------------------------------------------


def stored_event(record: EventRecord) -> dict[str, Any]:
    """An event as ``GET /v1/streams/{stream}/events`` serves it: the hashed header, the hashes, and
    the payload with its salt until they are purged (what ``kaibo verify`` recomputes)."""
    served: dict[str, Any] = {**record.header(), "hash": record.hash, "prevHash": record.prev_hash}
    if record.canonical_payload is not None and record.salt is not None:
        served["payload"] = record.payload()
        served["salt"] = record.salt
    return served


def events_page(page: EventPage) -> EventsPage:
    return EventsPage(
        events=[StoredEventOut.model_validate(stored_event(r)) for r in page.events],
        nextFromSeq=page.next_from_seq,
    )


def streams_page(page: HeadPage) -> StreamsPage:
    return StreamsPage.model_validate(
        {
            "streams": [{"stream": name, "seq": head.seq, "hash": head.hash} for name, head in page.heads],
            "nextCursor": page.next_cursor,
        }
    )


# --- projects and keys ---------------------------------------------------------------------------


def created_key(created: CreatedKey) -> CreateKeyResponse:
    return CreateKeyResponse(keyId=created.key_id, apiKey=created.api_key, scopes=list(created.scopes))


def created_project(created: CreatedProject) -> CreateProjectResponse:
    key = created.key
    return CreateProjectResponse(
        projectId=key.project_id,
        keyId=key.key_id,
        apiKey=key.api_key,
        scopes=list(key.scopes),
        timeZone=created.time_zone,
    )


# --- forget, the ledger, receipts ----------------------------------------------------------------------


def forget_request(request: ForgetRequest) -> ForgetCall:
    return ForgetCall(
        reason=request.reason,
        memory_id=request.memoryId,
        query=request.query,
        stream=request.stream,
        subject=request.subject,
        dry_run=request.dryRun,
        preview_token=request.previewToken,
        max_memories=request.maxMemories,
        idempotency_key=request.idempotencyKey,
    )


def receipt_out(entry: LedgerEntry) -> ReceiptOut:
    return ReceiptOut.model_validate(entry.as_served())


def forget_response(outcome: ForgetOutcome, *, may_read: bool) -> ForgetResponse:
    """The set (a dry run shows each memory's text, to check it, to a key that may read; a real
    forget never does), the receipt and the reason's salt (shown once, and again to a retry
    under the same idempotency key)."""
    show_text = outcome.dry_run and may_read
    texts = {
        member.memory.id: member.memory.content
        for member in outcome.found.members
        if show_text and member.memory.status not in _TEXT_WITHHELD
    }
    memories = [
        ForgottenMemoryOut(
            id=member.id, status=member.status, type=member.type, content=texts.get(member.id), why=member.why
        )
        for member in outcome.memories
    ]
    return ForgetResponse(
        dryRun=outcome.dry_run,
        previewToken=outcome.preview_token,
        memories=memories,
        eventIds=list(outcome.event_ids),
        receipt=None if outcome.receipt is None else receipt_out(outcome.receipt),
        reasonSalt=outcome.reason_salt,
        replayed=outcome.replayed,
    )


def ledger_page(entries: Sequence[LedgerEntry], next_from_seq: int | None) -> LedgerPage:
    return LedgerPage(entries=[receipt_out(entry) for entry in entries], nextFromSeq=next_from_seq)


def receipt_state_out(entry: LedgerEntry, purge: PurgeOutcome | None) -> ReceiptStateOut:
    """``tombstoned`` until the purge finished the entry, then ``purged``, with the events it
    found in no stream (if any) named beside the state."""
    return ReceiptStateOut.model_validate(
        {
            **entry.as_served(),
            "state": "tombstoned" if purge is None else "purged",
            "unlocatedEventIds": list(purge.unlocated_event_ids)
            if purge and purge.unlocated_event_ids
            else None,
        }
    )
