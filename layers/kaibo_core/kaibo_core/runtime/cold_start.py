"""A cold start runs without the cyclic garbage collector.

A cold start builds ~80,000 objects that live as long as the container (modules,
classes, botocore's service models, pydantic's validators) and almost no cyclic
garbage (~1,000 objects: measured in docs/performance.md). With the collector on,
every 700 allocations start a collection, and the older generations rescan the
growing heap again and again: ~15 % of a cold start (import and first request).

So each handler module calls :func:`pause_collector` before its other imports, and
its handler is wrapped in :func:`resume_collector_after_first_invocation`: once the
first invocation has returned (or raised), everything built so far is moved to the
permanent generation (``gc.freeze``), where later collections never scan it, and
the collector is turned back on. The garbage frozen with it is never freed: those
~1,000 objects, once per container. Later invocations run with the collector on.

The pause is process-wide: any wrapped handler's first invocation ends it, whichever
module started it (a container that imports several handlers, like the local stack's,
resumes on its first invocation of any of them).
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")

_paused = False


def pause_collector() -> None:
    """Turn the collector off until a wrapped handler's first invocation has returned.

    Does nothing if the collector is already off (paused by another handler module, or
    turned off by whoever runs us: then it is theirs to turn back on)."""
    global _paused  # noqa: PLW0603 - process-wide by nature, like the collector itself
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume_collector() -> None:
    """End a pause: freeze what exists (never rescanned, never freed) and collect again."""
    global _paused  # noqa: PLW0603
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()


def is_paused() -> bool:
    return _paused


def resume_collector_after_first_invocation(handler: Callable[_P, _R]) -> Callable[_P, _R]:
    """Wrap a Lambda handler so that its first invocation, however it ends, ends the pause."""

    @functools.wraps(handler)
    def invoke(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return handler(*args, **kwargs)
        finally:
            resume_collector()  # once paused; a flag check after that

    return invoke
