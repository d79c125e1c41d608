"""Reading the event log back: pages of a stream's events, and the project's stream heads."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from typing import Protocol

from kaibo_core.errors import UnprocessableError
from kaibo_core.limits import MAX_RESPONSE_PAYLOAD_BYTES, STREAM_NAME_PATTERN
from kaibo_core.models.api import EventsPage, StoredEventOut, StreamHeadOut, StreamsPage
from kaibo_core.models.events import EventRecord, StreamHead
from kaibo_core.storage_keys import ProjectId

_STREAM = re.compile(STREAM_NAME_PATTERN)


class EventReader(Protocol):
    def page_events(
        self, project: ProjectId, stream: str, from_seq: int, limit: int, max_bytes: int
    ) -> tuple[list[EventRecord], int | None]: ...

    def list_heads(
        self, project: ProjectId, after_stream: str | None, limit: int
    ) -> tuple[list[tuple[str, StreamHead]], str | None]: ...


def encode_cursor(stream: str) -> str:
    return base64.urlsafe_b64encode(stream.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    try:
        stream = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise UnprocessableError("invalid_cursor", "cursor is not one this API returned.") from exc
    if not _STREAM.match(stream):
        raise UnprocessableError("invalid_cursor", "cursor is not one this API returned.")
    return stream


def check_stream_name(stream: str) -> str:
    if not _STREAM.match(stream):
        raise UnprocessableError(
            "invalid_stream_name",
            "Stream names are 1-128 characters of letters, digits, '.', '_', ':' and '-', "
            "starting with a letter or digit.",
            {"stream": stream[:200]},
        )
    return stream


class StreamsService:
    def __init__(self, reader: EventReader) -> None:
        self._reader = reader

    def events_page(self, project: ProjectId, stream: str, from_seq: int, limit: int) -> EventsPage:
        records, next_seq = self._reader.page_events(
            project, check_stream_name(stream), from_seq, limit, MAX_RESPONSE_PAYLOAD_BYTES
        )
        return EventsPage(
            events=served_events(records),
            nextFromSeq=next_seq,
        )

    def heads_page(self, project: ProjectId, cursor: str | None, limit: int) -> StreamsPage:
        after = decode_cursor(cursor) if cursor else None
        heads, next_after = self._reader.list_heads(project, after, limit)
        return StreamsPage(
            streams=[StreamHeadOut(stream=name, seq=head.seq, hash=head.hash) for name, head in heads],
            nextCursor=encode_cursor(next_after) if next_after else None,
        )


def served_events(records: Sequence[EventRecord]) -> list[StoredEventOut]:
    return [StoredEventOut.model_validate(record.as_served()) for record in records]
