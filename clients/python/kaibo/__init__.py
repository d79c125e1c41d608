"""Kaibo client: an HTTP SDK (``KaiboClient``), chain verification and the ``kaibo`` CLI.

Dependency-light on purpose: the standard library plus ``kaibo_core.core.chain``
(which needs only ``rfc8785``), so verifying a chain never pulls in AWS SDKs.
"""

from __future__ import annotations

from kaibo.client import KaiboAPIError, KaiboClient, KaiboConnectionError, KaiboError
from kaibo.verify import StreamReport, verify_all, verify_events, verify_stream

__version__ = "0.1.0"

__all__ = [
    "KaiboAPIError",
    "KaiboClient",
    "KaiboConnectionError",
    "KaiboError",
    "StreamReport",
    "__version__",
    "verify_all",
    "verify_events",
    "verify_stream",
]
