"""The I/O-free half of the transport, shared by ``KaiboClient`` and ``AsyncKaiboClient``:
building a request, deciding whether it is idempotent, and turning an answer (or an httpx
failure) into the result or a ``KaiboError``."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from kaibo.errors import KaiboAPIError, KaiboConnectionError, KaiboTimeoutError

USER_AGENT = "kaibo-python/0.1"
DEFAULT_TIMEOUT_SECONDS = 30.0
JSON_MEDIA_TYPE = "application/json"
EVENT_STREAM_MEDIA_TYPE = "text/event-stream"
#: Headers that name a request for support, best first.
REQUEST_ID_HEADERS = ("x-amzn-requestid", "x-request-id")
#: POST routes that change nothing, or whose every effect is keyed so that sending them again
#: does nothing new (remember: each event's idempotency key).
IDEMPOTENT_POSTS = frozenset({"/v1/recall", "/v1/explain", "/v1/remember"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

Query = Mapping[str, str | int]


def checked_endpoint(endpoint: str) -> str:
    """The base URL without a trailing slash; ValueError unless it is a plain http(s) URL."""
    parsed = urllib.parse.urlsplit(endpoint)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"endpoint must be an http(s) URL such as https://host/prod, got {endpoint!r}")
    if parsed.query or parsed.fragment:
        raise ValueError("endpoint must not carry a query or fragment")
    return endpoint.rstrip("/")


def segment(value: str) -> str:
    """One path segment, quoted so that ``/`` or ``..`` in an id cannot change the route."""
    return urllib.parse.quote(value, safe="")


def is_idempotent(method: str, path: str, body: Any) -> bool:
    """Whether sending this request twice has the effect of sending it once.

    GET, recall, explain and remember are. ``forget`` is as a dry run, and as a real forget with
    an ``idempotencyKey`` (sent again, it answers the first call's receipt and ``reasonSalt``,
    ``replayed: true``); without a key, a real forget that did its work before the answer was
    lost would, sent again, answer an empty set, ``409 preview_changed`` or ``404`` instead of
    the receipt. Admin calls are not (a project or key would be created twice; a revoked key
    answers 404).
    """
    if method.upper() in SAFE_METHODS:
        return True
    if method.upper() != "POST":
        return False
    if path == "/v1/forget":
        return isinstance(body, Mapping) and (
            body.get("dryRun") is True or isinstance(body.get("idempotencyKey"), str)
        )
    return path in IDEMPOTENT_POSTS


@dataclass(frozen=True)
class RequestSpec:
    """One request, ready to send as many times as the retry policy allows."""

    method: str
    path: str
    url: str
    headers: dict[str, str]
    content: bytes | None
    idempotent: bool

    @property
    def what(self) -> str:
        return f"{self.method} {self.path}"


@dataclass(frozen=True)
class Target:
    """Where requests go and the key they carry (never shown by repr)."""

    endpoint: str
    api_key: str | None = field(default=None, repr=False)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Query | None = None,
        accept: str = JSON_MEDIA_TYPE,
    ) -> RequestSpec:
        url = self.endpoint + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {"User-Agent": USER_AGENT, "Accept": accept}
        content = None
        if body is not None:
            content = json.dumps(body, allow_nan=False).encode("ascii")
            headers["Content-Type"] = JSON_MEDIA_TYPE
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return RequestSpec(method, path, url, headers, content, is_idempotent(method, path, body))


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds (delta-seconds or an HTTP date; never negative), else None."""
    if value is None or not value.strip():
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def request_id_of(headers: Mapping[str, str]) -> str | None:
    lowered = {name.lower(): value for name, value in headers.items()}
    return next((lowered[name] for name in REQUEST_ID_HEADERS if name in lowered), None)


def error_from_body(
    status: int, body: bytes, *, retry_after: float | None = None, request_id: str | None = None
) -> KaiboAPIError:
    """The API's ``{"error": {"code", "message", "details"}}`` as an exception (else ``http_<status>``)."""
    try:
        parsed = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        parsed = None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        details = error["details"] if isinstance(error.get("details"), dict) else {}
        named = details.get("requestId") if isinstance(details.get("requestId"), str) else None
        return KaiboAPIError(
            status,
            error["code"],
            str(error.get("message", "")),
            details,
            retry_after=retry_after,
            request_id=named or request_id,
        )
    text = body.decode("utf-8", errors="replace").strip()
    message = text[:300] if text else f"HTTP {status} without an error body"
    return KaiboAPIError(status, f"http_{status}", message, retry_after=retry_after, request_id=request_id)


def error_for_answer(
    spec: RequestSpec, status: int, headers: Mapping[str, str], body: bytes
) -> KaiboAPIError:
    """The exception for an answer that is not 2xx. A redirect is never followed: the client
    would send the key to wherever it points."""
    request_id = request_id_of(headers)
    if 300 <= status < 400:
        location = {name.lower(): value for name, value in headers.items()}.get("location", "elsewhere")
        return KaiboAPIError(
            status,
            "redirect_refused",
            f"{spec.what} redirects to {location}; not followed (it would resend the key). "
            "Use the final URL as the endpoint.",
            request_id=request_id,
        )
    retry_after = retry_after_seconds({k.lower(): v for k, v in headers.items()}.get("retry-after"))
    return error_from_body(status, body, retry_after=retry_after, request_id=request_id)


def is_success(status: int) -> bool:
    return 200 <= status < 300


def invalid_response(what: str, problem: str, status: int = 200) -> KaiboAPIError:
    return KaiboAPIError(status, "invalid_response", f"{what}: {problem}")


def json_answer(spec: RequestSpec, status: int, content: bytes) -> Any:
    """The parsed JSON body of a 2xx answer (None when empty)."""
    if not content.strip():
        return None
    try:
        return json.loads(content.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise invalid_response(spec.what, "the answer is not JSON", status) from exc


def media_type(headers: Mapping[str, str]) -> str:
    value = {name.lower(): value for name, value in headers.items()}.get("content-type", "")
    return value.split(";")[0].strip().lower()


@contextmanager
def transport_errors(endpoint: str, what: str, timeout: float) -> Iterator[None]:
    """httpx's failures as KaiboConnectionError (retryable for idempotent calls) or
    KaiboTimeoutError (final). A connect timeout sent nothing, so it counts as a connection error."""
    try:
        yield
    except httpx.ConnectTimeout as exc:
        raise KaiboConnectionError(f"{what}: no connection to {endpoint} within {timeout} s") from exc
    except httpx.TimeoutException as exc:
        raise KaiboTimeoutError(f"{what}: no answer from {endpoint} within {timeout} s") from exc
    except httpx.TransportError as exc:
        raise KaiboConnectionError(f"{what}: cannot reach {endpoint}: {exc or type(exc).__name__}") from exc
