"""Provisional memories: an event's text, indexed the moment remember commits.

A provisional memory is what recall can find before the structurer has run: the
event's own words, extracted per kind, typed ``episode`` with a low confidence.
Its id derives from the event id (``evt_X`` -> ``mem_X``), so making it twice (a
retry, a replay, a redelivered job) makes the same memory. Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any, Final

from kaibo_core.core.models.events import EventRecord
from kaibo_core.core.models.memories import PROVISIONAL_CONFIDENCE, MemoryRecord, SourceEventRef

PROVISIONAL_TYPE: Final = "episode"


def provisional_memory_id(event_id: str) -> str:
    prefix, _, suffix = event_id.partition("_")
    if prefix != "evt" or not suffix:
        raise ValueError(f"not an event id: {event_id!r}")
    return f"mem_{suffix}"


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _attachment_captions(payload: dict[str, Any]) -> list[str]:
    attachments = payload.get("attachments")
    if not isinstance(attachments, list):
        return []
    captions = []
    for attachment in attachments:
        if isinstance(attachment, dict):
            caption = attachment.get("caption")
            if isinstance(caption, str) and caption.strip():
                captions.append(f"[attachment: {caption.strip()}]")
    return captions


def _message_text(payload: dict[str, Any]) -> str:
    name = payload.get("name")
    text = str(payload.get("text", ""))
    lines = [f"{name}: {text}" if isinstance(name, str) and name else text, *_attachment_captions(payload)]
    return "\n".join(line for line in lines if line)


def _tool_call_text(payload: dict[str, Any]) -> str:
    arguments = payload.get("input")
    call = f"{payload.get('tool', '')}({'' if arguments is None else _json_text(arguments)})"
    status = payload.get("status")
    output = payload.get("output")
    result = f" -> {status}" if isinstance(status, str) and status else ""
    if output is not None:
        result += f": {_json_text(output)}" if result else f" -> {_json_text(output)}"
    return call + result


def _file_text(payload: dict[str, Any]) -> str:
    return f"{payload.get('path', '')}\n{payload.get('content', '')}"


def _commit_text(payload: dict[str, Any]) -> str:
    parts = ["commit"]
    sha = payload.get("sha")
    if isinstance(sha, str) and sha:
        parts.append(sha[:12])
    author = payload.get("author")
    if isinstance(author, str) and author:
        parts.append(f"by {author}")
    repository = payload.get("repository")
    if isinstance(repository, str) and repository:
        parts.append(f"in {repository}")
    return f"{' '.join(parts)}: {payload.get('message', '')}"


_EXTRACTORS = {
    "message": _message_text,
    "tool_call": _tool_call_text,
    "file": _file_text,
    "commit": _commit_text,
}


def provisional_text(kind: str, payload: dict[str, Any]) -> str:
    """The text a provisional memory holds for an event of ``kind`` (docs/recall.md, "Provisional")."""
    extractor = _EXTRACTORS.get(kind)
    text = extractor(payload) if extractor else _json_text(payload)
    return text.strip()


def provisional_memory(event: EventRecord, created_at: str) -> MemoryRecord | None:
    """The provisional memory of a stored event; None when its payload is purged or holds no text."""
    payload = event.payload()
    if payload is None:
        return None
    text = provisional_text(event.kind, payload)
    if not text:
        return None
    return MemoryRecord(
        project_id=event.project_id,
        id=provisional_memory_id(event.id),
        status="provisional",
        type=PROVISIONAL_TYPE,
        content=text,
        valid_from=event.occurred_at,
        valid_to=None,
        confidence=PROVISIONAL_CONFIDENCE,
        stream=event.stream,
        source_events=(SourceEventRef(event.id, event.stream, event.seq, event.hash),),
        created_at=created_at,
    )
