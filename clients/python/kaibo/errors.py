"""What the SDK raises: every failure is a ``KaiboError`` carrying a stable snake_case ``code``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class KaiboError(Exception):
    """Anything that kept a call from getting an answer from the API."""

    code: str = "error"


class KaiboAPIError(KaiboError):
    """The API answered with an error (or with something that is not the documented shape).

    ``code`` is the stable snake_case code of ``{"error": {"code", "message", "details"}}``;
    when the body is not that shape, it is ``http_<status>``. The client's own codes:
    ``redirect_refused``, ``invalid_response``, ``stream_incomplete``. ``retry_after`` is the
    answer's ``Retry-After`` in seconds (None without one); ``request_id`` names the request
    for support when the API or the gateway gave one.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        *,
        retry_after: float | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(f"{code}: {message} (HTTP {status})")
        self.status = status
        self.code = code
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        self.retry_after = retry_after
        self.request_id = request_id

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across processes, keyword fields too
        return (type(self), (self.status, self.code, self.message, self.details), self.__dict__)


class KaiboConnectionError(KaiboError):
    """The API could not be reached (DNS, refused connection, TLS), or the connection broke off.

    ``code`` is ``network_error``; a subclass says ``timeout``.
    """

    code = "network_error"


class KaiboTimeoutError(KaiboConnectionError):
    """No answer (or no next byte of a stream) within the client's ``timeout``. Never retried."""

    code = "timeout"
