"""The time an invocation has left, shared by every retry loop in it.

Lambda stops a function that runs out of time: an API request then answers API Gateway's 502/504
instead of the documented 429 with Retry-After, and a background job stops wherever it was. So the
runtime sets one deadline per invocation from the Lambda context (``runtime/deadlines.py``), a
reserve before the end (enough to write the 429 or fail the job), and a retry loop asks
``time_for(wait)`` before it waits: when the answer is no, it gives up at once with the error it
raises when its attempts run out. A call that waits on someone else (a model, a webhook's
subscriber) is given ``seconds_within(its own timeout)``, and one that cannot start in time, or is
cut short by the deadline, raises ``OutOfTimeError``: the job fails, for its queue to retry it.
Without a deadline (tests, tools) every wait is allowed and the loops' own limits alone apply.

The deadline lives in a context variable: work handed to another thread sees it only when
submitted with ``contextvars.copy_context().run`` (the adapters' I/O pool does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from kaibo_core.core.limits import DEADLINE_RESERVE_FRACTION, DEADLINE_RESERVE_SECONDS

#: Lambda's ``context.get_remaining_time_in_millis``.
RemainingMillis = Callable[[], int]


@dataclass(frozen=True)
class Deadline:
    """``remaining_ms`` (the invocation's clock) less ``reserve_seconds``."""

    remaining_ms: RemainingMillis
    reserve_seconds: float

    def seconds_left(self) -> float:
        return self.remaining_ms() / 1000 - self.reserve_seconds


class OutOfTimeError(RuntimeError):
    """What is left of the invocation is too short for the next step: its job fails and is retried
    by its queue, in a later invocation with time enough."""


_current: ContextVar[Deadline | None] = ContextVar("kaibo_invocation_deadline", default=None)


def reserve_for(total_seconds: float) -> float:
    """What an invocation of ``total_seconds`` keeps for its answer: DEADLINE_RESERVE_SECONDS, or
    a fraction of a shorter invocation (so that it still retries at all)."""
    return min(DEADLINE_RESERVE_SECONDS, max(0.0, total_seconds) * DEADLINE_RESERVE_FRACTION)


def current() -> Deadline | None:
    return _current.get()


def time_for(wait_seconds: float) -> bool:
    """Whether waiting ``wait_seconds`` and trying again still ends before the deadline (always,
    without one)."""
    deadline = _current.get()
    return deadline is None or wait_seconds < deadline.seconds_left()


def seconds_within(limit_seconds: float) -> float:
    """``limit_seconds``, or what is left before the deadline when that is less (never below 0)."""
    deadline = _current.get()
    if deadline is None:
        return limit_seconds
    return max(0.0, min(limit_seconds, deadline.seconds_left()))


@contextmanager
def bounded_by(remaining_ms: RemainingMillis) -> Iterator[Deadline]:
    """The deadline of the invocation whose clock is ``remaining_ms``, for the ``with`` block (the
    one before it, if any, afterwards)."""
    deadline = Deadline(remaining_ms, reserve_for(remaining_ms() / 1000))
    token = _current.set(deadline)
    try:
        yield deadline
    finally:
        _current.reset(token)
