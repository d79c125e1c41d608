"""Domain errors. Each carries a stable machine-readable code and its HTTP status.

The one exception table (kaibo_core.runtime.http) turns any of these into
``{"error": {"code", "message", "details"}}`` with ``status``.
"""

from __future__ import annotations

from typing import Any, ClassVar


class KaiboError(Exception):
    status: ClassVar[int] = 400

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}


class BadRequestError(KaiboError):
    status = 400


class UnauthorizedError(KaiboError):
    status = 401


class ForbiddenError(KaiboError):
    status = 403


class NotFoundError(KaiboError):
    status = 404


class ConflictError(KaiboError):
    status = 409


class PayloadTooLargeError(KaiboError):
    status = 413


class UnprocessableError(KaiboError):
    status = 422


class TooManyRequestsError(KaiboError):
    status = 429

    def __init__(
        self, code: str, message: str, retry_after_seconds: int, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(code, message, details)
        self.retry_after_seconds = retry_after_seconds


class ServiceUnavailableError(KaiboError):
    """A limit of the deployment (not of the request, nor a fault of the code): its operator can
    lift it, the caller cannot."""

    status = 503
