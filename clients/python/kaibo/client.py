"""The Kaibo HTTP API, synchronously, on ``httpx``: ``KaiboClient``.

Deliberately light (no boto3, botocore, pydantic or Powertools) so that ``pip install kaibo``
stays small and ``kaibo verify`` can be audited. ``AsyncKaiboClient`` (kaibo.async_client) has
the same methods as coroutines; both share request building, answer reading, error mapping and
the retry policy (kaibo._http, kaibo._calls, kaibo.retry). docs/python-sdk.md shows them in use.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import httpx

from kaibo import _calls
from kaibo._base import ClientSettings
from kaibo._calls import DEFAULT_EVENTS_PAGE, DEFAULT_RECALL_BUDGET, Call, Pages, RecallEvents
from kaibo._http import (
    DEFAULT_TIMEOUT_SECONDS,
    EVENT_STREAM_MEDIA_TYPE,
    USER_AGENT,
    RequestSpec,
    error_for_answer,
    is_success,
    json_answer,
    transport_errors,
)
from kaibo.errors import KaiboAPIError, KaiboConnectionError, KaiboError, KaiboTimeoutError
from kaibo.results import RecallPack
from kaibo.retry import DEFAULT_MAX_RETRIES, MAX_RETRY_AFTER_SECONDS, Attempts, RetryPolicy

__all__ = [
    "DEFAULT_EVENTS_PAGE",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_RECALL_BUDGET",
    "DEFAULT_TIMEOUT_SECONDS",
    "MAX_RETRY_AFTER_SECONDS",
    "USER_AGENT",
    "KaiboAPIError",
    "KaiboClient",
    "KaiboConnectionError",
    "KaiboError",
    "KaiboTimeoutError",
    "RetryPolicy",
]

_T = TypeVar("_T")


class KaiboClient(ClientSettings[httpx.Client, httpx.BaseTransport]):
    """The Kaibo HTTP API: ``KaiboClient(endpoint, api_key, timeout=30.0, max_retries=None, *,
    retry=None, transport=None)`` (the arguments: ``ClientSettings``).

    Use it as a context manager, or call ``close()``, to release its connection pool::

        with KaiboClient("http://127.0.0.1:3000", key) as kaibo:
            pack = kaibo.recall("When is the release target?")
    """

    def _new_pool(self, options: dict[str, Any]) -> httpx.Client:
        return httpx.Client(**options)

    def close(self) -> None:
        """Close the pooled connections (the client cannot be used after)."""
        self._http.close()

    def __enter__(self) -> KaiboClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- transport -----------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: Mapping[str, str | int] | None = None,
    ) -> Any:
        """One call: the parsed JSON body (None when empty); raises KaiboAPIError on 4xx/5xx.

        A 429 is retried after its ``Retry-After``; a 5xx, a connection failure or a transaction
        race's 429 only when the call is idempotent (kaibo.retry, kaibo._http.is_idempotent).
        """
        spec = self._target.request(method, path, body=body, query=query)
        response = self._send(spec)
        return json_answer(spec, response.status_code, response.content)

    def _call(self, call: Call[_T]) -> _T:
        return call.result(self.request(call.method, call.path, call.body, call.query))

    def _send(self, spec: RequestSpec, *, stream: bool = False) -> httpx.Response:
        """The 2xx answer (read, unless ``stream``: then the caller closes it), after retries."""
        attempts = Attempts(self.retry, idempotent=spec.idempotent)
        while True:
            try:
                return self._attempt(spec, stream=stream)
            except KaiboError as error:
                time.sleep(attempts.wait_after(error))

    def _attempt(self, spec: RequestSpec, *, stream: bool) -> httpx.Response:
        request = self._http.build_request(spec.method, spec.url, headers=spec.headers, content=spec.content)
        with transport_errors(self.endpoint, spec.what, self.timeout):
            response = self._http.send(request, stream=True)
            if stream and is_success(response.status_code):
                return response
            try:
                response.read()
            finally:
                response.close()
        if not is_success(response.status_code):
            raise error_for_answer(spec, response.status_code, response.headers, response.content)
        return response

    def _paged(self, pages: Pages) -> Generator[dict[str, Any], None, None]:
        while (call := pages.next_call()) is not None:
            yield from pages.take(self._call(call))

    # -- memory ----------------------------------------------------------------------------------

    def remember(
        self, stream: str, events: Sequence[Mapping[str, Any]], wait: bool = False
    ) -> dict[str, Any]:
        """POST /v1/remember: append events (each with its own idempotency key) to a stream."""
        return self._call(_calls.remember(stream, events, wait))

    def recall(
        self,
        question: str,
        budget: int = DEFAULT_RECALL_BUDGET,
        *,
        as_of: str | None = None,
        streams: list[str] | None = None,
        types: list[str] | None = None,
        include_superseded: bool = False,
    ) -> RecallPack:
        """POST /v1/recall: the memories that answer ``question``, packed into ``budget`` tokens.

        A RecallPack: the API's JSON (``pack["items"]``), plus ``pack.items``, ``pack.top``,
        ``pack.abstained`` and ``pack.as_context()``.
        """
        options = _calls.RecallOptions(
            as_of=as_of, streams=streams, types=types, include_superseded=include_superseded
        )
        return self._call(_calls.recall(question, budget, **options))

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

        The events are ``candidates``, ``packed`` and ``final`` (whose data is the RecallPack
        ``recall`` returns). Each is yielded as soon as its bytes arrive: from the local stack,
        ``candidates`` comes before packing is done; API Gateway on AWS delivers the whole
        stream at once when the function returns (docs/streaming.md). The request is sent at
        the first ``next()``; a 429 or 5xx before the stream starts is retried like ``recall``.
        An ``error`` event raises KaiboAPIError, and so does a stream that ends before
        ``final`` (code ``stream_incomplete``).
        """
        options = _calls.RecallOptions(
            as_of=as_of, streams=streams, types=types, include_superseded=include_superseded
        )
        return self._recall_events(_calls.recall(question, budget, **options))

    def _recall_events(self, call: Call[RecallPack]) -> Generator[tuple[str, dict[str, Any]], None, None]:
        spec = self._target.request(call.method, call.path, body=call.body, accept=EVENT_STREAM_MEDIA_TYPE)
        response = self._send(spec, stream=True)
        try:
            reader = RecallEvents(response.status_code, response.headers)
            with transport_errors(self.endpoint, f"{spec.what} (the event stream)", self.timeout):
                for chunk in response.iter_bytes():
                    yield from reader.feed(chunk)
                    if reader.done:
                        return
            yield from reader.end()
        finally:
            response.close()

    def memory(self, memory_id: str | Mapping[str, Any]) -> dict[str, Any]:
        """GET /v1/memories/{id}: one memory, in any status (an id, or a recalled item)."""
        return self._call(_calls.memory(memory_id))

    def explain(self, memory: str | Mapping[str, Any]) -> dict[str, Any]:
        """POST /v1/explain: the versions that led to a memory (an id, or a recalled item), oldest first."""
        return self._call(_calls.explain(memory))

    def job(self, job_id: str) -> dict[str, Any]:
        """GET /v1/jobs/{id}: a structuring job (queued, structuring, done or failed)."""
        return self._call(_calls.job(job_id))

    # -- event log (verify) --------------------------------------------------------------------

    def streams(self, limit: int | None = None) -> Generator[dict[str, Any], None, None]:
        """GET /v1/streams, every page (``limit`` heads each, 1-1000; the API's default 500):
        ``{"stream", "seq", "hash"}`` per stream (its head)."""
        return self._paged(_calls.CursorPages(limit))

    def events(
        self, stream: str, from_seq: int = 1, limit: int = DEFAULT_EVENTS_PAGE
    ) -> Generator[dict[str, Any], None, None]:
        """GET /v1/streams/{stream}/events from ``from_seq`` on, following ``nextFromSeq``."""
        return self._paged(_calls.events_pages(stream, from_seq, limit))

    # -- forget, the deletion ledger, receipts --------------------------------------------------

    def forget(
        self,
        *,
        memory_id: str | None = None,
        query: str | None = None,
        stream: str | None = None,
        subject: str | None = None,
        reason: str,
        dry_run: bool = False,
        preview_token: str | None = None,
        max_memories: int | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """POST /v1/forget (scope ``forget``): erase a memory, what a query matches, a stream, or
        the memories with a subject.

        Give exactly one of ``memory_id``, ``query``, ``stream``, ``subject`` (ValueError
        otherwise, before any request); ``subject`` is compared as the memory serves it, ignoring
        case and runs of whitespace. ``dry_run`` returns the set with each memory's content and a
        ``previewToken``, changing nothing; pass that token back as ``preview_token`` and the
        real call is refused with ``409 preview_changed`` (KaiboAPIError; ``details`` carries
        the new token) if the set changed since. The answer of a real call holds the
        ``receipt`` and the ``reasonSalt``, which is shown once. There is no undo. A real forget
        with an ``idempotency_key`` (not with ``dry_run``) is retried after a 5xx or a lost
        connection like a dry run: the server answers a retry with the first call's answer
        (``replayed: True``) and writes no second ledger entry, for 24 hours; the same key with
        another request is refused with ``409 idempotency_key_reused``. Without a key, a real
        forget is never retried.
        """
        return self._call(
            _calls.forget(
                memory_id=memory_id,
                query=query,
                stream=stream,
                subject=subject,
                reason=reason,
                dry_run=dry_run,
                preview_token=preview_token,
                max_memories=max_memories,
                idempotency_key=idempotency_key,
            )
        )

    def ledger(self, from_seq: int = 1) -> Generator[dict[str, Any], None, None]:
        """GET /v1/ledger from ``from_seq`` on, following ``nextFromSeq``: the entries, oldest first."""
        return self._paged(_calls.ledger_pages(from_seq))

    def receipt(self, receipt_id: str) -> dict[str, Any]:
        """GET /v1/receipts/{id}: the ledger entry of one forget plus its ``state`` (tombstoned|purged)
        and, on a purged receipt naming events the purge found in no stream, ``unlocatedEventIds``."""
        return self._call(_calls.receipt(receipt_id))

    # -- webhooks (scope write; docs/webhooks.md) -----------------------------------------------

    def create_webhook(
        self, url: str, events: Sequence[str], description: str | None = None
    ) -> dict[str, Any]:
        """POST /v1/webhooks: subscribe ``url`` to ``events`` (``memory.forgotten``,
        ``memory.structured``, ``memory.superseded``, ``memory.canceled``). The answer holds the
        signing ``secret``, shown this once. Not retried after a 5xx (a second webhook would be made)."""
        return self._call(_calls.create_webhook(url, events, description))

    def webhooks(self) -> list[dict[str, Any]]:
        """GET /v1/webhooks: every webhook of the project (never a secret)."""
        return self._call(_calls.webhooks())

    def webhook(self, webhook_id: str) -> dict[str, Any]:
        """GET /v1/webhooks/{id}: one webhook (``status`` active or failing)."""
        return self._call(_calls.webhook(webhook_id))

    def delete_webhook(self, webhook_id: str) -> None:
        """DELETE /v1/webhooks/{id} (204): its pending deliveries are dropped."""
        self._call(_calls.delete_webhook(webhook_id))

    def rotate_webhook_secret(self, webhook_id: str) -> dict[str, Any]:
        """POST /v1/webhooks/{id}/rotate-secret: a new ``secret`` (shown once); the old one also
        signs until ``previousSecretValidUntil`` (24 hours)."""
        return self._call(_calls.rotate_webhook_secret(webhook_id))

    def test_webhook(self, webhook_id: str) -> dict[str, Any]:
        """POST /v1/webhooks/{id}/test (202): a ``webhook.test`` event to this webhook only."""
        return self._call(_calls.test_webhook(webhook_id))

    def webhook_deliveries(self, webhook_id: str, limit: int | None = None) -> list[dict[str, Any]]:
        """GET /v1/webhooks/{id}/deliveries: the latest attempts, newest first (``limit`` 1-100;
        None: the API's 50)."""
        return self._call(_calls.webhook_deliveries(webhook_id, limit))

    # -- admin (admin key) ---------------------------------------------------------------------

    def create_project(self, name: str, time_zone: str | None = None) -> dict[str, Any]:
        """POST /v1/admin/projects: a new project and its first key ``{"projectId", "keyId", "apiKey"}``.

        ``time_zone`` (IANA name) is where its events without a ``timeZone`` resolve "tomorrow".
        """
        return self._call(_calls.create_project(name, time_zone))

    def create_key(self, project_id: str, scopes: Sequence[str] | None = None) -> dict[str, Any]:
        """POST /v1/admin/projects/{id}/keys: another key ``{"keyId", "apiKey", "scopes"}``
        (``scopes`` None: the route's default, read and write)."""
        return self._call(_calls.create_key(project_id, scopes))

    def revoke_key(self, key_id: str) -> None:
        """DELETE /v1/admin/keys/{keyId} (204)."""
        self._call(_calls.revoke_key(key_id))
