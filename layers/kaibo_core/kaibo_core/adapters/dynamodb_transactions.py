"""TransactWriteItems through the races DynamoDB answers with an error: every store's transactions
go through ``transact_write``.

Two answers mean "not now" rather than "no", and nothing half-written follows from either:

- ``TransactionInProgressException``: a retry (the SDK's own) met the first attempt with the same
  ``ClientRequestToken`` still committing. Sent again with that token, the transaction is answered
  with the first attempt's outcome (DynamoDB keeps a token's outcome for 10 minutes): it is
  applied once at most, whatever happens.
- ``TransactionCanceledException`` whose reasons are only ``TransactionConflict`` (and ``None``):
  another transaction held one of the items. Nothing was applied; the same actions are sent again
  under a new token, and their conditions decide as they would have the first time.

Both are retried with full-jitter backoff, at most ``TRANSACTION_RACE_ATTEMPTS`` times within
``TRANSACTION_RACE_SECONDS`` and before the invocation's deadline (``core/deadline.py``); then the
caller's ``busy`` error (a 429 with ``Retry-After``) is raised. A cancellation with a failed
condition is an answer: it goes back to the caller at once, as the ClientError, for the store to
read its reasons.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from botocore.exceptions import ClientError

from kaibo_core.core import deadline as invocation
from kaibo_core.core.backoff import full_jitter
from kaibo_core.core.errors import TooManyRequestsError
from kaibo_core.core.limits import (
    TRANSACTION_RACE_ATTEMPTS,
    TRANSACTION_RACE_BACKOFF_BASE_SECONDS,
    TRANSACTION_RACE_BACKOFF_CAP_SECONDS,
    TRANSACTION_RACE_RETRY_AFTER_SECONDS,
    TRANSACTION_RACE_SECONDS,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

Race = Literal["in_progress", "conflict"]


def transaction_busy() -> TooManyRequestsError:
    """The 429 of a transaction whose races did not end in time (stores with a more telling code,
    ``stream_busy`` or ``project_busy``, pass their own)."""
    return TooManyRequestsError(
        "transaction_busy",
        "Other requests are changing the same data right now; retry after the Retry-After seconds.",
        retry_after_seconds=TRANSACTION_RACE_RETRY_AFTER_SECONDS,
    )


def race_of(exc: ClientError) -> Race | None:
    """Which race ``exc`` reports, or None for any other error (a failed condition among them)."""
    code = exc.response.get("Error", {}).get("Code")
    if code == "TransactionInProgressException":
        return "in_progress"
    if code != "TransactionCanceledException":
        return None
    codes = {reason.get("Code") for reason in exc.response.get("CancellationReasons", [])}
    if "TransactionConflict" in codes and codes <= {"TransactionConflict", "None", None}:
        return "conflict"
    return None


def transact_write(
    client: DynamoDBClient,
    actions: Sequence[TransactWriteItemTypeDef],
    *,
    busy: Callable[[], TooManyRequestsError] = transaction_busy,
    sleep: Callable[[float], None] = time.sleep,
    monotonic: Callable[[], float] = time.monotonic,
) -> None:
    """Apply ``actions`` in one transaction, retrying its races (module docstring); a failed
    condition raises the ClientError, races past the attempts or the deadline raise ``busy()``."""
    token = str(uuid.uuid4())
    deadline = monotonic() + TRANSACTION_RACE_SECONDS
    for attempt in range(TRANSACTION_RACE_ATTEMPTS):
        try:
            client.transact_write_items(TransactItems=list(actions), ClientRequestToken=token)
            return
        except ClientError as exc:
            race = race_of(exc)
            if race is None:
                raise
            lost: ClientError = exc
        if race == "conflict":
            token = str(uuid.uuid4())  # nothing was applied: a new transaction, not a repeat
        wait = full_jitter(
            attempt, TRANSACTION_RACE_BACKOFF_BASE_SECONDS, TRANSACTION_RACE_BACKOFF_CAP_SECONDS
        )
        if (
            attempt + 1 == TRANSACTION_RACE_ATTEMPTS
            or monotonic() + wait > deadline
            or not invocation.time_for(wait)
        ):
            break
        sleep(wait)
    raise busy() from lost
