"""The Kaibo HTTP API for asyncio, on ``httpx.AsyncClient``: ``AsyncKaiboClient``.

The same methods as ``KaiboClient``, as coroutines; the listings (``streams``, ``events``,
``ledger``) and ``recall_stream`` are async generators. Requests, answers, errors and retries
are built and judged by the same code as the sync client's (kaibo._http, kaibo._calls,
kaibo.retry)::

    async with AsyncKaiboClient("http://127.0.0.1:3000", key) as kaibo:
        pack = await kaibo.recall("When is the release target?")
        async for head in kaibo.streams():
            ...
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar, Unpack

import httpx

from kaibo import _calls
from kaibo._base import ClientSettings
from kaibo._calls import DEFAULT_EVENTS_PAGE, DEFAULT_RECALL_BUDGET, Call, Pages, RecallEvents, StreamEvent
from kaibo._http import (
    EVENT_STREAM_MEDIA_TYPE,
    Query,
    RequestSpec,
    error_for_answer,
    is_success,
    json_answer,
    transport_errors,
)
from kaibo.errors import KaiboError
from kaibo.results import RecallPack
from kaibo.retry import Attempts

_T = TypeVar("_T")


class AsyncKaiboClient(ClientSettings[httpx.AsyncClient, httpx.AsyncBaseTransport]):
    """The Kaibo HTTP API for asyncio (the arguments: ``ClientSettings``; ``transport``:
    ``httpx.AsyncBaseTransport``, e.g. ``httpx.MockTransport`` in tests). Close it with
    ``async with`` or ``await kaibo.aclose()``."""

    def _new_pool(self, options: dict[str, Any]) -> httpx.AsyncClient:
        return httpx.AsyncClient(**options)

    async def aclose(self) -> None:
        """Close the pooled connections (the client cannot be used after)."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncKaiboClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- transport -----------------------------------------------------------------------------

    async def request(self, method: str, path: str, body: Any = None, query: Query | None = None) -> Any:
        """One call: the parsed JSON body (None when empty); retried as ``KaiboClient.request``."""
        spec = self._target.request(method, path, body=body, query=query)
        response = await self._send(spec)
        return json_answer(spec, response.status_code, response.content)

    async def _call(self, call: Call[_T]) -> _T:
        return call.result(await self.request(call.method, call.path, call.body, call.query))

    async def _send(self, spec: RequestSpec, *, stream: bool = False) -> httpx.Response:
        attempts = Attempts(self.retry, idempotent=spec.idempotent)
        while True:
            try:
                return await self._attempt(spec, stream=stream)
            except KaiboError as error:
                await asyncio.sleep(attempts.wait_after(error))

    async def _attempt(self, spec: RequestSpec, *, stream: bool) -> httpx.Response:
        request = self._http.build_request(spec.method, spec.url, headers=spec.headers, content=spec.content)
        with transport_errors(self.endpoint, spec.what, self.timeout):
            response = await self._http.send(request, stream=True)
            if stream and is_success(response.status_code):
                return response
            try:
                await response.aread()
            finally:
                await response.aclose()
        if not is_success(response.status_code):
            raise error_for_answer(spec, response.status_code, response.headers, response.content)
        return response

    async def _paged(self, pages: Pages) -> AsyncGenerator[dict[str, Any], None]:
        while (call := pages.next_call()) is not None:
            for item in pages.take(await self._call(call)):
                yield item

    # -- memory ----------------------------------------------------------------------------------

    async def remember(
        self, stream: str, events: Sequence[Mapping[str, Any]], wait: bool = False
    ) -> dict[str, Any]:
        """POST /v1/remember (idempotent by each event's key, so retried like a read)."""
        return await self._call(_calls.remember(stream, events, wait))

    async def recall(
        self, question: str, budget: int = DEFAULT_RECALL_BUDGET, **options: Unpack[_calls.RecallOptions]
    ) -> RecallPack:
        """POST /v1/recall: a RecallPack (``as_of``, ``streams``, ``types``, ``include_superseded``
        as for ``KaiboClient.recall``)."""
        return await self._call(_calls.recall(question, budget, **options))

    async def recall_stream(
        self, question: str, budget: int = DEFAULT_RECALL_BUDGET, **options: Unpack[_calls.RecallOptions]
    ) -> AsyncGenerator[StreamEvent, None]:
        """POST /v1/recall as an event stream: ``(event, data)`` pairs as they arrive, as
        ``KaiboClient.recall_stream``. Leaving the loop early closes the connection."""
        call = _calls.recall(question, budget, **options)
        spec = self._target.request(call.method, call.path, body=call.body, accept=EVENT_STREAM_MEDIA_TYPE)
        response = await self._send(spec, stream=True)
        try:
            reader = RecallEvents(response.status_code, response.headers)
            with transport_errors(self.endpoint, f"{spec.what} (the event stream)", self.timeout):
                async for chunk in response.aiter_bytes():
                    for event in reader.feed(chunk):
                        yield event
                    if reader.done:
                        return
            for event in reader.end():
                yield event
        finally:
            await response.aclose()

    async def memory(self, memory_id: str | Mapping[str, Any]) -> dict[str, Any]:
        """GET /v1/memories/{id}: one memory, in any status (an id, or a recalled item)."""
        return await self._call(_calls.memory(memory_id))

    async def explain(self, memory: str | Mapping[str, Any]) -> dict[str, Any]:
        """POST /v1/explain: the versions that led to a memory (an id, or a recalled item), oldest first."""
        return await self._call(_calls.explain(memory))

    async def job(self, job_id: str) -> dict[str, Any]:
        """GET /v1/jobs/{id}: a structuring job (queued, structuring, done or failed)."""
        return await self._call(_calls.job(job_id))

    # -- event log -------------------------------------------------------------------------------

    def streams(self, limit: int | None = None) -> AsyncGenerator[dict[str, Any], None]:
        """GET /v1/streams, every page (``limit`` heads each): each stream's head."""
        return self._paged(_calls.CursorPages(limit))

    def events(
        self, stream: str, from_seq: int = 1, limit: int = DEFAULT_EVENTS_PAGE
    ) -> AsyncGenerator[dict[str, Any], None]:
        """GET /v1/streams/{stream}/events from ``from_seq`` on, every page."""
        return self._paged(_calls.events_pages(stream, from_seq, limit))

    # -- forget, the deletion ledger, receipts --------------------------------------------------

    async def forget(self, **request: Unpack[_calls.ForgetRequest]) -> dict[str, Any]:
        """POST /v1/forget: the keywords of ``KaiboClient.forget``. Only a dry run, or a real
        forget with an ``idempotency_key``, is retried after a 5xx or a lost connection."""
        return await self._call(_calls.forget(**request))

    def ledger(self, from_seq: int = 1) -> AsyncGenerator[dict[str, Any], None]:
        """GET /v1/ledger from ``from_seq`` on, every page: the entries, oldest first."""
        return self._paged(_calls.ledger_pages(from_seq))

    async def receipt(self, receipt_id: str) -> dict[str, Any]:
        """GET /v1/receipts/{id}: a forget's ledger entry plus its ``state`` (and ``unlocatedEventIds``)."""
        return await self._call(_calls.receipt(receipt_id))

    # -- webhooks (scope write; docs/webhooks.md) -----------------------------------------------

    async def create_webhook(
        self, url: str, events: Sequence[str], description: str | None = None
    ) -> dict[str, Any]:
        """POST /v1/webhooks: the webhook and its ``secret``, shown this once (never retried after a 5xx)."""
        return await self._call(_calls.create_webhook(url, events, description))

    async def webhooks(self) -> list[dict[str, Any]]:
        """GET /v1/webhooks: every webhook of the project (never a secret)."""
        return await self._call(_calls.webhooks())

    async def webhook(self, webhook_id: str) -> dict[str, Any]:
        """GET /v1/webhooks/{id}: one webhook."""
        return await self._call(_calls.webhook(webhook_id))

    async def delete_webhook(self, webhook_id: str) -> None:
        """DELETE /v1/webhooks/{id} (204)."""
        await self._call(_calls.delete_webhook(webhook_id))

    async def rotate_webhook_secret(self, webhook_id: str) -> dict[str, Any]:
        """POST /v1/webhooks/{id}/rotate-secret: a new ``secret`` (shown once)."""
        return await self._call(_calls.rotate_webhook_secret(webhook_id))

    async def test_webhook(self, webhook_id: str) -> dict[str, Any]:
        """POST /v1/webhooks/{id}/test (202): a ``webhook.test`` event to this webhook only."""
        return await self._call(_calls.test_webhook(webhook_id))

    async def webhook_deliveries(self, webhook_id: str, limit: int | None = None) -> list[dict[str, Any]]:
        """GET /v1/webhooks/{id}/deliveries: the latest attempts, newest first."""
        return await self._call(_calls.webhook_deliveries(webhook_id, limit))

    # -- admin (admin key) ---------------------------------------------------------------------

    async def create_project(self, name: str, time_zone: str | None = None) -> dict[str, Any]:
        """POST /v1/admin/projects: a new project and its first key."""
        return await self._call(_calls.create_project(name, time_zone))

    async def create_key(self, project_id: str, scopes: Sequence[str] | None = None) -> dict[str, Any]:
        """POST /v1/admin/projects/{id}/keys: another key of a project (``scopes`` None: read, write)."""
        return await self._call(_calls.create_key(project_id, scopes))

    async def revoke_key(self, key_id: str) -> None:
        """DELETE /v1/admin/keys/{keyId} (204)."""
        await self._call(_calls.revoke_key(key_id))
