"""An incremental parser for server-sent events (``text/event-stream``), standard library only.

Follows the WHATWG HTML rules for interpreting an event stream, less what only a
browser's EventSource needs (reconnection)::

    parser = SseParser()
    for chunk in chunks:                   # bytes, split anywhere
        for event in parser.feed(chunk):
            print(event.event, event.data)

- lines end with CRLF, LF or CR (a CRLF split between two chunks is one line end);
  a UTF-8 byte order mark at the very start is skipped; invalid UTF-8 becomes U+FFFD;
- ``field: value`` (one space after the colon is dropped; a line without a colon
  is a field with an empty value); ``event`` sets the type, ``data`` lines are
  joined by ``\\n``, ``id`` sets the last event id (unless it holds a NUL),
  ``retry`` with only digits sets the reconnection time; other fields are ignored;
- lines starting with ``:`` are comments;
- a blank line dispatches the event (type ``message`` unless named); with no
  ``data`` at all nothing is dispatched (and the type is reset);
- at the end of the stream an event not closed by a blank line is discarded.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

DEFAULT_EVENT_TYPE = "message"


@dataclass(frozen=True)
class SseEvent:
    event: str
    data: str
    id: str = ""
    retry: int | None = None


class SseParser:
    """Feed bytes as they arrive; get back the events completed so far."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""  # text after the last line end
        self._at_start = True
        self._skip_lf = False  # the last chunk ended with CR: a leading LF is its CRLF's end
        self._event_type = ""
        self._data: list[str] = []
        self._has_data = False
        self.last_event_id = ""
        self.retry: int | None = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        text = self._decoder.decode(chunk)
        if self._at_start and text:
            text = text.removeprefix("\ufeff")
            self._at_start = False
        if self._skip_lf and text:
            text = text.removeprefix("\n")
            self._skip_lf = False
        return self._lines(self._pending + text)

    def close(self) -> list[SseEvent]:
        """The end of the stream: the rest of the bytes; an unterminated event is discarded."""
        text = self._decoder.decode(b"", final=True)
        events = self._lines(self._pending + text)
        self._pending = ""
        self._event_type, self._data, self._has_data = "", [], False
        return events

    def _lines(self, text: str) -> list[SseEvent]:
        events: list[SseEvent] = []
        start = 0
        length = len(text)
        while True:
            cr = text.find("\r", start)
            lf = text.find("\n", start)
            if cr < 0 and lf < 0:
                break
            end = lf if cr < 0 else cr if lf < 0 else min(cr, lf)
            line = text[start:end]
            start = end + 1
            if text[end] == "\r":
                if start < length and text[start] == "\n":
                    start += 1
                elif start == length:
                    self._skip_lf = True  # the LF of this CRLF may open the next chunk
            event = self._line(line)
            if event is not None:
                events.append(event)
        self._pending = text[start:]
        return events

    def _line(self, line: str) -> SseEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event_type = value
        elif name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "id":
            if "\0" not in value:
                self.last_event_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry = int(value)
        return None

    def _dispatch(self) -> SseEvent | None:
        event_type, data, has_data = self._event_type, self._data, self._has_data
        self._event_type, self._data, self._has_data = "", [], False
        if not has_data:
            return None
        return SseEvent(event_type or DEFAULT_EVENT_TYPE, "\n".join(data), self.last_event_id, self.retry)
