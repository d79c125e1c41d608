"""What ``KaiboClient`` and ``AsyncKaiboClient`` hold alike: the endpoint, the key, the timeout,
the retry policy and an httpx connection pool of their kind."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import replace
from typing import Any, Generic, TypeVar

from kaibo._http import DEFAULT_TIMEOUT_SECONDS, Target, checked_endpoint
from kaibo.retry import RetryPolicy

_Pool = TypeVar("_Pool")
_Transport = TypeVar("_Transport")


class ClientSettings(ABC, Generic[_Pool, _Transport]):
    """``endpoint`` is the base URL (``http://127.0.0.1:3000``,
    ``https://<id>.execute-api.<region>.amazonaws.com/prod``); paths are appended to it.
    ``api_key`` is a project key, or the admin key for the admin calls. ``timeout`` bounds each
    attempt (connecting, and each read); ``max_retries`` overrides ``retry.max_retries``
    (default 3). ``transport`` replaces httpx's network transport (``httpx.MockTransport`` in
    tests). Redirects are never followed: a 3xx raises KaiboAPIError ``redirect_refused``.
    """

    def __init__(
        self,
        endpoint: str,
        api_key: str | None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        max_retries: int | None = None,
        *,
        retry: RetryPolicy | None = None,
        transport: _Transport | None = None,
    ) -> None:
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        self._target = Target(checked_endpoint(endpoint), api_key)
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        if max_retries is not None:
            self.max_retries = max_retries
        self._http = self._new_pool({"timeout": timeout, "follow_redirects": False, "transport": transport})

    @abstractmethod
    def _new_pool(self, options: dict[str, Any]) -> _Pool:
        """The httpx client, made with ``options``."""

    @property
    def endpoint(self) -> str:
        return self._target.endpoint

    @property
    def max_retries(self) -> int:
        return self.retry.max_retries

    @max_retries.setter
    def max_retries(self, value: int) -> None:
        self.retry = replace(self.retry, max_retries=value)

    def __repr__(self) -> str:  # never show the key
        return f"{type(self).__name__}(endpoint={self.endpoint!r})"
