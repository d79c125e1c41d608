"""When a failed call is sent again, and after how long: a pure policy both clients share.

- ``429`` (``stream_busy``, the gateway's throttle or quota) is retried for every call: the API
  answers it before anything is written. The wait is its ``Retry-After``, or the backoff when it
  has none. A ``Retry-After`` longer than ``max_retry_after`` (a used-up quota: an hour) is final:
  the error is raised at once, its ``retry_after`` telling the caller when to come back.
- Except a ``429`` for a transaction that kept racing, or a read DynamoDB kept throttling
  (``RACE_CODES``): a first attempt, or an earlier write of the call, may have committed
  (docs/api.md, "Concurrent writers"), so, like a 5xx, it is retried only for an idempotent
  call. Sent again, a webhook or project would be created twice, and a forget without a key
  would answer an empty set instead of its receipt.
- ``500``, ``502``, ``503``, ``504`` and connection failures (refused, reset, no answer line)
  are retried only for an idempotent call (``kaibo._http.is_idempotent``): the first attempt
  may have done its work, and only those calls can safely do it again.
- A timeout is not retried: ``timeout`` is how long the caller is willing to wait.
- The backoff is exponential with jitter: attempt ``n`` (0-based) waits a random time between
  half and all of ``min(backoff_cap, backoff_base * 2**n)``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from kaibo.errors import KaiboAPIError, KaiboConnectionError, KaiboError, KaiboTimeoutError

DEFAULT_MAX_RETRIES = 3
DEFAULT_BACKOFF_BASE_SECONDS = 0.25
DEFAULT_BACKOFF_CAP_SECONDS = 8.0
MAX_RETRY_AFTER_SECONDS = 30.0
#: Statuses retried for idempotent calls.
RETRIED_SERVER_STATUSES = frozenset({500, 502, 503, 504})
THROTTLED_STATUS = 429
#: The 429 codes of a DynamoDB transaction race, and of a throttled read that may follow a write
#: (``stream_busy`` is left out: remember is always idempotent, and its optimistic append loses
#: without writing; so is ``kms_busy``: every route calls KMS before it writes anything).
RACE_CODES = frozenset({"ledger_busy", "project_busy", "table_busy", "transaction_busy"})


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how late a call is retried (see the module's rules)."""

    max_retries: int = DEFAULT_MAX_RETRIES
    backoff_base: float = DEFAULT_BACKOFF_BASE_SECONDS
    backoff_cap: float = DEFAULT_BACKOFF_CAP_SECONDS
    max_retry_after: float = MAX_RETRY_AFTER_SECONDS
    #: A number in [0, 1): the jitter's source (tests pass a constant).
    jitter: Callable[[], float] = field(default=random.random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if min(self.backoff_base, self.backoff_cap, self.max_retry_after) < 0:
            raise ValueError("backoff_base, backoff_cap and max_retry_after must be >= 0")

    def delay(self, attempt: int, error: KaiboError, *, idempotent: bool) -> float | None:
        """Seconds to wait before sending again after ``error`` ended attempt ``attempt``
        (0-based), or None when the error is final."""
        if attempt >= self.max_retries or not retryable(error, idempotent=idempotent):
            return None
        retry_after = error.retry_after if isinstance(error, KaiboAPIError) else None
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        return self.backoff(attempt)

    def backoff(self, attempt: int) -> float:
        ceiling = min(self.backoff_cap, self.backoff_base * 2.0**attempt)
        return ceiling / 2 + self.jitter() * ceiling / 2


def retryable(error: KaiboError, *, idempotent: bool) -> bool:
    """Whether sending the same request again may succeed and is safe."""
    if isinstance(error, KaiboAPIError):
        if error.status == THROTTLED_STATUS:
            return idempotent or error.code not in RACE_CODES
        return idempotent and error.status in RETRIED_SERVER_STATUSES
    if isinstance(error, KaiboTimeoutError):
        return False
    return idempotent and isinstance(error, KaiboConnectionError)


class Attempts:
    """One call's retry state: ``wait_after(error)`` is the delay before the next attempt, or
    raises ``error`` when there is none. Both clients drive their loop with it."""

    def __init__(self, policy: RetryPolicy, *, idempotent: bool) -> None:
        self._policy = policy
        self._idempotent = idempotent
        self._attempt = 0

    def wait_after(self, error: KaiboError) -> float:
        delay = self._policy.delay(self._attempt, error, idempotent=self._idempotent)
        if delay is None:
            raise error
        self._attempt += 1
        return delay
