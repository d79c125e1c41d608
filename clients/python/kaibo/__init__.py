"""Kaibo client: an HTTP SDK (``KaiboClient``, ``AsyncKaiboClient``), chain and ledger
verification and the ``kaibo`` CLI.

Dependency-light on purpose: ``httpx`` plus ``kaibo_core.core.chain`` and
``kaibo_core.core.ledger`` (which need only ``rfc8785``) and ``kaibo_core.core.webhook_signing``
(the standard library), so verifying a chain, the deletion ledger or a webhook delivery never
pulls in AWS SDKs. docs/python-sdk.md shows the SDK in use.
"""

from __future__ import annotations

from kaibo.async_client import AsyncKaiboClient
from kaibo.client import KaiboClient
from kaibo.errors import KaiboAPIError, KaiboConnectionError, KaiboError, KaiboTimeoutError
from kaibo.ledger_verify import LedgerReport, ReceiptFailure, ReceiptReport, verify_ledger, verify_receipt
from kaibo.results import Citation, RecallItem, RecallPack
from kaibo.retry import RetryPolicy
from kaibo.verify import StreamReport, verify_all, verify_events, verify_stream
from kaibo.webhooks import verify_webhook

__version__ = "0.1.0"

__all__ = [
    "AsyncKaiboClient",
    "Citation",
    "KaiboAPIError",
    "KaiboClient",
    "KaiboConnectionError",
    "KaiboError",
    "KaiboTimeoutError",
    "LedgerReport",
    "RecallItem",
    "RecallPack",
    "ReceiptFailure",
    "ReceiptReport",
    "RetryPolicy",
    "StreamReport",
    "__version__",
    "verify_all",
    "verify_events",
    "verify_ledger",
    "verify_receipt",
    "verify_stream",
    "verify_webhook",
]
