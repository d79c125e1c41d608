"""Reading the event log back: pages of a stream's events, and the project's stream heads."""

from __future__ import annotations

import base64
import binascii
import re

from kaibo_core.core.errors import UnprocessableError
from kaibo_core.core.limits import MAX_RESPONSE_PAYLOAD_BYTES, STREAM_NAME_PATTERN
from kaibo_core.core.models.events import EventPage, HeadPage
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.ports import EventPages

_STREAM = re.compile(STREAM_NAME_PATTERN)


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
    def __init__(self, reader: EventPages) -> None:
        self._reader = reader

    def events_page(self, project: ProjectId, stream: str, from_seq: int, limit: int) -> EventPage:
        records, next_seq = self._reader.page_events(
            project, check_stream_name(stream), from_seq, limit, MAX_RESPONSE_PAYLOAD_BYTES
        )
        return EventPage(records, next_seq)

    def heads_page(self, project: ProjectId, cursor: str | None, limit: int) -> HeadPage:
        after = decode_cursor(cursor) if cursor else None
        heads, next_after = self._reader.list_heads(project, after, limit)
        return HeadPage(heads, encode_cursor(next_after) if next_after else None)
