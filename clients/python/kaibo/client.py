"""A small HTTP client for the Kaibo API: stdlib ``urllib`` and ``json`` only.

Deliberately light (no boto3, botocore, pydantic or Powertools) so that
``pip install kaibo`` stays small and ``kaibo verify`` can be audited.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from kaibo.sse import SseParser

USER_AGENT = "kaibo-python/0.1"
DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_EVENTS_PAGE = 500
DEFAULT_MAX_RETRIES = 3
MAX_RETRY_AFTER_SECONDS = 30.0
DEFAULT_RECALL_BUDGET = 300
JSON_MEDIA_TYPE = "application/json"
EVENT_STREAM_MEDIA_TYPE = "text/event-stream"
#: The most bytes one read of an event stream waits for (it returns whatever has arrived).
STREAM_READ_BYTES = 64 * 1024

_T = TypeVar("_T")


def _seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class KaiboError(Exception):
    """Anything that kept a call from getting an answer from the API."""


class KaiboAPIError(KaiboError):
    """The API answered with an error (or with something that is not the documented shape).

    ``code`` is the stable snake_case code of ``{"error": {"code", "message", "details"}}``;
    when the body is not that shape, it is ``http_<status>``.
    """

    def __init__(
        self, status: int, code: str, message: str, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(f"{code}: {message} (HTTP {status})")
        self.status = status
        self.code = code
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        self.retry_after: float | None = None

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across processes
        return (type(self), (self.status, self.code, self.message, self.details))


class KaiboConnectionError(KaiboError):
    """The API could not be reached (DNS, refused connection, TLS, timeout)."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Never follow a redirect: urllib would resend the Authorization header to the new location."""

    def redirect_request(  # noqa: PLR0917 - urllib's signature
        self,
        req: urllib.request.Request,  # noqa: ARG002
        fp: Any,  # noqa: ARG002
        code: int,  # noqa: ARG002
        msg: str,  # noqa: ARG002
        headers: Any,  # noqa: ARG002
        newurl: str,  # noqa: ARG002
    ) -> None:
        return None


def _error_from_body(status: int, body: bytes) -> KaiboAPIError:
    try:
        parsed = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        parsed = None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        details = error.get("details")
        return KaiboAPIError(
            status,
            error["code"],
            str(error.get("message", "")),
            details if isinstance(details, dict) else None,
        )
    text = body.decode("utf-8", errors="replace").strip()
    message = text[:300] if text else f"HTTP {status} without an error body"
    return KaiboAPIError(status, f"http_{status}", message)


def _recall_body(
    question: str,
    budget: int,
    *,
    as_of: str | None,
    streams: list[str] | None,
    types: list[str] | None,
    include_superseded: bool,
) -> dict[str, Any]:
    body: dict[str, Any] = {"question": question, "budget": budget}
    if as_of is not None:
        body["asOf"] = as_of
    if streams is not None:
        body["streams"] = list(streams)
    if types is not None:
        body["types"] = list(types)
    if include_superseded:
        body["includeSuperseded"] = True
    return body


