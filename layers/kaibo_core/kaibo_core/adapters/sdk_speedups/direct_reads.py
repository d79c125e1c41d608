"""Recall's two reads, Query and BatchGetItem, sent over a kept-alive connection of their own.

Why: botocore spends ~1.5 ms of CPU on every request, even an empty Query (building
the request through its hooks, endpoint rules, validation, signing, urllib3, header
parsing), and a recall makes one Query per question term plus a BatchGetItem: about
half of a recall's CPU (``docs/performance-recall.md``). The same request sent here
costs ~0.4 ms.

What stays botocore's: the credentials (the session's provider chain, refreshed as
botocore refreshes them), the signature (``botocore.auth.SigV4Auth``), the endpoint
(``client.meta.endpoint_url``), and every answer that is not a plain success. This
path only keeps a response botocore would have handed back as the JSON it is (see
``sdk_speedups.plain_items``): status 200, the ``x-amz-crc32`` checksum matching, no binary
value anywhere. Anything else (an error status such as throttling, a checksum
mismatch, a possible binary value, a dropped or timed-out connection, parameters
that are not plain JSON, an HTTP proxy in the configuration) sends the same request
again through the botocore client, with its retries, its parsing and its exceptions.
So callers see botocore's behaviour, just cheaper in the common case.

``KAIBO_SDK_SPEEDUPS=0`` turns it off with every other SDK speed-up (``runtime/wiring.py``).
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.httpsession import get_cert_path

from kaibo_core.adapters.sdk_speedups.plain_items import may_hold_binary

if TYPE_CHECKING:
    from botocore.credentials import Credentials
    from mypy_boto3_dynamodb import DynamoDBClient

#: The DynamoDB JSON protocol: one POST to ``/`` per operation, named by this header.
TARGET_PREFIX: Final = "DynamoDB_20120810."
CONTENT_TYPE: Final = "application/x-amz-json-1.0"
#: Seconds to wait for a connection and for each read of the answer (botocore's config here).
TIMEOUT_SECONDS: Final = 5.0

#: Requests one thread has sent and not read yet (as many as botocore's connection pool here).
MAX_IN_FLIGHT: Final = 16

#: After this many transport failures in a row (no connection, TLS refused, timeouts), the
#: container stops trying the direct path: every read would otherwise pay for a failed attempt.
MAX_CONSECUTIVE_FAILURES: Final = 3

#: Called after each direct exchange: operation, request body, response body (benchmarks count
#: requests and bytes with it; the requests left to botocore show in botocore's own events).
Observer = Callable[[str, bytes, bytes], None]


class DirectDynamoReads:
    """``query`` and ``batch_get_item`` with the botocore client's signature and results."""

    def __init__(
        self,
        client: DynamoDBClient,
        credentials: Credentials | None,
        observer: Observer | None = None,
        ca_bundle: str | None = None,
    ) -> None:
        self._client = client
        self._ca_bundle = ca_bundle or get_cert_path(True)  # botocore's: AWS_CA_BUNDLE, else its default
        self._credentials = credentials
        self._observer = observer
        self._url = client.meta.endpoint_url.rstrip("/") + "/"
        parts = urlsplit(self._url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port
        self._signer_region = client.meta.region_name
        self._local = threading.local()
        self._tls: ssl.SSLContext | None = None
        self._failures = 0
        self.enabled = credentials is not None and parts.path in ("", "/") and not self._proxied(client)

    def _proxied(self, client: DynamoDBClient) -> bool:
        """Does botocore send this endpoint's requests through a proxy? Then so would we: not here."""
        if getattr(client.meta.config, "proxies", None):
            return True
        return bool(getproxies().get("https" if self._https else "http")) and not proxy_bypass(self._host)

    def query(self, **params: Any) -> dict[str, Any]:
        return self.query_all([params])[0]

    def query_all(self, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Several Queries at once, from this thread: each is sent on a connection of its own
        before any answer is read, so DynamoDB works on them in parallel without a thread
        each (a thread per Query costs ~0.2 ms of CPU in switching). Answers in order; at most
        ``MAX_IN_FLIGHT`` at a time, so a thread keeps at most that many connections."""
        received: list[dict[str, Any] | None] = []
        for start in range(0, len(requests), MAX_IN_FLIGHT):
            sent = [self._start("Query", params) for params in requests[start : start + MAX_IN_FLIGHT]]
            # Every answer is read before botocore makes any request again (which may raise).
            received += [self._receive("Query", flight) if flight is not None else None for flight in sent]
        return [
            document if document is not None else dict(self._client.query(**params))
            for params, document in zip(requests, received, strict=True)
        ]

    def batch_get_item(self, **params: Any) -> dict[str, Any]:
        flight = self._start("BatchGetItem", params)
        document = self._receive("BatchGetItem", flight) if flight is not None else None
        return document if document is not None else dict(self._client.batch_get_item(**params))

    def _start(self, operation: str, params: dict[str, Any]) -> _InFlight | None:
        """Sign and send; None when this request is botocore's to make."""
        if not self.enabled or self._credentials is None:
            return None
        try:
            body = json.dumps(params, separators=(",", ":")).encode("utf-8")
        except (TypeError, ValueError):  # bytes or other non-JSON values: botocore's serializer
            return None
        request = AWSRequest(
            method="POST",
            url=self._url,
            data=body,
            headers={"Content-Type": CONTENT_TYPE, "X-Amz-Target": TARGET_PREFIX + operation},
        )
        SigV4Auth(self._credentials.get_frozen_credentials(), "dynamodb", self._signer_region).add_auth(
            request
        )
        connection = self._connection()
        fresh = connection.sock is None
        try:
            connection.request("POST", "/", body, dict(request.headers.items()))
        except (OSError, http.client.HTTPException):
            self._failed(connection, fresh)
            return None
        return _InFlight(body, connection, fresh)

    def _receive(self, operation: str, flight: _InFlight) -> dict[str, Any] | None:
        """The answer, if it is a plain success; None: botocore makes the request again."""
        connection = flight.connection
        try:
            response = connection.getresponse()
            answer = response.read()
        except (OSError, http.client.HTTPException):
            # A kept-alive connection the server closed, a timeout: botocore retries it afresh.
            self._failed(connection, flight.fresh)
            return None
        self._failures = 0
        if response.will_close:
            connection.close()
        else:
            self._idle().append(connection)
        checksum = response.getheader("x-amz-crc32")
        if response.status != 200 or (checksum is not None and checksum != str(zlib.crc32(answer))):
            return None
        if may_hold_binary(answer):
            return None
        try:
            document = json.loads(answer)
        except ValueError:
            return None
        if not isinstance(document, dict):
            return None
        if self._observer is not None:
            self._observer(operation, flight.body, answer)
        return document

    def _failed(self, connection: http.client.HTTPConnection, fresh: bool) -> None:
        connection.close()
        if fresh:  # a kept-alive connection going stale after a pause is expected, not a failure
            self._failures += 1
            if self._failures >= MAX_CONSECUTIVE_FAILURES:
                self.enabled = False

    def _idle(self) -> list[http.client.HTTPConnection]:
        idle: list[http.client.HTTPConnection] | None = getattr(self._local, "idle", None)
        if idle is None:
            idle = self._local.idle = []
        return idle

    def _connection(self) -> http.client.HTTPConnection:
        """A kept-alive connection of this thread not in use, or a new one."""
        idle = self._idle()
        if idle:
            return idle.pop()
        if not self._https:
            return http.client.HTTPConnection(self._host, self._port, timeout=TIMEOUT_SECONDS)
        if self._tls is None:
            self._tls = ssl.create_default_context(cafile=self._ca_bundle)
        return http.client.HTTPSConnection(self._host, self._port, timeout=TIMEOUT_SECONDS, context=self._tls)


@dataclass(frozen=True, slots=True)
class _InFlight:
    """A request sent, its answer not read yet."""

    body: bytes
    connection: http.client.HTTPConnection
    fresh: bool  # the connection was opened for this request
