"""Reading the deletion ledger: its entries in order (``GET /v1/ledger``) and one receipt
(``GET /v1/receipts/{id}``), with its state.

A receipt is ``tombstoned`` until the purge has finished its entry (after its ``purgeAfter``),
then ``purged`` (the purge records it on the entry, outside the hashed header). An entry written
before entries kept their events' locations may name events the purge could not find: it is
finished all the same, and its receipt names them beside ``purged`` (``PurgeOutcome``).
"""

from __future__ import annotations

from typing import Final

from kaibo_core.core.errors import NotFoundError
from kaibo_core.core.ledger import LedgerEntry, PurgeOutcome
from kaibo_core.core.storage_keys import ProjectId
from kaibo_core.ports import DeletionLedger

#: Entries per ledger page.
LEDGER_PAGE: Final = 100


class LedgerService:
    def __init__(self, ledger: DeletionLedger) -> None:
        self._ledger = ledger

    def page(self, project: ProjectId, from_seq: int) -> tuple[list[LedgerEntry], int | None]:
        return self._ledger.read(project, max(1, from_seq), LEDGER_PAGE)

    def receipt(self, project: ProjectId, receipt_id: str) -> tuple[LedgerEntry, PurgeOutcome | None]:
        """A receipt's entry and how the purge finished it (None: not yet, it reads tombstoned)."""
        # Another project's receipt answers exactly like one that does not exist.
        entry = self._ledger.receipt(project, receipt_id) if receipt_id.startswith("rcpt_") else None
        if entry is None:
            raise NotFoundError(
                "receipt_not_found", f"No receipt {receipt_id!r} in this project.", {"receiptId": receipt_id}
            )
        return entry, self._ledger.purge_outcome(entry)