class KaiboClient:
    """The Kaibo HTTP API.

    ``endpoint`` is the base URL (``http://127.0.0.1:3000``,
    ``https://<id>.execute-api.<region>.amazonaws.com/prod``); paths are appended to it.
    ``api_key`` is a project key, or the admin key for the admin calls.
    """

    def __init__(
        self,
        endpoint: str,
        api_key: str | None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        parsed = urllib.parse.urlsplit(endpoint)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"endpoint must be an http(s) URL such as https://host/prod, got {endpoint!r}")
        if parsed.query or parsed.fragment:
            raise ValueError("endpoint must not carry a query or fragment")
        self.endpoint = endpoint.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self._api_key = api_key
        self._opener = urllib.request.build_opener(_NoRedirects())

    def __repr__(self) -> str:  # never show the key
        return f"KaiboClient(endpoint={self.endpoint!r})"

    # -- transport -----------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: Mapping[str, str | int] | None = None,
    ) -> Any:
        """One call: the parsed JSON body (None when empty); raises KaiboAPIError on 4xx/5xx.

        A 429 (``stream_busy``, throttling) is retried up to ``max_retries`` times after its
        ``Retry-After`` delay. That is safe for every call: remember is idempotent by key.
        """
        return self._with_retries(lambda: self._request_once(method, path, body, query))

    def _with_retries(self, call: Callable[[], _T]) -> _T:
        for attempt in range(self.max_retries + 1):
            try:
                return call()
            except KaiboAPIError as exc:
                if exc.status != 429 or attempt >= self.max_retries:
                    raise
                time.sleep(min(exc.retry_after or 1.0, MAX_RETRY_AFTER_SECONDS))
        raise AssertionError("unreachable")

    def _request_once(
        self,
        method: str,
        path: str,
        body: Any,
        query: Mapping[str, str | int] | None,
    ) -> Any:
        try:
            with self._open(method, path, body, query, JSON_MEDIA_TYPE) as response:
                status = int(response.status)
                raw = response.read()
        except (urllib.error.URLError, OSError) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            raise KaiboConnectionError(f"cannot reach {self.endpoint}: {reason}") from exc
        if not raw.strip():
            return None
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise KaiboAPIError(status, "invalid_response", f"{method} {path} did not answer JSON") from exc

    def _open(
        self,
        method: str,
        path: str,
        body: Any,
        query: Mapping[str, str | int] | None,
        accept: str,
    ) -> Any:
        """Send one request; the open response (2xx; the caller closes it), else the error raised."""
        url = self.endpoint + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {"User-Agent": USER_AGENT, "Accept": accept}
        data = None
        if body is not None:
            data = json.dumps(body, allow_nan=False).encode("ascii")
            headers["Content-Type"] = JSON_MEDIA_TYPE
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        req = urllib.request.Request(url, data=data, headers=headers, method=method)  # noqa: S310 - scheme checked in __init__
        try:
            return self._opener.open(req, timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            with exc:
                if 300 <= exc.code < 400:
                    location = exc.headers.get("Location", "elsewhere")
                    raise KaiboAPIError(
                        exc.code,
                        "redirect_refused",
                        f"{method} {path} redirects to {location}; not followed (it would resend the key). "
                        "Use the final URL as the endpoint.",
                    ) from None
                error = _error_from_body(exc.code, exc.read())
                error.retry_after = _seconds(exc.headers.get("Retry-After"))
                raise error from None
        except (urllib.error.URLError, OSError) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            raise KaiboConnectionError(f"cannot reach {self.endpoint}: {reason}") from exc

    def _object(
        self, method: str, path: str, body: Any = None, query: Mapping[str, str | int] | None = None
    ) -> dict[str, Any]:
        answer = self.request(method, path, body, query)
        if not isinstance(answer, dict):
            raise KaiboAPIError(200, "invalid_response", f"{method} {path} did not answer a JSON object")
        return answer

    # -- memory ----------------------------------------------------------------------------------

    def remember(
        self, stream: str, events: Sequence[Mapping[str, Any]], wait: bool = False
    ) -> dict[str, Any]:
        """POST /v1/remember: append events (each with its own idempotency key) to a stream."""
        body = {"stream": stream, "events": [dict(event) for event in events], "wait": wait}
        return self._object("POST", "/v1/remember", body)

    def recall(
        self,
        question: str,
        budget: int = DEFAULT_RECALL_BUDGET,
        *,
        as_of: str | None = None,
        streams: list[str] | None = None,
        types: list[str] | None = None,
        include_superseded: bool = False,
    ) -> dict[str, Any]:
        """POST /v1/recall: the memories that answer ``question``, packed into ``budget`` tokens."""
        body = _recall_body(
            question,
            budget,
            as_of=as_of,
            streams=streams,
            types=types,
            include_superseded=include_superseded,
        )
        return self._object("POST", "/v1/recall", body)

    def recall_stream(
        self,
        question: str,
        budget: int = DEFAULT_RECALL_BUDGET,
        *,
        as_of: str | None = None,
        streams: list[str] | None = None,
        types: list[str] | None = None,
        include_superseded: bool = False,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """POST /v1/recall as an event stream: ``(event, data)`` pairs as they arrive.

        The events are ``candidates``, ``packed`` and ``final`` (whose data is what ``recall``
        returns). Each is yielded as soon as its bytes arrive: from the local stack,
        ``candidates`` comes before packing is done; API Gateway on AWS delivers the whole
        stream at once when the function returns (docs/streaming.md). The request is sent at
        the first ``next()``; a 429 before the stream starts is retried like every call. An
        ``error`` event raises KaiboAPIError, and so does a stream that ends before ``final``
        (code ``stream_incomplete``).
        """
        body = _recall_body(
            question,
            budget,
            as_of=as_of,
            streams=streams,
            types=types,
            include_superseded=include_superseded,
        )
        yield from self._event_stream("POST", "/v1/recall", body, final="final")

    def _event_stream(
        self, method: str, path: str, body: Any, final: str | None
    ) -> Generator[tuple[str, dict[str, Any]], None, None]:
        what = f"{method} {path}"
        response = self._with_retries(lambda: self._open(method, path, body, None, EVENT_STREAM_MEDIA_TYPE))
        with response:
            status = int(response.status)
            media_type = (response.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if media_type != EVENT_STREAM_MEDIA_TYPE:
                raise KaiboAPIError(
                    status, "invalid_response", f"{what} did not answer {EVENT_STREAM_MEDIA_TYPE}"
                )
            parser = SseParser()
            ended = False
            while not ended:
                try:
                    chunk = response.read1(STREAM_READ_BYTES)
                except (OSError, http.client.HTTPException) as exc:
                    raise KaiboConnectionError(f"{what}: the event stream broke off: {exc!r}") from exc
                ended = not chunk
                for event in parser.close() if ended else parser.feed(chunk):
                    if event.event == "error":
                        raise _error_from_body(status, event.data.encode("utf-8"))
                    try:
                        data = json.loads(event.data)
                    except ValueError:
                        data = None
                    if not isinstance(data, dict):
                        raise KaiboAPIError(
                            status, "invalid_response", f"{what}: event {event.event!r} is not a JSON object"
                        )
                    yield event.event, data
                    if event.event == final:
                        return
        if final is not None:
            raise KaiboAPIError(
                status, "stream_incomplete", f"{what}: the event stream ended before {final!r}"
            )

    def memory(self, memory_id: str) -> dict[str, Any]:
        """GET /v1/memories/{id}: one memory."""
        return self._object("GET", f"/v1/memories/{urllib.parse.quote(memory_id, safe='')}")

    def explain(self, memory: str | Mapping[str, Any]) -> dict[str, Any]:
        """POST /v1/explain: the versions that led to a memory (an id, or a recalled item), oldest first."""
        memory_id = memory if isinstance(memory, str) else str(memory.get("memoryId") or memory.get("id"))
        return self._object("POST", "/v1/explain", {"memoryId": memory_id})

    def job(self, job_id: str) -> dict[str, Any]:
        """GET /v1/jobs/{id}: a structuring job (queued, structuring, done or failed)."""
        return self._object("GET", f"/v1/jobs/{urllib.parse.quote(job_id, safe='')}")

    # -- event log (verify) --------------------------------------------------------------------

    def streams(self) -> Generator[dict[str, Any], None, None]:
        """GET /v1/streams, every page: ``{"stream", "seq", "hash"}`` per stream (its head)."""
        cursor: str | None = None
        seen: set[str] = set()
        while True:
            page = self._object("GET", "/v1/streams", query={"cursor": cursor} if cursor else None)
            streams = page.get("streams")
            if not isinstance(streams, list) or not all(isinstance(head, dict) for head in streams):
                raise KaiboAPIError(
                    200, "invalid_response", "GET /v1/streams: 'streams' is not a list of objects"
                )
            yield from streams
            cursor = page.get("nextCursor")
            if not cursor:
                return
            if not isinstance(cursor, str) or cursor in seen:
                raise KaiboAPIError(200, "invalid_response", "GET /v1/streams: nextCursor does not advance")
            seen.add(cursor)

    def events(
        self, stream: str, from_seq: int = 1, limit: int = DEFAULT_EVENTS_PAGE
    ) -> Generator[dict[str, Any], None, None]:
        """GET /v1/streams/{stream}/events from ``from_seq`` on, following ``nextFromSeq``."""
        path = f"/v1/streams/{urllib.parse.quote(stream, safe='')}/events"
        yield from self._pages(path, "events", from_seq, {"limit": limit})

    def _pages(
        self, path: str, field: str, from_seq: int, query: Mapping[str, str | int] | None = None
    ) -> Generator[dict[str, Any], None, None]:
        """The ``field`` list of every page of ``path`` from ``from_seq`` on, following
        ``nextFromSeq`` (which must advance)."""
        while True:
            page = self._object("GET", path, query={**(query or {}), "fromSeq": from_seq})
            items = page.get(field)
            if not isinstance(items, list):
                raise KaiboAPIError(200, "invalid_response", f"GET {path}: '{field}' is not a list")
            yield from items
            next_from = page.get("nextFromSeq")
            if next_from is None:
                return
            if type(next_from) is not int or next_from <= from_seq:
                raise KaiboAPIError(200, "invalid_response", f"GET {path}: nextFromSeq does not advance")
            from_seq = next_from

    # -- forget, the deletion ledger, receipts --------------------------------------------------

    def forget(
        self,
        *,
        memory_id: str | None = None,
        query: str | None = None,
        stream: str | None = None,
        reason: str,
        dry_run: bool = False,
        preview_token: str | None = None,
        max_memories: int | None = None,
    ) -> dict[str, Any]:
        """POST /v1/forget (scope ``forget``): erase a memory, what a query matches, or a stream.

        Give exactly one of ``memory_id``, ``query``, ``stream`` (ValueError otherwise, before
        any request). ``dry_run`` returns the set with each memory's content and a
        ``previewToken``, changing nothing; pass that token back as ``preview_token`` and the
        real call is refused with ``409 preview_changed`` (KaiboAPIError; ``details`` carries
        the new token) if the set changed since. The answer of a real call holds the
        ``receipt`` and the ``reasonSalt``, which is shown once. There is no undo.
        """
        selectors = {"memoryId": memory_id, "query": query, "stream": stream}
        chosen = {name: value for name, value in selectors.items() if value is not None}
        if len(chosen) != 1:
            raise ValueError("give exactly one of memory_id, query, stream")
        body: dict[str, Any] = {**chosen, "reason": reason}
        if dry_run:
            body["dryRun"] = True
        if preview_token is not None:
            body["previewToken"] = preview_token
        if max_memories is not None:
            body["maxMemories"] = max_memories
        return self._object("POST", "/v1/forget", body)

    def ledger(self, from_seq: int = 1) -> Generator[dict[str, Any], None, None]:
        """GET /v1/ledger from ``from_seq`` on, following ``nextFromSeq``: the entries, oldest first."""
        yield from self._pages("/v1/ledger", "entries", from_seq)

    def receipt(self, receipt_id: str) -> dict[str, Any]:
        """GET /v1/receipts/{id}: the ledger entry of one forget plus its ``state`` (tombstoned|purged)."""
        return self._object("GET", f"/v1/receipts/{urllib.parse.quote(receipt_id, safe='')}")

    # -- admin (admin key) ---------------------------------------------------------------------

    def create_project(self, name: str, time_zone: str | None = None) -> dict[str, Any]:
        """POST /v1/admin/projects: a new project and its first key ``{"projectId", "keyId", "apiKey"}``.

        ``time_zone`` (IANA name) is where its events without a ``timeZone`` resolve "tomorrow".
        """
        body: dict[str, Any] = {"name": name}
        if time_zone is not None:
            body["timeZone"] = time_zone
        return self._object("POST", "/v1/admin/projects", body)

    def create_key(self, project_id: str, scopes: Sequence[str]) -> dict[str, Any]:
        """POST /v1/admin/projects/{id}/keys: another key ``{"keyId", "apiKey", "scopes"}``."""
        path = f"/v1/admin/projects/{urllib.parse.quote(project_id, safe='')}/keys"
        return self._object("POST", path, {"scopes": list(scopes)})

    def revoke_key(self, key_id: str) -> None:
        """DELETE /v1/admin/keys/{keyId} (204)."""
        self.request("DELETE", f"/v1/admin/keys/{urllib.parse.quote(key_id, safe='')}")
