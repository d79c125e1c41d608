"""One deadline per invocation for every retry loop in it (``core/deadline.py``).

Each handler that can retry is wrapped in :func:`within_remaining_time`: its invocation's retry
loops stop ``reserve_for(its time)`` before the Lambda context's remaining time runs out, so an API
request answers its 429 (Retry-After) instead of being stopped by Lambda (API Gateway's 502/504),
and a background function fails its job for SQS or EventBridge to retry before its timeout.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from kaibo_core.core import deadline

_R = TypeVar("_R")


def within_remaining_time(handler: Callable[..., _R]) -> Callable[..., _R]:
    """Wrap a Lambda handler ``(event, context, ...)``: each invocation gets its own deadline from
    ``context.get_remaining_time_in_millis`` (none for a context without it: tools, some tests)."""

    @functools.wraps(handler)
    def invoke(event: Any, context: Any, *args: Any, **kwargs: Any) -> _R:
        remaining_ms = getattr(context, "get_remaining_time_in_millis", None)
        if remaining_ms is None:
            return handler(event, context, *args, **kwargs)
        with deadline.bounded_by(remaining_ms):
            return handler(event, context, *args, **kwargs)

    return invoke
