"""Every API call as data (method, path, body, query and how to read the answer), page walkers
and the recall event-stream reader: the parts of the SDK that do no I/O, so that
``KaiboClient`` and ``AsyncKaiboClient`` differ only in how they send and wait."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, Required, TypedDict, TypeVar, Unpack

from kaibo._http import EVENT_STREAM_MEDIA_TYPE, Query, error_from_body, invalid_response, media_type, segment
from kaibo.errors import KaiboAPIError
from kaibo.results import RecallPack
from kaibo.sse import SseParser

DEFAULT_RECALL_BUDGET = 300
DEFAULT_EVENTS_PAGE = 500
RECALL_PATH = "/v1/recall"
FINAL_EVENT = "final"

_T = TypeVar("_T")
_T_co = TypeVar("_T_co", covariant=True)


class RecallOptions(TypedDict, total=False):
    """``recall``'s optional fields, in Python's spelling (docs/api.md#recall)."""

    as_of: str | None
    streams: list[str] | None
    types: list[str] | None
    include_superseded: bool


class ForgetRequest(TypedDict, total=False):
    """``forget``'s fields: exactly one of ``memory_id``, ``query``, ``stream``, ``subject``, and a
    ``reason``."""

    memory_id: str | Mapping[str, Any] | None
    query: str | None
    stream: str | None
    subject: str | None
    reason: Required[str]
    dry_run: bool
    preview_token: str | None
    max_memories: int | None
    idempotency_key: str | None


@dataclass(frozen=True)
class Call(Generic[_T_co]):
    """One API call and how its JSON answer becomes the method's result."""

    method: str
    path: str
    read: Callable[[str, Any], _T_co]
    body: Any = None
    query: Query | None = None

    @property
    def what(self) -> str:
        return f"{self.method} {self.path}"

    def result(self, answer: Any) -> _T_co:
        return self.read(self.what, answer)


def an_object(what: str, answer: Any) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise invalid_response(what, "the answer is not a JSON object")
    return answer


def a_pack(what: str, answer: Any) -> RecallPack:
    return RecallPack(an_object(what, answer))


def nothing(what: str, answer: Any) -> None:  # noqa: ARG001 - the shape every reader has
    return None


def memory_id_of(memory: str | Mapping[str, Any] | None) -> str:
    """A memory id, from an id or from anything carrying one (a recalled item, a memory)."""
    if isinstance(memory, str) and memory:
        return memory
    if isinstance(memory, Mapping):
        for name in ("memoryId", "id"):
            if isinstance(memory.get(name), str) and memory[name]:
                return str(memory[name])
    hint = " (pack.top is None when recall abstained: check pack.abstained first)" if memory is None else ""
    raise TypeError(f"needs a memory id or a recalled item, got {memory!r}{hint}")


# -- the calls -------------------------------------------------------------------------------------


def remember(stream: str, events: Sequence[Mapping[str, Any]], wait: bool = False) -> Call[dict[str, Any]]:
    body = {"stream": stream, "events": [dict(event) for event in events], "wait": wait}
    return Call("POST", "/v1/remember", an_object, body)


def check_keywords(
    what: str, given: Mapping[str, Any], allowed: type[Any], required: Sequence[str] = ()
) -> None:
    """TypeError for a keyword the TypedDict ``allowed`` does not name, or a ``required`` one
    missing: ``**options`` takes any name at run time, and a typo must not be dropped silently.
    (``required`` is explicit: with postponed annotations a TypedDict cannot see ``Required``.)"""
    unknown = sorted(set(given) - set(allowed.__annotations__))
    missing = sorted(set(required) - set(given))
    if unknown or missing:
        problems = [f"unexpected {', '.join(unknown)}" if unknown else "", f"missing {', '.join(missing)}"]
        raise TypeError(f"{what}() got keywords it cannot take: {'; '.join(p for p in problems if p)}")


def recall_body(question: str, budget: int, **options: Unpack[RecallOptions]) -> dict[str, Any]:
    check_keywords("recall", options, RecallOptions)
    body: dict[str, Any] = {"question": question, "budget": budget}
    wire = {"as_of": "asOf", "streams": "streams", "types": "types"}
    for name, field in wire.items():
        value = options.get(name)
        if value is not None:
            body[field] = list(value) if isinstance(value, list) else value
    if options.get("include_superseded"):
        body["includeSuperseded"] = True
    return body


def recall(question: str, budget: int, **options: Unpack[RecallOptions]) -> Call[RecallPack]:
    return Call("POST", RECALL_PATH, a_pack, recall_body(question, budget, **options))


def memory(memory: str | Mapping[str, Any]) -> Call[dict[str, Any]]:
    return Call("GET", f"/v1/memories/{segment(memory_id_of(memory))}", an_object)


def explain(memory: str | Mapping[str, Any]) -> Call[dict[str, Any]]:
    return Call("POST", "/v1/explain", an_object, {"memoryId": memory_id_of(memory)})


def job(job_id: str) -> Call[dict[str, Any]]:
    return Call("GET", f"/v1/jobs/{segment(job_id)}", an_object)


def forget(**request: Unpack[ForgetRequest]) -> Call[dict[str, Any]]:
    """Raises ValueError (before any request) unless exactly one selector is given."""
    check_keywords("forget", request, ForgetRequest, required=("reason",))
    memory_id = request.get("memory_id")
    selectors = {
        "memoryId": None if memory_id is None else memory_id_of(memory_id),
        "query": request.get("query"),
        "stream": request.get("stream"),
        "subject": request.get("subject"),
    }
    chosen = {name: value for name, value in selectors.items() if value is not None}
    if len(chosen) != 1:
        raise ValueError("give exactly one of memory_id, query, stream, subject")
    body: dict[str, Any] = {**chosen, "reason": request["reason"]}
    if request.get("dry_run"):
        body["dryRun"] = True
    optional = {
        "previewToken": request.get("preview_token"),
        "maxMemories": request.get("max_memories"),
        "idempotencyKey": request.get("idempotency_key"),
    }
    body.update({name: value for name, value in optional.items() if value is not None})
    return Call("POST", "/v1/forget", an_object, body)


def receipt(receipt_id: str) -> Call[dict[str, Any]]:
    return Call("GET", f"/v1/receipts/{segment(receipt_id)}", an_object)


def listed(field: str) -> Callable[[str, Any], list[dict[str, Any]]]:
    """A reader of an answer that wraps one list of objects: ``{"webhooks": [...]}``."""

    def read(what: str, answer: Any) -> list[dict[str, Any]]:
        items = an_object(what, answer).get(field)
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise invalid_response(what, f"'{field}' is not a list of objects")
        return items

    return read


def _webhook_path(webhook_id: str) -> str:
    if not isinstance(webhook_id, str) or not webhook_id:
        raise TypeError(f"needs a webhook id (wh_...), got {webhook_id!r}")
    return f"/v1/webhooks/{segment(webhook_id)}"


def create_webhook(url: str, events: Sequence[str], description: str | None = None) -> Call[dict[str, Any]]:
    if isinstance(events, str):
        raise TypeError("events is a list of event names, e.g. ['memory.forgotten']")
    body: dict[str, Any] = {"url": url, "events": list(events)}
    if description is not None:
        body["description"] = description
    return Call("POST", "/v1/webhooks", an_object, body)


def webhooks() -> Call[list[dict[str, Any]]]:
    return Call("GET", "/v1/webhooks", listed("webhooks"))


def webhook(webhook_id: str) -> Call[dict[str, Any]]:
    return Call("GET", _webhook_path(webhook_id), an_object)


def delete_webhook(webhook_id: str) -> Call[None]:
    return Call("DELETE", _webhook_path(webhook_id), nothing)


def rotate_webhook_secret(webhook_id: str) -> Call[dict[str, Any]]:
    return Call("POST", f"{_webhook_path(webhook_id)}/rotate-secret", an_object)


def test_webhook(webhook_id: str) -> Call[dict[str, Any]]:
    return Call("POST", f"{_webhook_path(webhook_id)}/test", an_object)


def webhook_deliveries(webhook_id: str, limit: int | None = None) -> Call[list[dict[str, Any]]]:
    query = None if limit is None else {"limit": limit}
    return Call("GET", f"{_webhook_path(webhook_id)}/deliveries", listed("deliveries"), query=query)


def create_project(name: str, time_zone: str | None = None) -> Call[dict[str, Any]]:
    body: dict[str, Any] = {"name": name}
    if time_zone is not None:
        body["timeZone"] = time_zone
    return Call("POST", "/v1/admin/projects", an_object, body)


def create_key(project_id: str, scopes: Sequence[str] | None) -> Call[dict[str, Any]]:
    body = {} if scopes is None else {"scopes": list(scopes)}  # none: the route's default, read and write
    return Call("POST", f"/v1/admin/projects/{segment(project_id)}/keys", an_object, body)


def revoke_key(key_id: str) -> Call[None]:
    return Call("DELETE", f"/v1/admin/keys/{segment(key_id)}", nothing)


# -- pages -----------------------------------------------------------------------------------------


class Pages(Protocol):
    """A paginated listing: the next page's call (None when done), and the items of a page."""

    def next_call(self) -> Call[dict[str, Any]] | None: ...

    def take(self, page: dict[str, Any]) -> list[dict[str, Any]]: ...


class SeqPages:
    """``field`` of every page of ``path`` from ``from_seq`` on, following ``nextFromSeq``
    (which must advance)."""

    def __init__(self, path: str, field: str, from_seq: int, query: Query | None = None) -> None:
        self._path, self._field, self._query = path, field, dict(query or {})
        self._from_seq: int | None = from_seq

    def next_call(self) -> Call[dict[str, Any]] | None:
        if self._from_seq is None:
            return None
        return Call("GET", self._path, an_object, query={**self._query, "fromSeq": self._from_seq})

    def take(self, page: dict[str, Any]) -> list[dict[str, Any]]:
        what = f"GET {self._path}"
        items = page.get(self._field)
        if not isinstance(items, list):
            raise invalid_response(what, f"'{self._field}' is not a list")
        next_from = page.get("nextFromSeq")
        if next_from is not None and (type(next_from) is not int or next_from <= (self._from_seq or 0)):
            raise invalid_response(what, "nextFromSeq does not advance")
        self._from_seq = next_from
        return items


class CursorPages:
    """Every stream head of ``GET /v1/streams``, following ``nextCursor`` (never twice the same)."""

    def __init__(self, limit: int | None = None) -> None:
        self._cursor: str | None = None
        self._seen: set[str] = set()
        self._done = False
        self._limit = limit

    def next_call(self) -> Call[dict[str, Any]] | None:
        if self._done:
            return None
        query: dict[str, str | int] = {"cursor": self._cursor} if self._cursor else {}
        if self._limit is not None:
            query["limit"] = self._limit
        return Call("GET", "/v1/streams", an_object, query=query or None)

    def take(self, page: dict[str, Any]) -> list[dict[str, Any]]:
        heads = page.get("streams")
        if not isinstance(heads, list) or not all(isinstance(head, dict) for head in heads):
            raise invalid_response("GET /v1/streams", "'streams' is not a list of objects")
        cursor = page.get("nextCursor")
        if cursor and (not isinstance(cursor, str) or cursor in self._seen):
            raise invalid_response("GET /v1/streams", "nextCursor does not advance")
        self._done = not cursor
        self._cursor = cursor or None
        if cursor:
            self._seen.add(cursor)
        return heads


def events_pages(stream: str, from_seq: int = 1, limit: int = DEFAULT_EVENTS_PAGE) -> SeqPages:
    return SeqPages(f"/v1/streams/{segment(stream)}/events", "events", from_seq, {"limit": limit})


def ledger_pages(from_seq: int = 1) -> SeqPages:
    return SeqPages("/v1/ledger", "entries", from_seq)


# -- the recall event stream -----------------------------------------------------------------------


StreamEvent = tuple[str, dict[str, Any]]


class RecallEvents:
    """Reads ``POST /v1/recall`` as ``text/event-stream``: feed it the bytes as they arrive and
    get ``(event, data)`` pairs; ``final``'s data is a RecallPack and ends the stream.

    An ``error`` event raises KaiboAPIError with the API's code; a stream that ends before
    ``final`` raises ``stream_incomplete``; an event whose data is not a JSON object raises
    ``invalid_response``.
    """

    what = f"POST {RECALL_PATH}"

    def __init__(self, status: int, headers: Mapping[str, str]) -> None:
        if media_type(headers) != EVENT_STREAM_MEDIA_TYPE:
            raise invalid_response(self.what, f"did not answer {EVENT_STREAM_MEDIA_TYPE}", status)
        self._status = status
        self._parser = SseParser()
        self.done = False

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        return self._events(self._parser.feed(chunk))

    def end(self) -> list[StreamEvent]:
        """The stream's end: its last events; raises ``stream_incomplete`` if none was ``final``."""
        events = self._events(self._parser.close())
        if not self.done:
            problem = f"{self.what}: the event stream ended before {FINAL_EVENT!r}"
            raise KaiboAPIError(self._status, "stream_incomplete", problem)
        return events

    def _events(self, events: Sequence[Any]) -> list[StreamEvent]:
        pairs: list[StreamEvent] = []
        for event in events:
            if self.done:
                break
            if event.event == "error":
                raise error_from_body(self._status, event.data.encode("utf-8"))
            try:
                data = json.loads(event.data)
            except ValueError:
                data = None
            if not isinstance(data, dict):
                raise invalid_response(self.what, f"event {event.event!r} is not a JSON object", self._status)
            self.done = event.event == FINAL_EVENT
            pairs.append((event.event, RecallPack(data) if self.done else data))
        return pairs
