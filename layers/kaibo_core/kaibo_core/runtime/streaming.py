"""Server-sent events from a Lambda proxy handler: buffered always, streamed where the host can.

A handler answering ``Accept: text/event-stream`` builds its events with ``SseWriter``
and returns the complete SSE text as the body of its proxy response. That body is
all API Gateway (REST) gets on AWS: the Python runtime returns the response only
when the function returns, so the client receives every event at once.

The local stack (``kaibo_local``) can do better. When the request asked for an
event stream, its Lambda context carries a ``ResponseStream`` under
``STREAM_CONTEXT_ATTRIBUTE`` (``response_stream(context)`` finds it; on AWS there is
none). ``SseWriter`` then starts the HTTP response at the first event and sends
each event to the client as it is emitted; the proxy response returned at the end
is not sent again. The handler code is the same in both places::

    writer = SseWriter(response_stream(context))
    writer.emit("candidates", {...})   # locally: on the wire now
    writer.emit("final", {...})
    return {"statusCode": 200, "headers": {...SSE_HEADERS}, "body": writer.body()}

Standard library only (``json``): importable by the handlers, the local stack and tests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final, Protocol

#: The Lambda context attribute under which the local stack offers a ``ResponseStream``.
STREAM_CONTEXT_ATTRIBUTE: Final = "kaibo_response_stream"
EVENT_STREAM_MEDIA_TYPE: Final = "text/event-stream"
#: The headers of an event-stream response (streamed or buffered).
SSE_HEADERS: Final[Mapping[str, str]] = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache",
}


class ResponseStream(Protocol):
    """An HTTP response sent while the handler runs (offered by the local stack only)."""

    def start(self, status: int, headers: Mapping[str, str]) -> None:
        """Send the status line and headers; once, before any ``write``."""

    def write(self, data: bytes) -> None:
        """Send ``data`` to the client now (not when the handler returns)."""


def response_stream(context: object) -> ResponseStream | None:
    """The context's response stream, or None (always None on AWS: the LambdaContext has none)."""
    stream: ResponseStream | None = getattr(context, STREAM_CONTEXT_ATTRIBUTE, None)
    return stream


def sse_event(name: str, data: object) -> bytes:
    """One SSE event: ``event: <name>``, one ``data:`` line of compact JSON, a blank line (UTF-8).

    Compact JSON never holds a raw line break, so one ``data:`` line always suffices.
    """
    if not name or any(c in name for c in "\r\n:"):
        raise ValueError(f"SSE event name {name!r}: must be non-empty, without ':' or line breaks")
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return f"event: {name}\ndata: {payload}\n\n".encode()


def _quality(parameters: list[str]) -> float:
    for parameter in parameters:
        key, _, value = parameter.partition("=")
        if key.strip().lower() == "q":
            try:
                return float(value.strip().strip('"'))
            except ValueError:
                return 0.0
    return 1.0


def wants_event_stream(accept_header: str | None) -> bool:
    """True when ``Accept`` lists ``text/event-stream`` itself with a q above 0 (case-insensitive).

    Wildcards (``*/*``, ``text/*``) do not count: a client that did not name the event stream
    gets the ordinary JSON answer.
    """
    if not accept_header:
        return False
    for media_range in accept_header.split(","):
        media_type, *parameters = media_range.split(";")
        if media_type.strip().lower() == EVENT_STREAM_MEDIA_TYPE and _quality(parameters) > 0:
            return True
    return False


class SseWriter:
    """Collects SSE events into the buffered body and, given a stream, sends each one at once.

    The stream is started (200, ``SSE_HEADERS``) at the first event. ``body()`` is the whole
    event stream as text: the proxy response body, identical to what was streamed.
    """

    def __init__(self, stream: ResponseStream | None = None) -> None:
        self._stream = stream
        self._started = False
        self._events: list[bytes] = []

    @property
    def streaming(self) -> bool:
        """True once events are going to the client while the handler runs."""
        return self._started

    def emit(self, name: str, data: object) -> None:
        event = sse_event(name, data)
        self._events.append(event)
        if self._stream is None:
            return
        if not self._started:
            self._stream.start(200, SSE_HEADERS)
            self._started = True
        self._stream.write(event)

    def body(self) -> str:
        return b"".join(self._events).decode()
