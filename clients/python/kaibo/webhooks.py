"""Verifying a webhook delivery (docs/webhooks.md, "Verifying a delivery").

The service signs with ``kaibo_core.core.webhook_signing`` and this checks with the same module,
so the two cannot drift; it needs only the standard library.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from kaibo_core.core.webhook_signing import DEFAULT_TOLERANCE_SECONDS, verify


def verify_webhook(
    secret: str,
    headers: Mapping[str, str],
    body: bytes | str,
    *,
    now: int | None = None,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
) -> bool:
    """Whether a delivery is Kaibo's: any ``v1`` signature in ``headers`` is ``secret``'s over
    ``body``, signed within ``tolerance_seconds`` (default 300) of ``now`` (Unix seconds; default
    the clock). ``body`` is the raw body as received (a ``str`` is taken as its UTF-8 bytes),
    never a re-serialized parse. Header names in any case. ValueError only for a malformed secret.
    """
    raw = body.encode("utf-8") if isinstance(body, str) else bytes(body)
    clock = int(time.time()) if now is None else now
    return verify(secret, headers, raw, now=clock, tolerance_seconds=tolerance_seconds)
