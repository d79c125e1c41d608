"""Kaibo client: an HTTP SDK (``KaiboClient``), chain and ledger verification and the ``kaibo`` CLI.

Dependency-light on purpose: the standard library plus ``kaibo_core.core.chain`` and
``kaibo_core.core.ledger`` (which need only ``rfc8785``), so verifying a chain or the deletion
ledger never pulls in AWS SDKs.
"""

from __future__ import annotations

from kaibo.client import KaiboAPIError, KaiboClient, KaiboConnectionError, KaiboError
from kaibo.ledger_verify import LedgerReport, ReceiptFailure, ReceiptReport, verify_ledger, verify_receipt
from kaibo.verify import StreamReport, verify_all, verify_events, verify_stream

__version__ = "0.1.0"

__all__ = [
    "KaiboAPIError",
    "KaiboClient",
    "KaiboConnectionError",
    "KaiboError",
    "LedgerReport",
    "ReceiptFailure",
    "ReceiptReport",
    "StreamReport",
    "__version__",
    "verify_all",
    "verify_events",
    "verify_ledger",
    "verify_receipt",
    "verify_stream",
]
